// `kubectl gc` through the real kubectl binary: npm ci links
// node_modules/.bin/kubectl-gc (scripts/link-bin.mjs), kubectl finds it on
// PATH, and the plugin's commands take kubectl's --kubeconfig, --context, -n
// and KUBECONFIG as kubectl does. Against the shared e2e control plane.
// And as krew installs it: `npm run krew` builds the archive and renders the
// manifest, and the real krew (built from a pinned release) installs them.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../../cluster/controlplane.ts';
import { krewBinary } from '../../cluster/go-tools.ts';
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
async function kubectl(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  path_ = `${BIN}:${process.env.PATH ?? ''}`,
): Promise<Run> {
  return run(cluster.kubectl, args, { ...process.env, KUBECONFIG: '', ...env, PATH: path_ });
}

async function run(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  try {
    const { stdout, stderr } = await execFileAsync(file, args, {
      env,
      cwd: REPO_ROOT,
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

/** `kubectl gc explain` of the leaked ConfigMap, as JSON, with --kubeconfig and -n. */
const EXPLAIN_LEAK = [
  'gc',
  'explain',
  'configmap/leak',
  '-n',
  ns,
  '-o',
  'json',
  '--kubeconfig',
  cluster.kubeconfig,
];

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
  const withFlag = explained(await kubectl(EXPLAIN_LEAK));
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

describe('kubectl gc from krew', () => {
  /** Without node_modules/.bin (whose kubectl-gc would answer instead), with a Node.js 24. */
  const userPath = (...first: string[]): string =>
    [
      ...first,
      path.dirname(process.execPath),
      ...(process.env.PATH ?? '').split(':').filter((d) => !d.split('/').includes('node_modules')),
    ].join(':');

  async function release(
    name: string,
  ): Promise<{ manifest: string; archive: string; sha256: string }> {
    const out = path.join(dir, name);
    const r = await run('npm', ['run', 'krew', '--', '--out', out], process.env);
    if (r.code !== 0) throw new Error(`npm run krew exited ${r.code}: ${r.stderr}`);
    const field = (label: string): string => {
      const m = new RegExp(`^${label} +(\\S+)$`, 'm').exec(r.stdout);
      if (!m?.[1]) throw new Error(`npm run krew printed no ${label}: ${r.stdout}`);
      return m[1];
    };
    return {
      manifest: path.resolve(REPO_ROOT, field('manifest')),
      archive: path.resolve(REPO_ROOT, field('archive')),
      sha256: field('sha256'),
    };
  }

  /** `kubectl krew install --manifest M --archive A` into its own KREW_ROOT. */
  async function krewInstall(root: string, manifest: string, archive: string): Promise<Run> {
    const krew = path.dirname(await krewBinary());
    return kubectl(
      ['krew', 'install', '--manifest', manifest, '--archive', archive],
      // No upgrade check: it would ask GitHub (nothing leaves this machine).
      { KREW_ROOT: root, KREW_NO_UPGRADE_CHECK: '1' },
      userPath(krew),
    );
  }

  test('npm run krew makes the same archive from the same source', async () => {
    const [a, b] = [await release('krew-a'), await release('krew-b')];
    expect(b.sha256).toBe(a.sha256);
    const manifest = await fs.readFile(a.manifest, 'utf8');
    expect(manifest).toContain(`sha256: ${a.sha256}`);
    expect(manifest).toContain(`/${path.basename(a.archive)}\n`);
    expect(manifest).not.toContain('{{');
  }, 120_000);

  test('krew installs the manifest and archive, and kubectl runs the plugin it installed', async () => {
    const { manifest, archive } = await release('krew-install');
    const root = path.join(dir, 'krew-root');
    const installed = await krewInstall(root, manifest, archive);
    expect(installed.stderr + installed.stdout).toContain('Installed plugin: gc');
    expect(installed.code).toBe(0);

    const asUser = userPath(path.join(root, 'bin'));
    const list = await kubectl(['plugin', 'list'], {}, asUser);
    expect(list.stdout).toContain(path.join(root, 'bin', 'kubectl-gc'));
    const r = await kubectl(EXPLAIN_LEAK, {}, asUser);
    expect(explained(r).owners.map((o) => [o.name, o.state])).toEqual([['ghost', 'dangling']]);
  }, 600_000);

  test('krew refuses an archive that is not the one the manifest names', async () => {
    const { manifest, archive } = await release('krew-tampered');
    await fs.appendFile(archive, Buffer.from([0]));
    const refused = await krewInstall(path.join(dir, 'krew-root-tampered'), manifest, archive);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr + refused.stdout).toContain('checksum does not match');
  }, 600_000);
});
