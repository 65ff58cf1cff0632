// The garbage collectors under test, as processes: kubegc (this repository's
// CLI) and kube-controller-manager running only its garbage collector. Each
// start reports when its initial sync is done, measured from just before the
// process is spawned, and exposes its PID for RSS readings.
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { controllerArgs, KUBEGC_DIST_CLI, kubegcArgv } from '../../cluster/kubegc-command.ts';
import { RUNTIME_FLAGS } from '../../src/runtime-flags.ts';
import {
  CONTROLLERS_GC_ONLY,
  delay,
  logFile,
  startExtraControllerManager,
  type Cluster,
} from '../../cluster/controlplane.ts';

export interface Running {
  name: string;
  pid: number;
  /** performance.now() just before the spawn. */
  startedAt: number;
  /** Resolves with seconds from spawn to initial sync done; rejects if the process dies first. */
  synced: Promise<number>;
  /**
   * Seconds from spawn to "every informer has listed" (kubegc's `informers
   * listed`; kcm logs one line for both, so its `synced`); null if the line
   * never came before `synced`.
   */
  listed: Promise<number | null>;
  /** kubegc only: its /metrics URL (from its start-up log line). */
  metricsUrl?: string;
  stop(): Promise<void>;
}

export type ContenderKind = 'kubegc' | 'kcm';

export interface ContenderSpec {
  kind: ContenderKind;
  /** Its own flags; the table's label is built from them (contenderLabel). */
  args: string[];
  /**
   * kubegc only: start node with kubegc's runtime flags (src/runtime-flags.ts,
   * as the image and the bin do); false for the A/B without them.
   */
  runtimeFlags?: boolean;
  /** kubegc only: run Extras.baselineEntry (another commit's build) instead of this tree's. */
  baseline?: boolean;
}

/** kube-controller-manager's own flags for "equal" settings; note its GC doubles the QPS it is given. */
export const KCM_EQUAL_ARGS = [
  '--kube-api-qps=500',
  '--kube-api-burst=1000',
  '--concurrent-gc-syncs=20',
];

/**
 * kube-controller-manager's GC client budget at its defaults: --kube-api-qps
 * 20 doubled for the GC's client (cmd/kube-controller-manager/app/core.go:
 * `config.QPS *= 2`), --kube-api-burst 30 (not doubled), 20 workers.
 */
export const KCM_BUDGET_ARGS = ['--kube-api-qps=40', '--kube-api-burst=30', '--workers=20'];

export const CONTENDERS = {
  kubegc: { kind: 'kubegc', args: [] },
  kubegc_kcm_budget: { kind: 'kubegc', args: KCM_BUDGET_ARGS },
  kubegc_no_runtime_flags: { kind: 'kubegc', args: [], runtimeFlags: false },
  kubegc_baseline: { kind: 'kubegc', args: [], baseline: true },
  kcm_default: { kind: 'kcm', args: [] },
  kcm_equal: { kind: 'kcm', args: KCM_EQUAL_ARGS },
} satisfies Record<string, ContenderSpec>;

export type ContenderKey = keyof typeof CONTENDERS | 'ceiling';

/** The row label: the command line actually run, extras included (not a description of it). */
export function contenderLabel(key: ContenderKey, extras?: Extras): string {
  if (key === 'ceiling') return 'ceiling: no GC, a plain client deletes (20 in flight)';
  const spec: ContenderSpec = CONTENDERS[key];
  if (spec.kind === 'kcm') {
    const args = [...spec.args, ...(extras?.kcmArgs ?? [])];
    return `kcm GC ${args.length ? args.join(' ') : '(defaults)'}`;
  }
  const args = [...spec.args, ...(extras?.kubegcArgs ?? [])];
  const node = [
    ...(spec.runtimeFlags === false ? [] : RUNTIME_FLAGS),
    ...(extras?.nodeFlags ?? []),
  ];
  const entry = spec.baseline
    ? ` [baseline: ${extras?.baselineEntry ?? 'none given'}]`
    : extras?.kubegcEntry
      ? ` [${extras.kubegcEntry}]`
      : '';
  return `kubegc${entry} ${args.length ? args.join(' ') : '(defaults)'}; node ${node.length ? node.join(' ') : '(no flags)'}`;
}

let starts = 0;

/** Experiment knobs: extra Node.js/V8 flags for kubegc, extra arguments for either GC. */
export interface Extras {
  nodeFlags: string[];
  kubegcArgs: string[];
  kcmArgs: string[];
  /**
   * A directory: each kubegc started for a memory measurement writes a heap
   * snapshot there once its RSS has settled (the running controller, to see
   * where its bytes per object go; `bench/heap-summary.ts` reads them).
   */
  heapSnapshotDir?: string;
  /**
   * Another built kubegc to run instead of this tree's dist/cli.js (a build
   * of another commit, for a baseline measured beside this one).
   */
  kubegcEntry?: string;
  /** The build the `kubegc_baseline` contender runs (a dist/cli.js of another commit). */
  baselineEntry?: string;
}

export function start(cluster: Cluster, spec: ContenderSpec, extras?: Extras): Promise<Running> {
  const logName = `bench-${spec.kind}-${++starts}`;
  return spec.kind === 'kubegc'
    ? startKubegc(
        cluster,
        logName,
        [...spec.args, ...(extras?.kubegcArgs ?? [])],
        [
          ...(extras?.nodeFlags ?? []),
          ...(extras?.heapSnapshotDir
            ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${extras.heapSnapshotDir}`]
            : []),
        ],
        spec.runtimeFlags === false ? [] : RUNTIME_FLAGS,
        kubegcEntry(spec, extras),
      )
    : startKcmGc(cluster, logName, [...spec.args, ...(extras?.kcmArgs ?? [])]);
}

function kubegcEntry(spec: ContenderSpec, extras: Extras | undefined): string {
  if (!spec.baseline) return extras?.kubegcEntry ?? KUBEGC_DIST_CLI;
  if (!extras?.baselineEntry)
    throw new Error('kubegc_baseline needs a baseline build (--baseline)');
  return extras.baselineEntry;
}

const SYNC_TIMEOUT_MS = 180_000;

/**
 * Resolves with seconds since `startedAt` once `file` contains `marker`.
 * Both GCs log straight into a file, as they would in production: a pipe read
 * by this (busy) benchmark process could block their writes and slow them.
 * Reading the file every 20 ms bounds the error of the instant to that.
 */
async function waitForLine(
  file: string,
  marker: string,
  startedAt: number,
  dead: () => boolean,
  onText: (text: string) => void = () => undefined,
): Promise<number> {
  for (const deadline = startedAt + SYNC_TIMEOUT_MS; performance.now() < deadline;) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    onText(text);
    if (text.includes(marker)) return (performance.now() - startedAt) / 1000;
    if (dead()) throw new Error(`the process exited before its initial sync; see ${file}`);
    await delay(20);
  }
  throw new Error(`no initial sync within ${SYNC_TIMEOUT_MS / 1000} s; see ${file}`);
}

/** kubegc: synced when it logs "garbage collector started" (graph built, workers running). */
async function startKubegc(
  cluster: Cluster,
  logName: string,
  args: string[],
  nodeFlags: string[],
  runtimeFlags: readonly string[],
  entry: string,
): Promise<Running> {
  const file = logFile(cluster.dir, logName);
  const fd = openSync(file, 'w');
  const startedAt = performance.now();
  const child = spawn(
    process.execPath,
    // Plain HTTP metrics on loopback: the harness reads them without a token.
    kubegcArgv(
      controllerArgs(cluster.kubeconfig, ['--metrics-secure=false', ...args]),
      nodeFlags,
      entry,
      runtimeFlags,
    ),
    { stdio: ['ignore', 'ignore', fd] },
  );
  closeSync(fd);
  const pid = child.pid;
  if (pid === undefined) throw new Error('kubegc did not start');
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const gone = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const running: Running = {
    name: 'kubegc',
    pid,
    startedAt,
    synced: Promise.resolve(0),
    listed: Promise.resolve(null),
    stop,
  };
  let listedAt: number | null = null;
  running.synced = waitForLine(file, '"garbage collector started"', startedAt, gone, (text) => {
    const address = /"metricsAddress":"([^"]+)"/.exec(text)?.[1];
    if (address) running.metricsUrl = `http://${address}/metrics`;
    // Both markers from the same reads of the file: the earlier one is timed
    // on the read that first shows it.
    if (listedAt === null && text.includes('"informers listed"'))
      listedAt = (performance.now() - startedAt) / 1000;
  });
  running.listed = running.synced.then(() => listedAt);
  running.synced.catch(() => undefined);
  running.listed.catch(() => undefined);
  return running;
  async function stop(): Promise<void> {
    if (gone()) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(killer);
  }
}

const KCM_SYNCED = 'Garbage collector: all resource monitors have synced';

/** kube-controller-manager with only its GC: synced at its "all resource monitors have synced" line. */
async function startKcmGc(cluster: Cluster, logName: string, args: string[]): Promise<Running> {
  const file = logFile(cluster.dir, logName);
  await fs.rm(file, { force: true });
  const startedAt = performance.now();
  const proc = await startExtraControllerManager(cluster, logName, CONTROLLERS_GC_ONLY, args);
  let stopped = false;
  const synced = waitForLine(file, KCM_SYNCED, startedAt, () => stopped || !alive(proc.pid));
  synced.catch(() => undefined);
  const stop = async (): Promise<void> => {
    stopped = true;
    await proc.stop();
  };
  return { name: 'kcm', pid: proc.pid, startedAt, synced, listed: synced, stop };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** One gauge from a Prometheus text exposition (the first series of that name), or undefined. */
export async function scrapeGauge(url: string, metric: string): Promise<number | undefined> {
  const text = await (await fetch(url)).text();
  const m = new RegExp(`^${metric}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

/**
 * The sum of every series of `metric` whose labels match `labels` (all
 * series without it), from a Prometheus text exposition: counters that other
 * labels split (a queue's lanes, a request's codes) are counted whole.
 */
export async function scrapeSum(url: string, metric: string, labels?: RegExp): Promise<number> {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${metric}(\\{[^}]*\\})? (\\S+)$`, 'gm')))
    if (!labels || labels.test(m[1] ?? '')) sum += Number(m[2]);
  return sum;
}

/** CPU seconds (user + system) a process has used so far, from /proc/PID/stat. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) in parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}
/**
 * Bytes the process has read through read(2) and friends so far
 * (/proc/PID/io rchar): for a GC that has just synced, nearly all of it is
 * what its LISTs and watch-lists brought over the wire (TLS and HTTP/2 framing
 * included); files it read at start-up show in the near-empty row.
 */
export async function bytesRead(pid: number): Promise<number> {
  const io = await fs.readFile(`/proc/${pid}/io`, 'utf8');
  const m = /^rchar:\s+(\d+)/m.exec(io);
  if (!m?.[1]) throw new Error(`no rchar for ${pid}`);
  return Number(m[1]);
}
/** USER_HZ: 100 on every Linux architecture Node runs on. */
const CLOCK_TICKS = 100;

/** The control plane's own processes (from its state file), to account their CPU. */
export async function controlPlanePids(cluster: Cluster): Promise<Record<string, number>> {
  const state = JSON.parse(await fs.readFile(path.join(cluster.dir, 'state.json'), 'utf8')) as {
    processes: Record<string, { pid: number }>;
  };
  return Object.fromEntries(Object.entries(state.processes).map(([k, v]) => [k, v.pid]));
}

/**
 * Has a kubegc started with `--heapsnapshot-signal=SIGUSR2` write a heap
 * snapshot into `dir` and returns its path once complete (V8 writes it
 * synchronously: the process answers its metrics again when it is done).
 */
export async function heapSnapshot(
  pid: number,
  dir: string,
  metricsUrl: string | undefined,
): Promise<string> {
  const before = new Set(await fs.readdir(dir));
  process.kill(pid, 'SIGUSR2');
  for (const deadline = performance.now() + 180_000; performance.now() < deadline;) {
    await delay(500);
    const file = (await fs.readdir(dir)).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    if (!file) continue;
    // The metrics answer again once the (synchronous) snapshot is written.
    if (
      metricsUrl &&
      !(await fetch(metricsUrl).then(
        (r) => r.ok,
        () => false,
      ))
    )
      continue;
    return path.join(dir, file);
  }
  throw new Error(`no heap snapshot from ${pid} in ${dir} within 180 s`);
}

/** Resident set size of a process, from /proc/PID/status (VmRSS), in bytes. */
export async function rssBytes(pid: number): Promise<number> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!m?.[1]) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/**
 * RSS once it has settled after the initial sync: sampled every 250 ms until
 * the last 2 s of samples lie within 2% of each other (at most 20 s). Both
 * runtimes keep growing for a moment after their sync (graph building, GC).
 */
export async function settledRss(pid: number): Promise<number> {
  const samples: number[] = [];
  for (const deadline = performance.now() + 20_000; performance.now() < deadline;) {
    samples.push(await rssBytes(pid));
    const window = samples.slice(-9);
    if (window.length === 9 && Math.max(...window) <= Math.min(...window) * 1.02) break;
    await delay(250);
  }
  return samples[samples.length - 1] ?? 0;
}
