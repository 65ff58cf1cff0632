import fs from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { inClusterConfig, loadKubeConfig, nativeFromFile } from './kubeconfig.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kubegc-kubeconfig-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const b64 = (s: string): string => Buffer.from(s).toString('base64');

function write(name: string, user: Record<string, unknown>, cluster: Record<string, unknown> = {}) {
  const file = path.join(dir, name);
  fs.writeFileSync(
    file,
    `apiVersion: v1
kind: Config
current-context: ctx
contexts:
  - name: other
    context: { cluster: nope, user: nope }
  - name: ctx
    context: { cluster: c, user: u, namespace: ns }
clusters:
  - name: c
    cluster: ${JSON.stringify({ server: 'https://127.0.0.1:6443', ...cluster })}
users:
  - name: u
    user: ${JSON.stringify(user)}
`,
  );
  return file;
}

async function applied(kc: { applyToHTTPSOptions(o: https.RequestOptions): Promise<void> }) {
  const o: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(o);
  return o;
}

test('client certificate and CA as data: read natively, TLS options and no token', async () => {
  const kc = nativeFromFile(
    write(
      'certs',
      { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') },
      { 'certificate-authority-data': b64('CA'), 'tls-server-name': 'api.example' },
    ),
  );
  expect(kc?.getCurrentCluster()).toEqual({ server: 'https://127.0.0.1:6443' });
  const o = await applied(kc ?? fail('not native'));
  expect(String(o.ca)).toBe('CA');
  expect(String(o.cert)).toBe('CERT');
  expect(String(o.key)).toBe('KEY');
  expect(o.servername).toBe('api.example');
  expect(o.rejectUnauthorized).toBeUndefined();
  expect(o.headers).toBeUndefined();
});

test('files relative to the kubeconfig, a token file read on every use (rotation)', async () => {
  fs.mkdirSync(path.join(dir, 'pki'));
  fs.writeFileSync(path.join(dir, 'pki', 'ca.crt'), 'CA-FILE');
  fs.writeFileSync(path.join(dir, 'token'), 'first\n');
  const kc = nativeFromFile(
    write(
      'files',
      { tokenFile: 'token' },
      { 'certificate-authority': 'pki/ca.crt', 'insecure-skip-tls-verify': true },
    ),
  );
  const o = await applied(kc ?? fail('not native'));
  expect(String(o.ca)).toBe('CA-FILE');
  expect(o.rejectUnauthorized).toBe(false);
  expect(o.headers).toEqual({ Authorization: 'Bearer first' });
  fs.writeFileSync(path.join(dir, 'token'), 'rotated\n');
  expect((await applied(kc ?? fail('not native'))).headers).toEqual({
    Authorization: 'Bearer rotated',
  });
});

test('a literal token', async () => {
  const kc = nativeFromFile(write('token', { token: 'abc' }));
  expect((await applied(kc ?? fail('not native'))).headers).toEqual({
    Authorization: 'Bearer abc',
  });
});

test.each([
  ['an exec plugin', { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'x' } }, {}],
  ['an auth-provider', { 'auth-provider': { name: 'oidc' } }, {}],
  ['basic auth', { username: 'u', password: 'p' }, {}],
  ['a proxy', { token: 't' }, { 'proxy-url': 'http://proxy:3128' }],
])('%s: left to client-node', (_what, user, cluster) => {
  expect(nativeFromFile(write('other', user, cluster))).toBeUndefined();
});

test('client-node reads what the native reader does not (an exec plugin), on demand', async () => {
  const script = path.join(dir, 'cred.sh');
  fs.writeFileSync(
    script,
    `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}'\n`,
    { mode: 0o755 },
  );
  const file = write('exec', {
    exec: {
      apiVersion: 'client.authentication.k8s.io/v1',
      command: script,
      interactiveMode: 'Never',
    },
  });
  const kc = await loadKubeConfig(file);
  const o = await applied(kc);
  expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
  expect((o.headers as Record<string, string>).Authorization).toBe('Bearer from-exec');
});

test('in-cluster: the service account directory and KUBERNETES_SERVICE_HOST/PORT (IPv6 bracketed)', async () => {
  fs.writeFileSync(path.join(dir, 'token'), 'sa-token');
  fs.writeFileSync(path.join(dir, 'ca.crt'), 'SA-CA');
  const kc = inClusterConfig(
    { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
    dir,
  );
  expect(kc?.getCurrentCluster()).toEqual({ server: 'https://[fd00::1]:443' });
  const o = await applied(kc ?? fail('no in-cluster config'));
  expect(String(o.ca)).toBe('SA-CA');
  expect(o.headers).toEqual({ Authorization: 'Bearer sa-token' });
  expect(inClusterConfig({ KUBERNETES_SERVICE_HOST: 'h' }, dir)).toBeUndefined();
  expect(
    inClusterConfig({ KUBERNETES_SERVICE_HOST: 'h', KUBERNETES_SERVICE_PORT: '1' }, '/nonexistent'),
  ).toBeUndefined();
});

test('a missing or malformed file: a clear error naming it', async () => {
  await expect(loadKubeConfig('/nonexistent/kubeconfig')).rejects.toThrow(
    /cannot load kubeconfig \/nonexistent\/kubeconfig/,
  );
  const bad = path.join(dir, 'bad');
  fs.writeFileSync(bad, 'just a string');
  await expect(loadKubeConfig(bad)).rejects.toThrow(/is not a kubeconfig/);
});

function fail(why: string): never {
  throw new Error(why);
}

test('--context: the named context instead of the current one, natively and through client-node; a missing one is named', async () => {
  const file = write('contexts', { token: 'abc' });
  // The file's "other" context names a cluster and user it does not have:
  // not readable natively, so client-node answers (with no cluster).
  expect((await loadKubeConfig(file, 'ctx')).getCurrentCluster()?.server).toBe(
    'https://127.0.0.1:6443',
  );
  await expect(loadKubeConfig(file, 'other')).rejects.toThrow(/no current cluster/);
  await expect(loadKubeConfig(file, 'nope')).rejects.toThrow(`context "nope" not found in ${file}`);
  const exec = write('exec-contexts', {
    exec: {
      apiVersion: 'client.authentication.k8s.io/v1',
      command: 'true',
      interactiveMode: 'Never',
    },
  });
  expect((await loadKubeConfig(exec, 'ctx')).getCurrentCluster()?.server).toBe(
    'https://127.0.0.1:6443',
  );
  await expect(loadKubeConfig(exec, 'nope')).rejects.toThrow(`context "nope" not found in ${exec}`);
});
