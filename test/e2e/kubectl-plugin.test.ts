// `kubectl gc` through the real kubectl binary: npm ci links
// node_modules/.bin/kubectl-gc (scripts/link-bin.mjs), kubectl finds it on
// PATH, and the plugin's commands take kubectl's --kubeconfig, --context, -n
// and KUBECONFIG as kubectl does. Against the shared e2e control plane.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../../cluster/controlplane.ts';
import type { ExplainedObject } from '../../src/explain/explain.ts';
import type { Report } from '../../src/doctor/analyze.ts';
import { afterFile, e2e } from '../support/e2e.ts';
import { configMap, ownerRef } from '../support/objects.ts';

const execFileAsync = promisify(execFile);
const { cluster, c, namespace } = await e2e({ deleteNamespaces: true });
const BIN = path.join(REPO_ROOT, 'node_modules', '.bin');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `kubectl ARGS` with the project's .bin first on PATH (as docs/kubectl-plugin.md says). */
async function kubectl(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  try {
    const { stdout, stderr } = await execFileAsync(cluster.kubectl, args, {
      env: { ...process.env, KUBECONFIG: '', ...env, PATH: `${BIN}:${process.env.PATH ?? ''}` },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const ns = await namespace('kubectl-gc');
const ghost = { apiVersion: 'v1', kind: 'ConfigMap', name: 'ghost', uid: 'uid-of-no-object' };
await configMap(c, ns, 'leak', [ownerRef(ghost)]);

/** A kubeconfig whose current context points nowhere, and a context "e2e" that works. */
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubectl-gc-'));
afterFile(() => fs.rm(dir, { recursive: true, force: true }));
const twoContexts = path.join(dir, 'two-contexts.json');
{
  const kc = JSON.parse(await fs.readFile(cluster.kubeconfig, 'utf8')) as {
    clusters: { name: string; cluster: { server: string } }[];
    contexts: { name: string; context: { cluster: string; user: string } }[];
    'current-context': string;
  };
  const real = kc.contexts.find((x) => x.name === kc['current-context']);
  if (!real) throw new Error('the e2e kubeconfig has no current context');
  const first = kc.clusters[0];
  if (!first) throw new Error('the e2e kubeconfig has no cluster');
  kc.clusters.push({
    name: 'nowhere',
    cluster: { ...first.cluster, server: 'https://127.0.0.1:1' },
  });
  kc.contexts = [
    { name: 'e2e', context: real.context },
    { name: 'nowhere', context: { ...real.context, cluster: 'nowhere' } },
  ];
  kc['current-context'] = 'nowhere';
  await fs.writeFile(twoContexts, JSON.stringify(kc), { mode: 0o600 });
}

const explained = (r: Run): ExplainedObject => {
  if (r.code !== 0) throw new Error(`kubectl gc explain exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as ExplainedObject;
};

test('kubectl finds the plugin that npm ci installed', async () => {
  const r = await kubectl(['plugin', 'list']);
  expect(r.stdout).toContain(path.join(BIN, 'kubectl-gc'));
  const help = await kubectl(['gc', '--help']);
  expect(help.code).toBe(0);
  expect(help.stdout).toContain('usage: kubectl gc <command>');
});

test('kubectl gc explain with --kubeconfig and -n; and with KUBECONFIG', async () => {
  const withFlag = explained(
    await kubectl([
      'gc',
      'explain',
      'configmap/leak',
      '-n',
      ns,
      '-o',
      'json',
      '--kubeconfig',
      cluster.kubeconfig,
    ]),
  );
  expect(withFlag.name).toBe('leak');
  expect(withFlag.namespace).toBe(ns);
  expect(withFlag.owners.map((o) => [o.name, o.state])).toEqual([['ghost', 'dangling']]);
  const withEnv = explained(
    await kubectl(['gc', 'explain', 'configmap/leak', '-n', ns, '-o', 'json'], {
      KUBECONFIG: cluster.kubeconfig,
    }),
  );
  expect(withEnv.uid).toBe(withFlag.uid);
});

test("kubectl gc doctor -n reports the leak; --context picks the kubeconfig's context", async () => {
  const run = await kubectl([
    'gc',
    'doctor',
    '-n',
    ns,
    '-o',
    'json',
    '--kubeconfig',
    twoContexts,
    '--context',
    'e2e',
  ]);
  expect(run.code).toBe(1); // findings
  const report = JSON.parse(run.stdout) as Report;
  expect(report.findings.map((f) => [f.kind, f.object.name])).toEqual([
    ['leaked-dependent', 'leak'],
  ]);
  // Without --context: its current context, which points nowhere.
  const current = await kubectl(['gc', 'doctor', '-n', ns, '--kubeconfig', twoContexts]);
  expect(current.code).toBe(3);
  // A context the file does not have: a usage error naming it.
  const missing = await kubectl([
    'gc',
    'explain',
    'configmap/leak',
    '-n',
    ns,
    '--kubeconfig',
    twoContexts,
    '--context',
    'nope',
  ]);
  expect(missing.code).toBe(2);
  expect(missing.stderr).toContain('context "nope" not found');
});

test('only the read-only commands are the plugin', async () => {
  const r = await kubectl(['gc', 'controller', '--kubeconfig', cluster.kubeconfig]);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('kubectl gc: unknown command "controller"');
});
