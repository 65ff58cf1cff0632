// One million objects: kubegc and kube-controller-manager's GC started cold on
// a control plane holding a realistic mix (bench/lib/scale.ts), at growing
// sizes, then a 100,000-dependent cascade on top. See "One million objects"
// in bench/README.md, and the header of bench/lib/scale.ts for the mix.
//
//   npm run bench:scale                       1,000,000 objects, checkpoints 250k,500k,1M, cascade 100k
//   npm run bench:scale -- --objects 20000 --checkpoints 10000,20000 --cascade 2000   (a few minutes)
//
// Options:
//   --objects N          objects the harness creates (a multiple of 100, the unit of the mix; default 1,000,000)
//   --checkpoints A,B,.. sizes at which every contender is started cold (default N/4, N/2, N; N is always one)
//   --cascade N          dependents of the final cascade, created on top of the N objects (not part of
//                        them), in their own namespace; 0 skips it (default 100,000)
//   --contenders a,b     of kubegc, kubegc_no_runtime_flags, kcm_equal, kcm_default (default kubegc,kcm_equal)
//   --namespaces N       namespaces the mix is spread over (default 100)
//   --concurrency N      create requests in flight (default 200)
//   --keep-cluster       leave the control plane (and its objects) running in .cluster-bench-scale/
//   --reuse              use the objects a kept cluster already holds (creation is the slow part): sizes
//                        below what it holds are skipped, creation resumes or grows from there
//   --no-build           do not run `npm run build` first (dist/ must be current)
//   --render FILE        no run: re-render FILE (a bench/results/scale-*.json) to scale-latest.md and
//                        its section of bench/RESULTS.md (--results-md PATH: another file)
//
// Every GC runs alone: started on what the cluster holds, measured, stopped,
// and the object count checked unchanged (nothing to collect in the mix).
// Output: bench/results/scale-<timestamp>.json (every measurement),
// bench/results/scale-latest.md, the tables on stdout, and, for a run at the
// default sizes (or --render), the section between `<!-- scale: begin -->`
// and `<!-- scale: end -->` of bench/RESULTS.md.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as prettier from 'prettier';
import { apiRequest, delay, down, REPO_ROOT, up, type Cluster } from '../cluster/controlplane.ts';
import type { KubeClient } from '../src/api/client.ts';
import {
  CONTENDERS,
  contenderLabel,
  controlPlanePids,
  cpuSeconds,
  rssBytes,
  scrapeGauge,
  settledRss,
  start,
  type ContenderSpec,
  type Running,
} from './lib/contenders.ts';
import {
  benchClient,
  collectionVersion,
  createConfigMaps,
  createNamespace,
  deleteConfigMap,
  emptyCollection,
  ensureWidgetCrd,
  watchDeletes,
  type ObjectSpec,
} from './lib/kube.ts';
import { machine, RESULTS_DIR, table, writeResultsSection, type Machine } from './lib/report.ts';
import {
  countAll,
  countDiff,
  createUnits,
  ensureNamespaces,
  expectedCounts,
  KIND_NAMES,
  PER_UNIT,
  Semaphore,
  total,
  UNIT_OBJECTS,
  UNIT_OWNED,
  UNIT_TEXT,
  type Counts,
  type CreateContext,
} from './lib/scale.ts';
import { leastSquaresSlope, round2 } from './lib/stats.ts';

const CLUSTER_DIR = path.join(REPO_ROOT, '.cluster-bench-scale');
const STATE_FILE = path.join(CLUSTER_DIR, 'scale-state.json');
const RESULTS_MD = path.join(REPO_ROOT, 'bench', 'RESULTS.md');
const SECTION_TITLE = '## One million objects (bench/scale.ts)';

const SCALE_CONTENDERS = ['kubegc', 'kubegc_no_runtime_flags', 'kcm_equal', 'kcm_default'] as const;
type ScaleContender = (typeof SCALE_CONTENDERS)[number];

/** contenders.ts stops waiting for a sync after 180 s; past that this harness keeps reading the log, up to this. */
const SYNC_DEADLINE_MS = 30 * 60_000;
const CASCADE_TIMEOUT_MS = 30 * 60_000;
/** Longest wait for the cluster's own controllers to finish their status writes. */
const QUIESCE_TIMEOUT_MS = 60 * 60_000;
/**
 * Creation stops (and says so) when the machine has less memory than this
 * available: the starts still to come need room (a GC, and the API server's
 * own transient memory to serve its lists).
 */
const MIN_AVAILABLE_BYTES = 3 * 2 ** 30;
/** Objects per creation batch: progress is logged and the state file saved after each. */
const BATCH_OBJECTS = 50_000;
const PROJECT_TO = 5_000_000;
const MiB = 2 ** 20;

// ---------------------------------------------------------------------------
// Plan

interface Plan {
  objects: number;
  checkpoints: number[];
  cascade: number;
  contenders: ScaleContender[];
  namespaces: number;
  concurrency: number;
  keepCluster: boolean;
  reuse: boolean;
  build: boolean;
}

const DEFAULTS = { objects: 1_000_000, cascade: 100_000, contenders: ['kubegc', 'kcm_equal'] };

function parsePlan(argv: string[]): Plan {
  const opt = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const int = (name: string, fallback: number, min = 1): number => {
    const v = Number(opt(name) ?? fallback);
    if (!Number.isInteger(v) || v < min) throw new Error(`${name} must be an integer ≥ ${min}`);
    return v;
  };
  const known = new Set([
    '--objects',
    '--checkpoints',
    '--cascade',
    '--contenders',
    '--namespaces',
    '--concurrency',
    '--keep-cluster',
    '--reuse',
    '--no-build',
  ]);
  const withValue = new Set(
    [...known].filter((k) => !['--keep-cluster', '--reuse', '--no-build'].includes(k)),
  );
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (!known.has(a)) throw new Error(`unknown argument ${a} (see the header of bench/scale.ts)`);
    if (withValue.has(a)) i++;
  }
  const objects = int('--objects', DEFAULTS.objects, UNIT_OBJECTS);
  if (objects % UNIT_OBJECTS) throw new Error(`--objects must be a multiple of ${UNIT_OBJECTS}`);
  const cps = (opt('--checkpoints')?.split(',') ?? [objects / 4, objects / 2, objects].map(String))
    .map(Number)
    .map((c) => Math.floor(c / UNIT_OBJECTS) * UNIT_OBJECTS);
  if (cps.some((c) => !Number.isFinite(c) || c < UNIT_OBJECTS || c > objects))
    throw new Error(`--checkpoints must lie between ${UNIT_OBJECTS} and --objects (${objects})`);
  const contenders = (opt('--contenders')?.split(',') ?? DEFAULTS.contenders) as ScaleContender[];
  const bad = contenders.filter((c) => !SCALE_CONTENDERS.includes(c));
  if (bad.length)
    throw new Error(
      `--contenders: unknown ${bad.join(', ')} (allowed: ${SCALE_CONTENDERS.join(', ')})`,
    );
  return {
    objects,
    checkpoints: [...new Set([...cps, objects])].sort((a, b) => a - b),
    cascade: int('--cascade', DEFAULTS.cascade, 0),
    contenders,
    namespaces: int('--namespaces', 100),
    concurrency: int('--concurrency', 200),
    keepCluster: argv.includes('--keep-cluster'),
    reuse: argv.includes('--reuse'),
    build: !argv.includes('--no-build'),
  };
}

/** Why this run does not replace the section of bench/RESULTS.md (empty: it does). */
function notFullBecause(plan: Plan, skipped: number[]): string[] {
  const why: string[] = [];
  if (plan.objects !== DEFAULTS.objects) why.push(`--objects ${plan.objects}`);
  if (plan.cascade !== DEFAULTS.cascade) why.push(`--cascade ${plan.cascade}`);
  if (plan.checkpoints.length - skipped.length < 3) why.push('fewer than 3 checkpoints measured');
  if (!DEFAULTS.contenders.every((c) => plan.contenders.includes(c as ScaleContender)))
    why.push(`--contenders ${plan.contenders.join(',')}`);
  return why;
}

// ---------------------------------------------------------------------------
// Logging and cleanup

const runStart = performance.now();
function log(line: string): void {
  const s = ((performance.now() - runStart) / 1000).toFixed(0).padStart(5);
  process.stderr.write(`[${s}s] ${line}\n`);
}

/** What a signal must still stop: the GC running now, the cluster. */
const cleanups = new Set<() => Promise<void>>();
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => {
    log(`${sig}: stopping what this run started`);
    void (async () => {
      for (const c of [...cleanups].reverse()) await c().catch(() => undefined);
      process.exit(130);
    })();
  });

// ---------------------------------------------------------------------------
// Records

interface StartRecord {
  contender: ScaleContender;
  label: string;
  /** Objects the harness created (the mix). */
  objects: number;
  /** Objects of the mix's six kinds in the whole cluster just before the start (the mix and the cluster's own). */
  clusterObjects: number;
  ok: boolean;
  error?: string;
  listedSeconds?: number | null;
  syncSeconds?: number;
  /** CPU seconds (user + system) of the GC process from spawn to synced. */
  syncCpuSeconds?: number;
  /** Bytes the GC read from spawn to synced (/proc/PID/io rchar: mostly its lists). */
  syncReadBytes?: number;
  rssBytes?: number;
  /** kubegc: nodejs_heap_size_used_bytes once RSS had settled. */
  heapUsedBytes?: number;
  /** contenders.ts gave up at its own timeout; the sync was read from the log after it. */
  syncFromLogAfterTimeout?: boolean;
  /** kcm stopped waiting for its monitors (KCM_GAVE_UP): syncSeconds is that instant, not a sync. */
  gaveUpUnsynced?: boolean;
  /** Counts differ before and after the GC ran ("kind before→after"); empty: nothing deleted. */
  countChanges?: string[];
}

interface ControlPlaneStats {
  etcdDbBytes?: number;
  etcdDbInUseBytes?: number;
  etcdQuotaBytes?: number;
  /** Sum of apiserver_storage_size_bytes (the API server's view of the etcd database). */
  apiserverStorageSizeBytes?: number;
  /** Sum of apiserver_storage_objects over every resource (updated by the API server about once a minute). */
  apiserverStorageObjects?: number;
  rssBytes: Record<string, number>;
  memAvailableBytes: number;
}

interface Checkpoint {
  objects: number;
  counts: Counts;
  /** Seconds spent waiting for the cluster's controllers to stop writing before the starts. */
  quiesceSeconds: number;
  quiesceTimedOut: boolean;
  controlPlane: ControlPlaneStats;
  starts: StartRecord[];
}

interface CreationSegment {
  fromObjects: number;
  toObjects: number;
  seconds: number;
  /** ISO time the segment finished (earlier runs' segments on --reuse). */
  at: string;
}

interface CascadeRecord {
  contender: ScaleContender;
  label: string;
  dependents: number;
  /** Objects in the cluster besides the cascade's (the mix). */
  onTopOf: number;
  ok: boolean;
  error?: string;
  createSeconds?: number;
  syncSeconds?: number;
  seconds?: number;
  objectsPerSecond?: number;
  cpu?: { gc: number; apiserver: number; etcd: number };
}

interface Slope {
  contender: ScaleContender;
  points: { x: number; y: number }[];
  rssBytesPerObject: number | null;
  rssInterceptBytes: number | null;
  projectedRssBytes: number | null;
  heapBytesPerObject: number | null;
  syncSecondsPerMillion: number | null;
}

interface Raw {
  started: string;
  minutes: number;
  full: boolean;
  notFullBecause: string[];
  plan: Plan;
  machine: Machine;
  mix: { unitObjects: number; unitOwned: number; perUnit: Record<string, number> };
  creation: {
    target: number;
    reached: number;
    segments: CreationSegment[];
    seconds: number;
    objectsPerSecond: number | null;
    retries: number;
    existed: number;
    error?: string;
  };
  skippedCheckpoints: number[];
  /** `--render … --earlier FILE`: the skipped checkpoints taken from FILE, an earlier run on the same kept cluster. */
  checkpointsFrom?: { file: string; objects: number[] };
  checkpoints: Checkpoint[];
  slopes: Slope[];
  cascade: CascadeRecord[];
  controlPlaneAtEnd?: ControlPlaneStats;
  notes: string[];
}

// ---------------------------------------------------------------------------
// State of the kept cluster (for --reuse)

interface ScaleState {
  version: 1;
  namespaces: number;
  units: number;
  segments: CreationSegment[];
}

async function readScaleState(): Promise<ScaleState | undefined> {
  try {
    return JSON.parse(await fs.readFile(STATE_FILE, 'utf8')) as ScaleState;
  } catch {
    return undefined;
  }
}

async function saveScaleState(s: ScaleState): Promise<void> {
  await fs.writeFile(`${STATE_FILE}.tmp`, JSON.stringify(s, null, 1));
  await fs.rename(`${STATE_FILE}.tmp`, STATE_FILE);
}

// ---------------------------------------------------------------------------
// The control plane

async function readProc(file: string): Promise<string> {
  return fs.readFile(file, 'utf8').catch(() => '');
}

async function memAvailable(): Promise<number> {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(await readProc('/proc/meminfo'));
  return m?.[1] ? Number(m[1]) * 1024 : Number.POSITIVE_INFINITY;
}

async function readBytes(pid: number): Promise<number | undefined> {
  const m = /^rchar:\s+(\d+)/m.exec(await readProc(`/proc/${pid}/io`));
  return m?.[1] ? Number(m[1]) : undefined;
}

/** Sum of every series of `metric` in a Prometheus text exposition (undefined: none). */
function sumMetric(
  text: string,
  metric: string,
  filter: (labels: string) => boolean = () => true,
): number | undefined {
  let sum: number | undefined;
  const re = new RegExp(`^${metric}(\\{[^}]*\\})? (\\S+)$`, 'gm');
  for (const m of text.matchAll(re)) {
    if (!filter(m[1] ?? '')) continue;
    sum = (sum ?? 0) + Number(m[2]);
  }
  return sum;
}

async function etcdMetrics(cluster: Cluster): Promise<string> {
  const state = JSON.parse(await fs.readFile(path.join(cluster.dir, 'state.json'), 'utf8')) as {
    ports: { etcdClient: number };
  };
  const res = await fetch(`http://127.0.0.1:${state.ports.etcdClient}/metrics`);
  return res.text();
}

async function apiserverMetrics(cluster: Cluster): Promise<string> {
  const res = await apiRequest(cluster.dir, 'GET', '/metrics');
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
  return res.body;
}

async function controlPlaneStats(cluster: Cluster): Promise<ControlPlaneStats> {
  const rss: Record<string, number> = {};
  for (const [name, pid] of Object.entries(await controlPlanePids(cluster)))
    rss[name] = await rssBytes(pid).catch(() => 0);
  const stats: ControlPlaneStats = { rssBytes: rss, memAvailableBytes: await memAvailable() };
  try {
    const e = await etcdMetrics(cluster);
    stats.etcdDbBytes = sumMetric(e, 'etcd_mvcc_db_total_size_in_bytes');
    stats.etcdDbInUseBytes = sumMetric(e, 'etcd_mvcc_db_total_size_in_use_in_bytes');
    stats.etcdQuotaBytes = sumMetric(e, 'etcd_server_quota_backend_bytes');
  } catch (err) {
    log(`  etcd metrics unavailable: ${(err as Error).message}`);
  }
  try {
    const a = await apiserverMetrics(cluster);
    stats.apiserverStorageSizeBytes = sumMetric(a, 'apiserver_storage_size_bytes');
    stats.apiserverStorageObjects = sumMetric(a, 'apiserver_storage_objects');
  } catch (err) {
    log(`  kube-apiserver metrics unavailable: ${(err as Error).message}`);
  }
  return stats;
}

const MIX_RESOURCES = new Set<string>(KIND_NAMES);
const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'DELETECOLLECTION', 'APPLY']);

/** Writes the API server has completed on the mix's resources so far (every client). */
async function mixWrites(cluster: Cluster): Promise<number> {
  return (
    sumMetric(await apiserverMetrics(cluster), 'apiserver_request_total', (labels) => {
      const verb = /verb="([^"]+)"/.exec(labels)?.[1] ?? '';
      const resource = /resource="([^"]+)"/.exec(labels)?.[1] ?? '';
      return WRITE_VERBS.has(verb) && MIX_RESOURCES.has(resource);
    }) ?? 0
  );
}

/**
 * Waits until the cluster's own controllers have stopped writing to the
 * mix's objects (the status updates of Deployments and ReplicaSets, at their
 * 20 QPS): no write for 10 s. A GC started before that would be measured on a
 * moving cluster.
 */
async function quiesce(cluster: Cluster): Promise<{ seconds: number; timedOut: boolean }> {
  const t0 = performance.now();
  let last = await mixWrites(cluster);
  let quietSince = performance.now();
  let lastLog = performance.now();
  while (performance.now() - t0 < QUIESCE_TIMEOUT_MS) {
    await delay(2000);
    const now = await mixWrites(cluster);
    if (now !== last) {
      if (performance.now() - lastLog > 30_000) {
        const rate = (now - last) / 2;
        log(
          `  waiting for the cluster's controllers: ${rate.toFixed(0)} writes/s on the mix's objects`,
        );
        lastLog = performance.now();
      }
      last = now;
      quietSince = performance.now();
    } else if (performance.now() - quietSince >= 10_000)
      return { seconds: (performance.now() - t0) / 1000, timedOut: false };
  }
  log(
    `  the cluster's controllers still write after ${QUIESCE_TIMEOUT_MS / 60_000} min; measuring anyway`,
  );
  return { seconds: (performance.now() - t0) / 1000, timedOut: true };
}

// ---------------------------------------------------------------------------
// Creation

async function grow(
  client: KubeClient,
  cluster: Cluster,
  plan: Plan,
  state: ScaleState,
  targetUnits: number,
  totals: { retries: number; existed: number },
): Promise<void> {
  const batchUnits = Math.max(1, Math.round(BATCH_OBJECTS / UNIT_OBJECTS));
  const ctx: CreateContext = {
    client,
    namespaces: plan.namespaces,
    inflight: new Semaphore(plan.concurrency),
    existed: { n: 0 },
    retries: { n: 0 },
  };
  const t0 = performance.now();
  const from = state.units;
  while (state.units < targetUnits) {
    const avail = await memAvailable();
    if (avail < MIN_AVAILABLE_BYTES)
      throw new Error(
        `this machine has only ${(avail / 2 ** 30).toFixed(1)} GiB available at ${state.units * UNIT_OBJECTS} objects: creation stopped`,
      );
    const fromBatch = state.units;
    const to = Math.min(targetUnits, state.units + batchUnits);
    const tb = performance.now();
    await createUnits(ctx, state.units, to, Math.max(8, Math.round(plan.concurrency / 3)));
    const seconds = (performance.now() - tb) / 1000;
    state.segments.push({
      fromObjects: state.units * UNIT_OBJECTS,
      toObjects: to * UNIT_OBJECTS,
      seconds: round2(seconds),
      at: new Date().toISOString(),
    });
    state.units = to;
    await saveScaleState(state);
    const cp = await controlPlaneStats(cluster);
    const overall = ((state.units - from) * UNIT_OBJECTS) / ((performance.now() - t0) / 1000);
    const batch = ((to - fromBatch) * UNIT_OBJECTS) / seconds;
    log(
      `  ${n0(state.units * UNIT_OBJECTS)} objects: ${Math.round(batch)}/s in this batch, ` +
        `${Math.round(overall)}/s since ${n0(from * UNIT_OBJECTS)}; etcd db ${gib(cp.etcdDbBytes)} GiB, ` +
        `RSS kube-apiserver ${gib(cp.rssBytes['kube-apiserver'])} GiB, etcd ${gib(cp.rssBytes.etcd)} GiB, ` +
        `kube-controller-manager ${gib(cp.rssBytes['kube-controller-manager'])} GiB; ` +
        `${gib(cp.memAvailableBytes)} GiB available` +
        (ctx.retries.n ? `; ${ctx.retries.n} requests retried` : ''),
    );
  }
  totals.retries += ctx.retries.n;
  totals.existed += ctx.existed.n;
}

// ---------------------------------------------------------------------------
// Starting a GC

const MARKERS: Record<'kubegc' | 'kcm', { synced: string; listed?: string }> = {
  kubegc: { synced: '"garbage collector started"', listed: '"informers listed"' },
  kcm: { synced: 'Garbage collector: all resource monitors have synced' },
};
/**
 * kcm's GC waits a fixed 30 s for its monitors (garbagecollector.go), then
 * logs this and collects on the graph it has; it never logs the synced line
 * after that, so waiting for it would only burn SYNC_DEADLINE_MS.
 */
const KCM_GAVE_UP =
  'Garbage collector: not all resource monitors could be synced, proceeding anyways';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The log of the GC just started: the newest bench-KIND-*.log of the cluster (this run's dir has no other writer). */
async function newestLog(cluster: Cluster, kind: 'kubegc' | 'kcm'): Promise<string> {
  const dir = path.join(cluster.dir, 'logs');
  let best: { file: string; mtime: number } | undefined;
  for (const name of await fs.readdir(dir)) {
    if (!name.startsWith(`bench-${kind}-`)) continue;
    const file = path.join(dir, name);
    const { mtimeMs } = await fs.stat(file);
    if (!best || mtimeMs > best.mtime) best = { file, mtime: mtimeMs };
  }
  if (!best) throw new Error(`no bench-${kind}-*.log in ${dir}`);
  return best.file;
}

/**
 * Seconds from spawn to synced (and to listed). contenders.ts gives up after
 * its fixed 180 s, which a GC on a million objects may need more than: then
 * the log is read on, up to SYNC_DEADLINE_MS, while the process lives.
 */
async function waitSynced(
  cluster: Cluster,
  gc: Running,
  kind: 'kubegc' | 'kcm',
): Promise<{
  syncSeconds: number;
  listedSeconds: number | null;
  fromLog: boolean;
  gaveUp?: boolean;
}> {
  const file = await newestLog(cluster, kind);
  // kcm: its give-up line, watched from the start, ends the wait at once.
  let stopWatching = false;
  const gaveUp = async (): Promise<number | undefined> => {
    while (kind === 'kcm' && !stopWatching) {
      if ((await readProc(file)).includes(KCM_GAVE_UP))
        return (performance.now() - gc.startedAt) / 1000;
      await delay(100);
    }
    return undefined;
  };
  try {
    const first = await Promise.race([
      gc.synced.then((syncSeconds) => ({ syncSeconds, gaveUp: false })),
      gaveUp().then((at) =>
        at === undefined ? new Promise<never>(() => undefined) : { syncSeconds: at, gaveUp: true },
      ),
    ]);
    if (first.gaveUp) {
      gc.synced.catch(() => undefined);
      log(`  kcm gave up waiting for its monitors after ${first.syncSeconds.toFixed(1)} s`);
      return { syncSeconds: first.syncSeconds, listedSeconds: null, fromLog: true, gaveUp: true };
    }
    return { syncSeconds: first.syncSeconds, listedSeconds: await gc.listed, fromLog: false };
  } catch (err) {
    const message = (err as Error).message;
    if (!/no initial sync within/.test(message) || !alive(gc.pid)) throw err;
    log(`  ${message.split(';')[0]}: still running, reading its log on`);
  } finally {
    stopWatching = true;
  }
  const marker = MARKERS[kind];
  while (performance.now() - gc.startedAt < SYNC_DEADLINE_MS) {
    const text = await readProc(file);
    if (kind === 'kcm' && text.includes(KCM_GAVE_UP)) {
      const at = (performance.now() - gc.startedAt) / 1000;
      return { syncSeconds: at, listedSeconds: null, fromLog: true, gaveUp: true };
    }
    if (text.includes(marker.synced)) {
      const syncSeconds = (performance.now() - gc.startedAt) / 1000;
      let listedSeconds: number | null = kind === 'kcm' ? syncSeconds : null;
      // kubegc's lines carry an ISO "ts": the listed instant from it, against the spawn's wall clock.
      const line = marker.listed
        ? text.split('\n').find((l) => l.includes(marker.listed ?? ''))
        : undefined;
      const ts = line ? (JSON.parse(line) as { ts?: string }).ts : undefined;
      if (ts) {
        const spawnWall = Date.now() - (performance.now() - gc.startedAt);
        listedSeconds = (Date.parse(ts) - spawnWall) / 1000;
      }
      return { syncSeconds, listedSeconds, fromLog: true };
    }
    if (!alive(gc.pid)) throw new Error(`the GC exited before its initial sync; see ${file}`);
    await delay(100);
  }
  throw new Error(`no initial sync within ${SYNC_DEADLINE_MS / 60_000} min; see ${file}`);
}

async function startGc(cluster: Cluster, spec: ContenderSpec): Promise<Running> {
  const gc = await start(cluster, spec);
  const stop = (): Promise<void> => gc.stop();
  cleanups.add(stop);
  const original = gc.stop.bind(gc);
  gc.stop = async () => {
    cleanups.delete(stop);
    await original();
  };
  return gc;
}

/** One cold start on what the cluster holds now; the counts before and after must match. */
async function coldStart(
  env: { cluster: Cluster; client: KubeClient },
  key: ScaleContender,
  objects: number,
  before: Counts,
): Promise<StartRecord> {
  const spec: ContenderSpec = CONTENDERS[key];
  const rec: StartRecord = {
    contender: key,
    label: contenderLabel(key),
    objects,
    clusterObjects: total(before),
    ok: false,
  };
  try {
    const gc = await startGc(env.cluster, spec);
    try {
      const s = await waitSynced(env.cluster, gc, spec.kind);
      rec.syncCpuSeconds = round2(await cpuSeconds(gc.pid));
      rec.syncReadBytes = await readBytes(gc.pid);
      rec.syncSeconds = round2(s.syncSeconds);
      rec.listedSeconds = s.listedSeconds === null ? null : round2(s.listedSeconds);
      if (s.fromLog && !s.gaveUp) rec.syncFromLogAfterTimeout = true;
      if (s.gaveUp) rec.gaveUpUnsynced = true;
      rec.rssBytes = await settledRss(gc.pid);
      if (gc.metricsUrl)
        rec.heapUsedBytes = await scrapeGauge(gc.metricsUrl, 'nodejs_heap_size_used_bytes');
    } finally {
      await gc.stop();
    }
    const after = await countAll(env.client);
    rec.countChanges = countDiff(before, after);
    rec.ok = rec.countChanges.length === 0;
    if (!rec.ok) rec.error = `objects changed while it ran: ${rec.countChanges.join(', ')}`;
  } catch (err) {
    rec.error = (err as Error).message;
  }
  const mb = (b: number | undefined): string => (b === undefined ? '-' : (b / MiB).toFixed(0));
  log(
    rec.error
      ? `  ${key}: FAILED: ${rec.error}`
      : `  ${key}: listed ${rec.listedSeconds ?? '-'} s, synced ${rec.syncSeconds} s, CPU ${rec.syncCpuSeconds} s, ` +
          `RSS ${mb(rec.rssBytes)} MB, heap ${mb(rec.heapUsedBytes)} MB, count unchanged`,
  );
  return rec;
}

// ---------------------------------------------------------------------------
// The cascade

const CASCADE_NS = 'scale-cascade';
const depName = (i: number): string => `dep-${String(i).padStart(6, '0')}`;

async function cascadeRun(
  env: { cluster: Cluster; client: KubeClient },
  key: ScaleContender,
  n: number,
  onTopOf: number,
  concurrency: number,
): Promise<CascadeRecord> {
  const rec: CascadeRecord = {
    contender: key,
    label: contenderLabel(key),
    dependents: n,
    onTopOf,
    ok: false,
  };
  const { client, cluster } = env;
  try {
    const t0c = performance.now();
    const [uid] = await createConfigMaps(client, CASCADE_NS, [{ name: 'owner' }]);
    if (!uid) throw new Error('owner not created');
    const owner = { name: 'owner', uid, blockOwnerDeletion: false };
    const specs = Array.from({ length: n }, (_, i): ObjectSpec => ({ name: depName(i), owner }));
    await createConfigMaps(client, CASCADE_NS, specs, concurrency);
    rec.createSeconds = round2((performance.now() - t0c) / 1000);
    log(`  ${key}: ${n.toLocaleString('en')} dependents created in ${rec.createSeconds} s`);
    const gc = await startGc(cluster, CONTENDERS[key]);
    try {
      rec.syncSeconds = round2((await waitSynced(cluster, gc, CONTENDERS[key].kind)).syncSeconds);
      await delay(1000);
      const watch = watchDeletes(
        client,
        CASCADE_NS,
        await collectionVersion(client, CASCADE_NS),
        (gone) => gone.size >= n + 1,
      );
      try {
        const cp = await controlPlanePids(cluster);
        const pids = { gc: gc.pid, apiserver: cp['kube-apiserver'] ?? 0, etcd: cp.etcd ?? 0 };
        const cpu = async (): Promise<{ gc: number; apiserver: number; etcd: number }> => ({
          gc: await cpuSeconds(pids.gc),
          apiserver: await cpuSeconds(pids.apiserver),
          etcd: await cpuSeconds(pids.etcd),
        });
        const cpu0 = await cpu();
        const t0 = performance.now();
        await deleteConfigMap(client, CASCADE_NS, 'owner', 'Background');
        let timer: NodeJS.Timeout | undefined;
        const t1 = await Promise.race([
          watch.finished,
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () =>
                reject(
                  new Error(
                    `cascade not done within ${CASCADE_TIMEOUT_MS / 60_000} min (${watch.deleted.size - 1} of ${n} gone)`,
                  ),
                ),
              CASCADE_TIMEOUT_MS,
            );
          }),
        ]).finally(() => clearTimeout(timer));
        const cpu1 = await cpu();
        rec.seconds = round2((t1 - t0) / 1000);
        rec.objectsPerSecond = Math.round(n / ((t1 - t0) / 1000));
        rec.cpu = {
          gc: round2(cpu1.gc - cpu0.gc),
          apiserver: round2(cpu1.apiserver - cpu0.apiserver),
          etcd: round2(cpu1.etcd - cpu0.etcd),
        };
        rec.ok = true;
      } finally {
        watch.stop();
      }
    } finally {
      await gc.stop();
    }
    log(
      `  ${key}: ${n.toLocaleString('en')} dependents gone in ${rec.seconds} s (${rec.objectsPerSecond}/s)`,
    );
  } catch (err) {
    rec.error = (err as Error).message;
    log(`  ${key}: FAILED: ${rec.error}`);
  }
  // Whatever is left (a failed run) goes before the next contender's objects are made.
  await emptyCollection(client, CASCADE_NS, 'configmaps').catch((err: unknown) =>
    log(`  could not empty ${CASCADE_NS}: ${(err as Error).message}`),
  );
  return rec;
}

// ---------------------------------------------------------------------------
// Arithmetic

function slopes(checkpoints: Checkpoint[], contenders: ScaleContender[]): Slope[] {
  return contenders.map((c) => {
    const ok = checkpoints
      .map((cp) => cp.starts.find((s) => s.contender === c && s.ok && s.rssBytes !== undefined))
      .filter((s): s is StartRecord => s !== undefined);
    const points = ok.map((s) => ({ x: s.objects, y: s.rssBytes ?? 0 }));
    const slope = leastSquaresSlope(points);
    const intercept =
      slope === null ? null : mean(points.map((p) => p.y)) - slope * mean(points.map((p) => p.x));
    const heap = leastSquaresSlope(
      ok
        .filter((s) => s.heapUsedBytes !== undefined)
        .map((s) => ({ x: s.objects, y: s.heapUsedBytes ?? 0 })),
    );
    const sync = leastSquaresSlope(
      ok.filter((s) => !s.gaveUpUnsynced).map((s) => ({ x: s.objects, y: s.syncSeconds ?? 0 })),
    );
    return {
      contender: c,
      points,
      rssBytesPerObject: slope === null ? null : round2(slope),
      rssInterceptBytes: intercept === null ? null : Math.round(intercept),
      projectedRssBytes:
        slope === null || intercept === null ? null : Math.round(intercept + PROJECT_TO * slope),
      heapBytesPerObject: heap === null ? null : round2(heap),
      syncSecondsPerMillion: sync === null ? null : round2(sync * 1e6),
    };
  });
}

const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;

// ---------------------------------------------------------------------------
// Rendering

const n0 = (x: number | null | undefined): string =>
  x === null || x === undefined ? '–' : Math.round(x).toLocaleString('en');
const f1 = (x: number | null | undefined): string =>
  x === null || x === undefined ? '–' : x.toFixed(1);
const f2 = (x: number | null | undefined): string =>
  x === null || x === undefined ? '–' : x.toFixed(2);
const mb = (b: number | null | undefined): string =>
  b === null || b === undefined ? '–' : (b / MiB).toFixed(0);
const gib = (b: number | null | undefined): string =>
  b === null || b === undefined ? '–' : (b / 2 ** 30).toFixed(2);

/** The section's markdown (its own `##` heading first), without the markers. */
export function render(raw: Raw, rawFile: string): string {
  const p = raw.plan;
  const c = raw.creation;
  const when = `${raw.started.slice(0, 16).replace('T', ' ')} UTC, ${raw.minutes} minutes`;
  const out: string[] = [SECTION_TITLE, ''];
  out.push(
    `Last ${raw.full ? 'run' : '**partial** run'} (\`npm run bench:scale${raw.full ? '' : ' -- …'}\`), ${when}` +
      (raw.full ? '.' : `; not at the default sizes: ${raw.notFullBecause.join(', ')}.`) +
      ` Every measurement is in \`${rawFile}\`.`,
    '',
  );
  if (c.reached < c.target)
    out.push(
      `**This machine did not reach ${n0(c.target)} objects: it reached ${n0(c.reached)}** (${c.error ?? 'creation stopped'}). The figures below are at the sizes it reached.`,
      '',
    );
  out.push(
    `The mix, in units of ${raw.mix.unitObjects} objects (${UNIT_TEXT}: ${raw.mix.unitOwned} of the ${raw.mix.unitObjects} owned), spread over ${p.namespaces} namespaces; see \`bench/lib/scale.ts\`. ` +
      `Created by the harness with ${p.concurrency} requests in flight: ${n0(c.reached)} objects in ${n0(c.seconds)} s ` +
      `(${n0(c.objectsPerSecond)} objects/s${c.segments.some((s) => s.at < raw.started) ? '; partly in an earlier run, reused with `--reuse`' : ''}).`,
    '',
  );
  if (raw.checkpointsFrom)
    out.push(
      `The checkpoint${raw.checkpointsFrom.objects.length > 1 ? 's' : ''} at ${raw.checkpointsFrom.objects.map(n0).join(', ')} ${raw.checkpointsFrom.objects.length > 1 ? 'are' : 'is'} from the earlier run on the same cluster (\`bench/results/${raw.checkpointsFrom.file}\`), which this one continued with \`--reuse\`.`,
      '',
    );
  if (raw.skippedCheckpoints.length)
    out.push(
      `Checkpoints below what the reused cluster held were skipped: ${raw.skippedCheckpoints.map(n0).join(', ')}.`,
      '',
    );

  out.push('### Cold start at each size', '');
  const rows: string[][] = [];
  for (const cp of raw.checkpoints)
    for (const s of cp.starts)
      rows.push([
        s.contender,
        n0(s.objects),
        n0(s.clusterObjects),
        s.ok ? f1(s.listedSeconds) : 'failed',
        s.ok
          ? s.gaveUpUnsynced
            ? `not synced (gave up at ${f1(s.syncSeconds)})²`
            : f1(s.syncSeconds) + (s.syncFromLogAfterTimeout ? '¹' : '')
          : '–',
        mb(s.rssBytes),
        f1(s.syncCpuSeconds),
        mb(s.heapUsedBytes),
        s.countChanges === undefined
          ? '–'
          : s.countChanges.length === 0
            ? 'yes'
            : `**no**: ${s.countChanges.join(', ')}`,
      ]);
  out.push(
    table(
      [
        'contender',
        'objects (mix)',
        'in cluster (6 kinds)',
        's to listed',
        's to synced',
        'RSS MB',
        'CPU s to sync',
        'heap MB',
        'count unchanged',
      ],
      rows,
    ),
    '',
  );
  const failed = raw.checkpoints.flatMap((cp) => cp.starts.filter((s) => !s.ok));
  if (failed.length)
    out.push(
      'Failed starts:',
      '',
      ...failed.map((s) => `- ${s.contender} at ${n0(s.objects)}: ${s.error ?? ''}`),
      '',
    );
  if (raw.checkpoints.some((cp) => cp.starts.some((s) => s.syncFromLogAfterTimeout)))
    out.push(
      '¹ past the 180 s after which `bench/lib/contenders.ts` stops waiting; read from its log on.',
      '',
    );
  if (raw.checkpoints.some((cp) => cp.starts.some((s) => s.gaveUpUnsynced)))
    out.push(
      `² kube-controller-manager logged "${KCM_GAVE_UP}": its GC waits a fixed 30 s for its monitors' initial lists, then starts collecting on the graph it has, and never logs a sync after that. The figure is that instant; its CPU and RSS columns are measured from then (its lists still running). Left out of the sync slope.`,
      '',
    );

  out.push('### Memory per object (least squares over the checkpoints)', '');
  out.push(
    table(
      [
        'contender',
        'points',
        'RSS bytes/object',
        'intercept MB',
        `projected RSS at ${n0(PROJECT_TO)}`,
        'heap bytes/object',
        's to synced per 1M',
      ],
      raw.slopes.map((s) => [
        s.contender,
        String(s.points.length),
        n0(s.rssBytesPerObject),
        mb(s.rssInterceptBytes),
        s.projectedRssBytes === null ? '–' : `${gib(s.projectedRssBytes)} GiB`,
        n0(s.heapBytesPerObject),
        f1(s.syncSecondsPerMillion),
      ]),
    ),
    '',
    `Projection: intercept + ${n0(PROJECT_TO)} × slope, a straight line through sizes up to ${n0(Math.max(0, ...raw.checkpoints.map((cp) => cp.objects)))}.`,
    '',
  );
  const biggest = raw.checkpoints.at(-1);
  const kubegcAtTop = biggest?.starts.find((s) => s.contender === 'kubegc' && s.ok);
  if (biggest && kubegcAtTop?.rssBytes !== undefined) {
    const under = kubegcAtTop.rssBytes < 2 * 2 ** 30;
    out.push(
      `**One kubegc replica on ${n0(biggest.objects)} objects: ${mb(kubegcAtTop.rssBytes)} MB RSS (${gib(kubegcAtTop.rssBytes)} GiB), ${under ? 'under' : '**over**'} the 2 GiB goal.**`,
      '',
    );
  }

  if (raw.cascade.length) {
    const n = raw.cascade[0]?.dependents ?? 0;
    out.push(
      `### Cascade: Background delete of 1 owner with ${n0(n)} dependent ConfigMaps, on top of the ${n0(raw.cascade[0]?.onTopOf)} objects`,
      '',
    );
    out.push(
      table(
        [
          'contender',
          'dependents',
          's to synced (before)',
          'seconds',
          'objects/s',
          'GC CPU s',
          'kube-apiserver CPU s',
          'etcd CPU s',
        ],
        raw.cascade.map((r) => [
          r.label,
          n0(r.dependents),
          f1(r.syncSeconds),
          r.ok ? f2(r.seconds) : `failed: ${r.error ?? ''}`,
          n0(r.objectsPerSecond),
          f1(r.cpu?.gc),
          f1(r.cpu?.apiserver),
          f1(r.cpu?.etcd),
        ]),
      ),
      '',
    );
    const kg = raw.cascade.find((r) => r.contender === 'kubegc' && r.ok);
    const kcm = raw.cascade.find((r) => r.contender === 'kcm_equal' && r.ok);
    if (kg?.seconds && kcm?.seconds)
      out.push(
        `kcm at equal settings ÷ kubegc: **${(kcm.seconds / kg.seconds).toFixed(2)}×** (kubegc's defaults are the equal settings).`,
        '',
      );
    out.push(
      `The ${n0(n)} dependents (and their owner) are extra, in their own namespace, made again before each contender; each GC was started on them and the mix, synced, then the owner was deleted; timed from that DELETE to the watch's last DELETED.`,
      '',
    );
  }

  const end = raw.controlPlaneAtEnd ?? biggest?.controlPlane;
  if (end) {
    out.push('### Control plane at the largest size', '');
    out.push(
      table(
        ['', ''],
        [
          ['etcd database (etcd_mvcc_db_total_size_in_bytes)', `${gib(end.etcdDbBytes)} GiB`],
          ['etcd database in use', `${gib(end.etcdDbInUseBytes)} GiB`],
          ['etcd quota (--quota-backend-bytes)', `${gib(end.etcdQuotaBytes)} GiB`],
          ['apiserver_storage_size_bytes', `${gib(end.apiserverStorageSizeBytes)} GiB`],
          ['apiserver_storage_objects (all resources)', n0(end.apiserverStorageObjects)],
          ...Object.entries(end.rssBytes).map(([k, v]) => [`RSS ${k}`, `${gib(v)} GiB`]),
          ['memory available', `${gib(end.memAvailableBytes)} GiB`],
        ],
      ),
      '',
    );
  }
  out.push('### Notes', '', ...raw.notes.map((n) => `- ${n}`), '');
  out.push(
    `Machine: ${raw.machine.cores} cores (${raw.machine.cpu}), ${raw.machine.memoryGiB} GiB, ${raw.machine.kernel}, Node.js ${raw.machine.node}, Kubernetes ${raw.machine.kubernetes} (${raw.machine.go}); load average ${(raw.machine.loadAverageAtStart ?? []).join('/')} at start, ${(raw.machine.loadAverageAtEnd ?? []).join('/')} at end.`,
  );
  return out.join('\n');
}

async function writeOutputs(
  raw: Raw,
  rawName: string,
  resultsMd: string | undefined,
): Promise<void> {
  const section = render(raw, `bench/results/${rawName}`);
  const md = await prettier.format(`# Scale benchmark\n\n${section.replace(/^## /, '## ')}\n`, {
    ...((await prettier.resolveConfig(RESULTS_MD)) ?? {}),
    parser: 'markdown',
  });
  await fs.writeFile(path.join(RESULTS_DIR(REPO_ROOT), 'scale-latest.md'), md);
  console.log(md);
  if (resultsMd) {
    await writeResultsSection(resultsMd, 'scale', section);
    log(`wrote the section of ${path.relative(REPO_ROOT, resultsMd)}`);
  }
}

// ---------------------------------------------------------------------------
// The run

function notes(plan: Plan): string[] {
  return [
    'Every GC ran alone: started cold on what the cluster held, measured, stopped; the counts of the six kinds of the mix (cluster-wide LIST, limit 1, remainingItemCount) were checked unchanged after each. The mix has nothing to collect.',
    "RSS: VmRSS once settled (2 s within 2%, at most 20 s after the sync). CPU: user + system seconds of the GC's process from spawn to its sync line. kubegc's \"synced\" is `garbage collector started` (graph built, workers running), kcm's is `all resource monitors have synced`, which it also logs for listed.",
    `Checkpoints are measured as the objects grow (${plan.checkpoints.map(n0).join(', ')}); the contenders' order alternates between checkpoints.`,
    "The cluster's own kube-controller-manager (every controller but the GC) writes a status for each Deployment and ReplicaSet after creation, at its 20 QPS; each checkpoint waited until those writes had stopped (10 s without a write on the mix's resources).",
    'kubegc ran from the built `dist/cli.js` with its defaults (QPS 500, burst 1000, 20 workers); kcm GC with `--kube-api-qps=500 --kube-api-burst=1000 --concurrent-gc-syncs=20` (1,000 QPS for its GC: kcm doubles the QPS of its GC client).',
    'etcd runs on tmpfs with `--quota-backend-bytes=8589934592` (8 GiB; `up()` in cluster/controlplane.ts has no option to change it).',
  ];
}

async function run(plan: Plan): Promise<void> {
  if (plan.build) execFileSync('npm', ['run', 'build'], { cwd: REPO_ROOT, stdio: 'inherit' });
  const started = new Date();
  const loadAtStart = os.loadavg().map(round2);
  await fs.mkdir(RESULTS_DIR(REPO_ROOT), { recursive: true });

  if (!plan.reuse) {
    log(`fresh control plane in ${path.relative(REPO_ROOT, CLUSTER_DIR)}/`);
    await down(CLUSTER_DIR);
  }
  const upCluster = (): Promise<Cluster> =>
    up({ dir: CLUSTER_DIR, log: (l) => log(`cluster: ${l}`) });
  let cluster = await upCluster();
  let state = plan.reuse && cluster.reused ? await readScaleState() : undefined;
  if (plan.reuse && (!state || state.namespaces !== plan.namespaces)) {
    if (!cluster.reused) log('--reuse: no running cluster to reuse: starting afresh');
    else {
      log(
        `--reuse: ${state ? `the kept cluster's mix has ${state.namespaces} namespaces, not ${plan.namespaces}` : 'no record of what the kept cluster holds'}: starting afresh`,
      );
      await down(CLUSTER_DIR);
      cluster = await upCluster();
    }
    state = undefined;
  }
  if (cluster.builtinGc)
    throw new Error('the scale cluster runs kube-controller-manager with its GC');
  const stopCluster = async (): Promise<void> => {
    if (plan.keepCluster) log(`keeping the control plane in ${CLUSTER_DIR}`);
    else {
      log('stopping the control plane');
      await down(CLUSTER_DIR);
    }
  };
  cleanups.add(stopCluster);
  const client = await benchClient(cluster.kubeconfig);
  const env = { cluster, client };
  const raw: Raw = {
    started: started.toISOString(),
    minutes: 0,
    full: false,
    notFullBecause: [],
    plan,
    machine: machine(cluster.version, path.join(cluster.binDir, 'kube-controller-manager')),
    mix: { unitObjects: UNIT_OBJECTS, unitOwned: UNIT_OWNED, perUnit: { ...PER_UNIT } },
    creation: {
      target: plan.objects,
      reached: 0,
      segments: [],
      seconds: 0,
      objectsPerSecond: null,
      retries: 0,
      existed: 0,
    },
    skippedCheckpoints: [],
    checkpoints: [],
    slopes: [],
    cascade: [],
    notes: notes(plan),
  };
  const stamp = started.toISOString().slice(0, 19).replace(/:/g, '');
  const rawName = `scale-${stamp}.json`;
  const rawPath = path.join(RESULTS_DIR(REPO_ROOT), rawName);
  const save = async (): Promise<void> => {
    raw.minutes = round2((performance.now() - runStart) / 60_000);
    await fs.writeFile(rawPath, `${JSON.stringify(raw, null, 1)}\n`);
  };
  try {
    // Old GC logs of this directory would confuse newestLog (and take space).
    const logs = path.join(CLUSTER_DIR, 'logs');
    for (const f of await fs.readdir(logs))
      if (f.startsWith('bench-')) await fs.rm(path.join(logs, f), { force: true });

    await ensureWidgetCrd(client);
    state ??= { version: 1, namespaces: plan.namespaces, units: 0, segments: [] };
    await saveScaleState(state);
    await ensureNamespaces(client, plan.namespaces);
    await createNamespace(client, CASCADE_NS).catch((err: unknown) => {
      if ((err as { status?: number }).status !== 409) throw err;
    });
    await emptyCollection(client, CASCADE_NS, 'configmaps');
    if (state.units > 0) {
      // Whatever the state file says, the cluster must hold at least that much of every kind.
      const have = await countAll(client);
      const want = expectedCounts(state.units);
      const short = KIND_NAMES.filter((k) => have[k] < want[k]);
      if (short.length)
        throw new Error(
          `--reuse: the kept cluster holds fewer objects than recorded: ${short.map((k) => `${k} ${have[k]} < ${want[k]}`).join(', ')}; run without --reuse`,
        );
      log(`--reuse: the kept cluster holds ${n0(state.units * UNIT_OBJECTS)} objects of the mix`);
    }

    const totals = { retries: 0, existed: 0 };
    for (const [i, target] of plan.checkpoints.entries()) {
      const targetUnits = target / UNIT_OBJECTS;
      if (state.units > targetUnits) {
        log(
          `checkpoint ${n0(target)}: skipped (the reused cluster already holds ${n0(state.units * UNIT_OBJECTS)})`,
        );
        raw.skippedCheckpoints.push(target);
        continue;
      }
      if (state.units < targetUnits) {
        log(`creating objects ${n0(state.units * UNIT_OBJECTS)} → ${n0(target)}`);
        try {
          await grow(client, cluster, plan, state, targetUnits, totals);
        } catch (err) {
          raw.creation.error = (err as Error).message;
          log(
            `creation stopped at ${n0(state.units * UNIT_OBJECTS)} objects: ${raw.creation.error}`,
          );
        }
      }
      const objects = state.units * UNIT_OBJECTS;
      raw.creation.reached = objects;
      raw.creation.segments = state.segments;
      raw.creation.seconds = round2(state.segments.reduce((s, x) => s + x.seconds, 0));
      raw.creation.objectsPerSecond = raw.creation.seconds
        ? Math.round(objects / raw.creation.seconds)
        : null;
      raw.creation.retries = totals.retries;
      raw.creation.existed = totals.existed;
      if (raw.checkpoints.some((cp) => cp.objects === objects)) break;
      log(`checkpoint ${n0(objects)}: waiting for the cluster's controllers to finish writing`);
      const q = await quiesce(cluster);
      const counts = await countAll(client);
      const want = expectedCounts(state.units);
      const short = KIND_NAMES.filter((k) => counts[k] < want[k]);
      if (short.length)
        throw new Error(
          `the cluster holds fewer objects than created: ${short.map((k) => `${k} ${counts[k]} < ${want[k]}`).join(', ')}`,
        );
      const cp: Checkpoint = {
        objects,
        counts,
        quiesceSeconds: round2(q.seconds),
        quiesceTimedOut: q.timedOut,
        controlPlane: await controlPlaneStats(cluster),
        starts: [],
      };
      raw.checkpoints.push(cp);
      log(
        `checkpoint ${n0(objects)} (${n0(total(counts))} of the six kinds in the cluster; quiet after ${q.seconds.toFixed(0)} s)`,
      );
      const order = i % 2 === 0 ? plan.contenders : [...plan.contenders].reverse();
      for (const key of order) {
        cp.starts.push(await coldStart(env, key, objects, await countAll(client)));
        await save();
        await delay(2000);
      }
      if (raw.creation.error) break;
    }
    raw.slopes = slopes(raw.checkpoints, plan.contenders);

    if (plan.cascade > 0) {
      const onTopOf = raw.creation.reached;
      log(
        `cascade: 1 owner, ${n0(plan.cascade)} dependents in ${CASCADE_NS}, on top of ${n0(onTopOf)} objects`,
      );
      const cascadeContenders = plan.contenders.filter((c) => c === 'kubegc' || c === 'kcm_equal');
      for (const key of cascadeContenders.length ? cascadeContenders : plan.contenders) {
        raw.cascade.push(await cascadeRun(env, key, plan.cascade, onTopOf, plan.concurrency));
        await save();
      }
    }
    raw.controlPlaneAtEnd = await controlPlaneStats(cluster);
  } finally {
    client.close();
    raw.machine = {
      ...raw.machine,
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: os.loadavg().map(round2),
    };
    raw.notFullBecause = notFullBecause(plan, raw.skippedCheckpoints);
    raw.full = raw.notFullBecause.length === 0;
    await save();
    log(`measurements so far in bench/results/${rawName}`);
    cleanups.delete(stopCluster);
    await stopCluster();
  }
  await writeOutputs(raw, rawName, raw.full ? RESULTS_MD : undefined);
  if (!raw.full)
    log(`not at the default sizes (${raw.notFullBecause.join(', ')}): bench/RESULTS.md unchanged`);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const renderAt = argv.indexOf('--render');
  if (renderAt !== -1) {
    const file = argv[renderAt + 1];
    if (!file) throw new Error('--render takes a bench/results/scale-*.json');
    const mdAt = argv.indexOf('--results-md');
    const target = mdAt === -1 ? RESULTS_MD : path.resolve(argv[mdAt + 1] ?? RESULTS_MD);
    const raw = JSON.parse(readFileSync(file, 'utf8')) as Raw;
    let name = path.basename(file);
    // A run continued with --reuse skipped the checkpoints its predecessor
    // measured on the same cluster: --earlier FILE takes them from there.
    const earlierAt = argv.indexOf('--earlier');
    if (earlierAt !== -1) {
      const earlierFile = argv[earlierAt + 1];
      if (!earlierFile) throw new Error('--earlier takes a bench/results/scale-*.json');
      const earlier = JSON.parse(readFileSync(earlierFile, 'utf8')) as Raw;
      const taken = earlier.checkpoints.filter((cp) => raw.skippedCheckpoints.includes(cp.objects));
      if (!taken.length)
        throw new Error(
          `${earlierFile} holds none of the skipped checkpoints ${raw.skippedCheckpoints.join(', ')}`,
        );
      const objects = taken.map((cp) => cp.objects);
      raw.checkpoints = [...taken, ...raw.checkpoints].sort((a, b) => a.objects - b.objects);
      raw.skippedCheckpoints = raw.skippedCheckpoints.filter((n) => !objects.includes(n));
      raw.checkpointsFrom = { file: path.basename(earlierFile), objects };
      raw.slopes = slopes(raw.checkpoints, raw.plan.contenders);
      raw.notFullBecause = raw.notFullBecause.filter(
        (why) => why !== 'fewer than 3 checkpoints measured' || raw.checkpoints.length < 3,
      );
      raw.full = raw.notFullBecause.length === 0;
      name = name.replace(/\.json$/, '-with-earlier.json');
      await fs.writeFile(
        path.join(RESULTS_DIR(REPO_ROOT), name),
        `${JSON.stringify(raw, null, 2)}\n`,
      );
    }
    await writeOutputs(raw, name, target);
    return;
  }
  await run(parsePlan(argv));
}

if (import.meta.main)
  await main().catch((err: unknown) => {
    log(`failed: ${(err as Error).stack ?? String(err)}`);
    process.exitCode = 1;
  });
