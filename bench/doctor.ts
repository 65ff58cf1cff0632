// `kubegc doctor` on a big cluster: wall time and peak RSS of one whole scan.
// A control plane of its own (.cluster-bench-doctor, no garbage collector
// running) holds N ConfigMaps in one namespace, half of them owned by the
// other half, plus a few planted findings: owners stuck in foreground
// deletion behind a dependent with a finalizer, and dependents whose owner
// was deleted (leaks). Each run starts `kubegc doctor -o json` as a child
// process under /usr/bin/time -v (its "Maximum resident set size" is the
// kernel's own peak of the process; without GNU time, VmHWM from
// /proc/PID/status, sampled until exit) and checks that it found exactly the
// planted findings.
//
//   npm run bench:doctor -- [--objects 200000] [--runs 3] [--create-concurrency 200]
//                           [--dist] [--keep-cluster]
//
// --dist runs dist/cli.js (npm run build first), else src/cli.ts (type
// stripping). With --keep-cluster the objects stay, and the next run with the
// same --objects reuses them. Writes bench/results/doctor-latest.json.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KUBEGC_CLI, KUBEGC_DIST_CLI, kubegcArgv } from '../cluster/kubegc-command.ts';
import { REPO_ROOT, down, up, type Cluster } from '../cluster/controlplane.ts';
import type { KubeClient } from '../src/api/client.ts';
import type { Report } from '../src/doctor/analyze.ts';
import { benchClient, pool } from './lib/kube.ts';
import { machine, RESULTS_DIR } from './lib/report.ts';

const argv = process.argv.slice(2);
const opt = (name: string, fallback: string): string => {
  const i = argv.indexOf(name);
  return i === -1 ? fallback : (argv[i + 1] ?? fallback);
};
const positiveInt = (name: string, fallback: string): number => {
  const v = Number(opt(name, fallback));
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const OBJECTS = positiveInt('--objects', '200000');
const RUNS = positiveInt('--runs', '3');
const CREATE_CONCURRENCY = positiveInt('--create-concurrency', '200');
const KEEP = argv.includes('--keep-cluster');
const ENTRY = argv.includes('--dist') ? KUBEGC_DIST_CLI : KUBEGC_CLI;
if (OBJECTS < 2) throw new Error('--objects must be at least 2');

const DIR = path.join(REPO_ROOT, '.cluster-bench-doctor');
const NS = 'doctor-bench';
const COMPLETE = 'kubegc.bench/objects';
const HOLD = 'kubegc.bench/hold';
/** Planted: owners stuck in foreground deletion, and dependents of deleted owners. */
const STUCK = 5;
const LEAKED = 5;
const GNU_TIME = '/usr/bin/time';

const log = (l: string): void => void process.stderr.write(`doctor bench: ${l}\n`);
const configmaps = `/api/v1/namespaces/${NS}/configmaps`;

interface Created {
  uid: string;
}

async function create(
  client: KubeClient,
  name: string,
  extra: { owner?: { name: string; uid: string; block?: boolean }; finalizers?: string[] } = {},
): Promise<string> {
  const metadata: Record<string, unknown> = { name };
  if (extra.owner)
    metadata.ownerReferences = [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        name: extra.owner.name,
        uid: extra.owner.uid,
        ...(extra.owner.block ? { blockOwnerDeletion: true } : {}),
      },
    ];
  if (extra.finalizers) metadata.finalizers = extra.finalizers;
  for (let attempt = 0; ; attempt++) {
    try {
      const c = await client.request<{ metadata: Created }>('POST', configmaps, {
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata },
      });
      return c.metadata.uid;
    } catch (err) {
      // A create that timed out may have landed: read it back.
      if ((err as { status?: number }).status === 409) {
        const c = await client.request<{ metadata: Created }>('GET', `${configmaps}/${name}`);
        return c.metadata.uid;
      }
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 500 * (attempt + 1)));
    }
  }
}

async function namespaceAnnotation(client: KubeClient): Promise<string | null | undefined> {
  try {
    const ns = await client.request<{ metadata?: { annotations?: Record<string, string> } }>(
      'GET',
      `/api/v1/namespaces/${NS}`,
    );
    return ns.metadata?.annotations?.[COMPLETE] ?? null;
  } catch (err) {
    if ((err as { status?: number }).status === 404) return undefined;
    throw err;
  }
}

async function populate(client: KubeClient): Promise<{ seconds: number; perSecond: number }> {
  await client.request('POST', '/api/v1/namespaces', {
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
  });
  const t0 = performance.now();
  const half = Math.floor(OBJECTS / 2);
  const owners = Array.from({ length: OBJECTS - half }, (_, i) => `owner-${i}`);
  let done = 0;
  const step = Math.max(1, Math.floor(OBJECTS / 10));
  const progress = (): void => {
    if (++done % step === 0)
      log(`created ${done}/${OBJECTS} (${Math.round(done / ((performance.now() - t0) / 1000))}/s)`);
  };
  const ownerUids = await pool(owners, CREATE_CONCURRENCY, async (name) => {
    const uid = await create(client, name);
    progress();
    return uid;
  });
  await pool(
    Array.from({ length: half }, (_, i) => i),
    CREATE_CONCURRENCY,
    async (i) => {
      await create(client, `dependent-${i}`, {
        owner: { name: owners[i] as string, uid: ownerUids[i] as string },
      });
      progress();
    },
  );
  const seconds = (performance.now() - t0) / 1000;
  for (let i = 0; i < STUCK; i++) {
    const uid = await create(client, `stuck-owner-${i}`);
    await create(client, `stuck-holder-${i}`, {
      owner: { name: `stuck-owner-${i}`, uid, block: true },
      finalizers: [HOLD],
    });
    // No garbage collector runs here: the owner keeps foregroundDeletion.
    await client.request('DELETE', `${configmaps}/stuck-owner-${i}`, {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Foreground' },
    });
  }
  for (let i = 0; i < LEAKED; i++) {
    const uid = await create(client, `leak-owner-${i}`);
    await create(client, `leak-dependent-${i}`, { owner: { name: `leak-owner-${i}`, uid } });
    await client.request('DELETE', `${configmaps}/leak-owner-${i}`, {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' },
    });
  }
  await client.request('PATCH', `/api/v1/namespaces/${NS}`, {
    body: { metadata: { annotations: { [COMPLETE]: String(OBJECTS) } } },
    contentType: 'application/merge-patch+json',
  });
  return { seconds, perSecond: Math.round(OBJECTS / seconds) };
}

interface Run {
  run: number;
  seconds: number;
  peakRssMiB: number;
  userCpuSeconds: number | null;
  systemCpuSeconds: number | null;
  rssSource: 'gnu-time' | 'proc-vmhwm';
  exitCode: number | null;
  objectsScanned?: number;
  stuckFound?: number;
  leakedFound?: number;
  ok: boolean;
  error?: string;
}

async function vmHwmKiB(pid: number): Promise<number | undefined> {
  const text = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const m = /^VmHWM:\s+(\d+) kB/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

async function runDoctor(cluster: Cluster, n: number): Promise<Run> {
  const doctorArgv = kubegcArgv(
    ['doctor', '--kubeconfig', cluster.kubeconfig, '-o', 'json'],
    [],
    ENTRY,
  );
  const timeFile = path.join(os.tmpdir(), `kubegc-doctor-bench-${process.pid}-${n}.time`);
  const gnu = existsSync(GNU_TIME);
  const [cmd, args] = gnu
    ? [GNU_TIME, ['-v', '-o', timeFile, process.execPath, ...doctorArgv]]
    : [process.execPath, doctorArgv];
  const t0 = performance.now();
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => err.push(b));
  let hwm = 0;
  const sampler = gnu
    ? undefined
    : setInterval(() => {
        void vmHwmKiB(child.pid ?? 0).then((v) => {
          if (v !== undefined) hwm = Math.max(hwm, v);
        });
      }, 20);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const seconds = (performance.now() - t0) / 1000;
  if (sampler) clearInterval(sampler);
  const run: Run = {
    run: n,
    seconds: Math.round(seconds * 100) / 100,
    peakRssMiB: 0,
    userCpuSeconds: null,
    systemCpuSeconds: null,
    rssSource: gnu ? 'gnu-time' : 'proc-vmhwm',
    exitCode: code,
    ok: false,
  };
  if (gnu) {
    const t = await fs.readFile(timeFile, 'utf8').catch(() => '');
    await fs.rm(timeFile, { force: true });
    const num = (re: RegExp): number | null => {
      const m = re.exec(t);
      return m ? Number(m[1]) : null;
    };
    hwm = num(/Maximum resident set size \(kbytes\): (\d+)/) ?? 0;
    run.userCpuSeconds = num(/User time \(seconds\): ([\d.]+)/);
    run.systemCpuSeconds = num(/System time \(seconds\): ([\d.]+)/);
    // GNU time reports the child's status in its own exit code.
  }
  run.peakRssMiB = Math.round((hwm / 1024) * 10) / 10;
  try {
    const report = JSON.parse(Buffer.concat(out).toString('utf8')) as Report;
    const mine = report.findings.filter((f) => f.object.namespace === NS);
    run.objectsScanned = report.summary.objects;
    run.stuckFound = mine.filter((f) => f.kind === 'stuck-deletion').length;
    run.leakedFound = mine.filter((f) => f.kind === 'leaked-dependent').length;
    const problems: string[] = [];
    if (code !== 1) problems.push(`exit status ${code} (expected 1: findings)`);
    if (run.stuckFound !== STUCK)
      problems.push(`${run.stuckFound} stuck-deletion findings (planted ${STUCK})`);
    if (run.leakedFound !== LEAKED)
      problems.push(`${run.leakedFound} leaked-dependent findings (planted ${LEAKED})`);
    if (mine.length !== STUCK + LEAKED)
      problems.push(`${mine.length} findings in ${NS} (planted ${STUCK + LEAKED})`);
    if (report.summary.objects < OBJECTS)
      problems.push(`scanned ${report.summary.objects} objects, fewer than ${OBJECTS}`);
    if (report.notScanned.length)
      problems.push(`not scanned: ${report.notScanned.map((x) => x.resource).join(', ')}`);
    run.ok = problems.length === 0;
    if (!run.ok) run.error = problems.join('; ');
  } catch (e) {
    run.error = `no JSON report (${(e as Error).message}); stderr: ${Buffer.concat(err).toString('utf8').slice(-2000)}`;
  }
  return run;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

let cluster = await up({ dir: DIR, log });
let client = await benchClient(cluster.kubeconfig);
let creation: { seconds: number; perSecond: number } | 'reused';
try {
  const mark = await namespaceAnnotation(client);
  if (mark === String(OBJECTS)) {
    log(`reusing the ${OBJECTS} objects in namespace ${NS}`);
    creation = 'reused';
  } else {
    if (mark !== undefined) {
      // Another size, or an interrupted creation: start from an empty cluster.
      log(`namespace ${NS} holds another set of objects; starting a fresh control plane`);
      client.close();
      await down(DIR);
      cluster = await up({ dir: DIR, log });
      client = await benchClient(cluster.kubeconfig);
    }
    log(`creating ${OBJECTS} ConfigMaps (${CREATE_CONCURRENCY} requests in flight)`);
    creation = await populate(client);
    log(`created in ${creation.seconds.toFixed(1)} s (${creation.perSecond}/s)`);
  }
} finally {
  client.close();
}

const runs: Run[] = [];
for (let i = 1; i <= RUNS; i++) {
  const r = await runDoctor(cluster, i);
  runs.push(r);
  log(
    `run ${i}: ${r.seconds} s, peak RSS ${r.peakRssMiB} MiB, exit ${r.exitCode}${r.ok ? '' : `: ${r.error ?? ''}`}`,
  );
}

const good = runs.filter((r) => r.ok);
const command = `node ${kubegcArgv(['doctor', '--kubeconfig', 'KUBECONFIG', '-o', 'json'], [], path.relative(REPO_ROOT, ENTRY)).join(' ')}`;
const doc = {
  benchmark: 'doctor',
  date: new Date().toISOString(),
  objects: OBJECTS,
  layout: `${OBJECTS - Math.floor(OBJECTS / 2)} owner ConfigMaps, ${Math.floor(OBJECTS / 2)} dependents owned by one each, in namespace ${NS}; planted: ${STUCK} owners stuck in foreground deletion (their dependent holds ${HOLD}), ${LEAKED} dependents of deleted owners`,
  command,
  creation,
  runs,
  median:
    good.length > 0
      ? {
          seconds: median(good.map((r) => r.seconds)),
          peakRssMiB: median(good.map((r) => r.peakRssMiB)),
          objectsPerSecond: Math.round(
            median(good.map((r) => (r.objectsScanned ?? 0) / r.seconds)),
          ),
        }
      : null,
  machine: machine(cluster.version, path.join(cluster.binDir, 'kube-controller-manager')),
};
await fs.mkdir(RESULTS_DIR(REPO_ROOT), { recursive: true });
const file = path.join(RESULTS_DIR(REPO_ROOT), 'doctor-latest.json');
await fs.writeFile(file, `${JSON.stringify(doc, null, 2)}\n`);
if (!KEEP) await down(DIR);

console.log(`kubegc doctor on ${OBJECTS} ConfigMaps (${command})`);
for (const r of runs)
  console.log(
    `  run ${r.run}: ${r.seconds.toFixed(2)} s wall, peak RSS ${r.peakRssMiB} MiB${r.userCpuSeconds !== null ? `, CPU ${r.userCpuSeconds} s user + ${r.systemCpuSeconds ?? 0} s system` : ''}, ${r.objectsScanned ?? '?'} objects, ${r.ok ? 'findings as planted' : `FAILED: ${r.error ?? ''}`}`,
  );
if (doc.median)
  console.log(
    `  median: ${doc.median.seconds.toFixed(2)} s, ${doc.median.peakRssMiB} MiB peak RSS, ${doc.median.objectsPerSecond} objects/s`,
  );
console.log(`  written to ${path.relative(REPO_ROOT, file)}`);
if (good.length !== runs.length) process.exitCode = 1;
