// kubegc against kube-controller-manager's own garbage collector and against
// the API server's ceiling, all in one run (issue 7). See bench/README.md.
//   npm run bench                 full: N=2,000, M=10,000 and 50,000, 1,000,000 graph objects, 3 repetitions
//   npm run bench -- --quick      N=500, M=10,000, 100,000 graph objects, 1 repetition (< 5 min)
// Development overrides: --reps R, --n N, --memory M1[,M2], --graph-objects G,
// --only cascade,foreground,memory,graph, --contenders kubegc,kcm_default,kcm_equal,ceiling,
// --keep-cluster, and for experiments --node-flags "FLAGS" (Node.js flags for
// kubegc and the graph process), --kubegc-args "ARGS", --kcm-args "ARGS".
import { RUNTIME_FLAGS } from '../src/runtime-flags.ts';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as prettier from 'prettier';
import { REPO_ROOT, down, up, type Cluster } from '../cluster/controlplane.ts';
import type { GraphResult } from './graph.ts';
import { CONTENDERS, type ContenderSpec } from './lib/contenders.ts';
import { benchClient } from './lib/kube.ts';
import {
  RESULTS_DIR,
  machine,
  median,
  render,
  resultsMarkdown,
  round2,
  slope,
  toMb,
  type Details,
  type Machine,
  type Results,
} from './lib/report.ts';
import {
  cascade,
  foreground,
  growMemoryObjects,
  startup,
  type CascadeRun,
  type Env,
} from './lib/scenarios.ts';

interface Plan {
  quick: boolean;
  reps: number;
  n: number;
  middles: number;
  leaves: number;
  memory: number[];
  graphObjects: number;
  fanout: number;
  only: Set<string>;
  keepCluster: boolean;
  nodeFlags: string[];
  kubegcArgs: string[];
  kcmArgs: string[];
  /** Cascade contenders to run (development: skip the slow kcm default). */
  contenders: Set<string>;
}

const words = (text: string | undefined): string[] => (text ?? '').split(' ').filter(Boolean);

function parsePlan(argv: string[]): Plan {
  const quick = argv.includes('--quick');
  const opt = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const num = (name: string, fallback: number): number => {
    const v = Number(opt(name) ?? fallback);
    if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
    return v;
  };
  const n = num('--n', quick ? 500 : 2000);
  const memory = (opt('--memory') ?? (quick ? '10000' : '10000,50000')).split(',').map(Number);
  if (memory.some((m) => !Number.isInteger(m) || m < 2 || m % 2) || memory.length > 2)
    throw new Error('--memory takes one or two even object counts');
  return {
    quick,
    reps: num('--reps', quick ? 1 : 3),
    n,
    // The shape is 20 middle objects with 100 leaves each; quick keeps
    // 100 leaves each and scales the middles with N.
    middles: Math.max(1, Math.round(n / 100)),
    leaves: 100,
    memory,
    graphObjects: num('--graph-objects', quick ? 100_000 : 1_000_000),
    fanout: 100_000,
    only: new Set((opt('--only') ?? 'graph,cascade,foreground,memory').split(',')),
    keepCluster: argv.includes('--keep-cluster'),
    nodeFlags: words(opt('--node-flags')),
    kubegcArgs: words(opt('--kubegc-args')),
    kcmArgs: words(opt('--kcm-args')),
    contenders: new Set((opt('--contenders') ?? 'kubegc,kcm_default,kcm_equal,ceiling').split(',')),
  };
}

const runStart = performance.now();
function log(line: string): void {
  const s = ((performance.now() - runStart) / 1000).toFixed(0).padStart(5);
  process.stderr.write(`[${s}s] ${line}\n`);
}

/** Runs one measurement; a failure is logged and noted, and the run goes on. */
async function attempt<T>(
  what: string,
  notes: string[],
  fn: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    const msg = `${what} failed: ${(err as Error).message}`;
    log(msg);
    notes.push(msg);
    return undefined;
  }
}

function runGraph(plan: Plan): Promise<GraphResult> {
  const child = spawn(
    process.execPath,
    [
      ...RUNTIME_FLAGS,
      ...plan.nodeFlags,
      '--expose-gc',
      '--max-old-space-size=8192',
      '--disable-warning=ExperimentalWarning',
      path.join(REPO_ROOT, 'bench', 'graph.ts'),
      '--objects',
      String(plan.graphObjects),
      '--fanout',
      String(plan.fanout),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => {
    for (const l of b.toString().trimEnd().split('\n')) log(l);
  });
  return new Promise((resolve, reject) =>
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`bench/graph.ts exited with ${code}`));
      else resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as GraphResult);
    }),
  );
}

async function graphPhase(plan: Plan, notes: string[]): Promise<GraphResult[]> {
  const runs: GraphResult[] = [];
  for (let rep = 1; rep <= plan.reps; rep++) {
    log(`graph: repetition ${rep}/${plan.reps}, ${plan.graphObjects} objects`);
    const r = await attempt('graph', notes, () => runGraph(plan));
    if (r) runs.push(r);
  }
  return runs;
}

/** Each contender's repetitions, by key (kubegc, kcm_default, kcm_equal, ceiling). */
type Runs = Record<string, CascadeRun[]>;

const CASCADE_CONTENDERS: [string, ContenderSpec | undefined][] = [
  ['kubegc', CONTENDERS.kubegc],
  ['kcm_default', CONTENDERS.kcmDefault],
  ['kcm_equal', CONTENDERS.kcmEqual],
  ['ceiling', undefined],
];
const FOREGROUND_CONTENDERS: [string, ContenderSpec][] = [
  ['kubegc', CONTENDERS.kubegc],
  ['kcm_equal', CONTENDERS.kcmEqual],
];

/** Repetitions interleaved across contenders, so a slow spell on a shared machine hits all of them. */
async function repeat(
  what: string,
  plan: Plan,
  notes: string[],
  contenders: [string, ContenderSpec | undefined][],
  measure: (spec: ContenderSpec | undefined) => Promise<CascadeRun>,
): Promise<Runs> {
  const runs: Runs = Object.fromEntries(contenders.map(([k]) => [k, []]));
  for (let rep = 1; rep <= plan.reps; rep++) {
    for (const [key, spec] of contenders) {
      if (!plan.contenders.has(key)) continue;
      log(`${what}: ${key}, repetition ${rep}/${plan.reps}`);
      const r = await attempt(`${what} ${key}`, notes, () => measure(spec));
      if (!r) continue;
      log(`${what}: ${key}: ${r.seconds.toFixed(2)} s (${costText(r)})`);
      runs[key]?.push(r);
    }
  }
  return runs;
}

const costText = (r: CascadeRun): string =>
  `objects created in ${r.createSeconds.toFixed(1)} s; CPU s: GC ${r.cpu.gc}, kube-apiserver ${r.cpu.apiserver}, etcd ${r.cpu.etcd}; ConfigMap requests: ${requestsText(r.requests)}`;

const requestsText = (req: Record<string, number>): string =>
  Object.entries(req)
    .sort()
    .map(([verb, n]) => `${verb} ${n}`)
    .join(', ');

const seconds = (runs: CascadeRun[] | undefined): number | null =>
  med((runs ?? []).map((r) => r.seconds));

/** Per contender: the median of each CPU figure and of each verb's request count. */
function costMedians(
  runs: Runs,
): Record<string, { cpu: CascadeRun['cpu']; requests: Record<string, number> }> {
  const m = (xs: number[]): number => round2(median(xs) ?? 0);
  return Object.fromEntries(
    Object.entries(runs).map(([k, rs]) => {
      const verbs = new Set(rs.flatMap((r) => Object.keys(r.requests)));
      const requests = Object.fromEntries(
        [...verbs].map((v) => [v, m(rs.map((r) => r.requests[v] ?? 0))]),
      );
      const cpu = {
        gc: m(rs.map((r) => r.cpu.gc)),
        apiserver: m(rs.map((r) => r.cpu.apiserver)),
        etcd: m(rs.map((r) => r.cpu.etcd)),
      };
      return [k, { cpu, requests }];
    }),
  );
}

function cascadePhase(env: Env, plan: Plan, notes: string[]): Promise<Runs> {
  return repeat(`cascade N=${plan.n}`, plan, notes, CASCADE_CONTENDERS, (spec) =>
    cascade(env, spec, plan.n),
  );
}

function foregroundPhase(env: Env, plan: Plan, notes: string[]): Promise<Runs> {
  return repeat(
    `foreground ${plan.middles}×${plan.leaves}`,
    plan,
    notes,
    FOREGROUND_CONTENDERS,
    (spec) => foreground(env, spec ?? CONTENDERS.kubegc, plan.middles, plan.leaves),
  );
}

interface MemoryPoint {
  objects: number;
  kubegc: { sync: number[]; rss: number[]; heap: number[] };
  kcm: { sync: number[]; rss: number[]; heap: number[] };
}

async function measurePoint(
  env: Env,
  objects: number,
  reps: number,
  notes: string[],
): Promise<MemoryPoint> {
  const p: MemoryPoint = {
    objects,
    kubegc: { sync: [], rss: [], heap: [] },
    kcm: { sync: [], rss: [], heap: [] },
  };
  for (let rep = 1; rep <= reps; rep++) {
    for (const [key, spec] of [
      ['kubegc', CONTENDERS.kubegc],
      ['kcm', CONTENDERS.kcmDefault],
    ] as const) {
      const r = await attempt(`start-up ${key} at ${objects}`, notes, () => startup(env, spec));
      if (!r) continue;
      log(
        `memory: ${key} on ${objects}: sync ${r.syncSeconds.toFixed(2)} s, RSS ${(r.rssBytes / 2 ** 20).toFixed(1)} MB`,
      );
      p[key].sync.push(r.syncSeconds);
      p[key].rss.push(r.rssBytes);
      if (r.heapUsedBytes !== undefined) p[key].heap.push(r.heapUsedBytes);
    }
  }
  return p;
}

/** A near-empty baseline (1 repetition), then each M in turn, growing the same objects. */
async function memoryPhase(env: Env, plan: Plan, notes: string[]) {
  log('memory: near-empty baseline');
  const baseline = await measurePoint(env, 0, 1, notes);
  const points: MemoryPoint[] = [];
  const creations: { from: number; to: number; seconds: number }[] = [];
  let have = 0;
  for (const m of plan.memory) {
    log(`memory: creating ConfigMaps ${have} → ${m}`);
    const seconds = await growMemoryObjects(env, have, m);
    log(
      `memory: created ${m - have} ConfigMaps in ${seconds.toFixed(1)} s (${Math.round((m - have) / seconds)}/s)`,
    );
    creations.push({ from: have, to: m, seconds });
    have = m;
    points.push(await measurePoint(env, m, plan.reps, notes));
  }
  return { baseline, points, creations };
}

/** The median of every figure of the graph runs. */
function graphMedians(runs: GraphResult[]): Record<string, number | null> {
  const keys = Object.keys(runs[0] ?? {}) as (keyof GraphResult)[];
  return Object.fromEntries(keys.map((k) => [k, median(runs.map((r) => r[k]))]));
}

/** The two points of the slope; quick mode has one M, so its slope starts at the near-empty baseline. */
function memoryPoints(mem: Awaited<ReturnType<typeof memoryPhase>> | undefined): MemoryPoint[] {
  if (!mem) return [];
  return mem.points.length === 1 ? [mem.baseline, ...mem.points] : mem.points;
}

const med = (xs: number[]): number | null => {
  const m = median(xs);
  return m === null ? null : round2(m);
};

function assemble(
  plan: Plan,
  graph: GraphResult[],
  casc: Runs | undefined,
  fg: Runs | undefined,
  mem: Awaited<ReturnType<typeof memoryPhase>> | undefined,
): Results {
  const points = memoryPoints(mem);
  const rss = (k: 'kubegc' | 'kcm'): (number | null)[] => points.map((p) => median(p[k].rss));
  const objects = points.map((p) => p.objects);
  const last = mem?.points[mem.points.length - 1];
  const g = (k: keyof GraphResult): number | null => median(graph.map((r) => r[k]));
  return {
    quick: plan.quick,
    cascade: {
      n: plan.n,
      kubegc_s: seconds(casc?.kubegc),
      kcm_default_s: seconds(casc?.kcm_default),
      kcm_equal_s: seconds(casc?.kcm_equal),
      ceiling_s: seconds(casc?.ceiling),
    },
    foreground: {
      n: plan.middles + plan.middles * plan.leaves,
      kubegc_s: seconds(fg?.kubegc),
      kcm_equal_s: seconds(fg?.kcm_equal),
    },
    memory: {
      objects,
      kubegc_rss_mb: rss('kubegc').map(toMb),
      kcm_rss_mb: rss('kcm').map(toMb),
      kubegc_bytes_per_object: slope(objects, rss('kubegc').map(toMb)),
      kcm_bytes_per_object: slope(objects, rss('kcm').map(toMb)),
    },
    graph: {
      objects: plan.graphObjects,
      events_per_s: graph.length ? Math.round(g('events_per_s') ?? 0) : null,
      heap_bytes_per_object: graph.length ? Math.round(g('heap_bytes_per_object') ?? 0) : null,
      fanout_enqueue_ms: graph.length ? round2(g('fanout_enqueue_ms') ?? 0) : null,
    },
    startup: {
      objects: last?.objects ?? 0,
      kubegc_sync_s: med(last?.kubegc.sync ?? []),
      kcm_sync_s: med(last?.kcm.sync ?? []),
    },
  };
}

function standardNotes(plan: Plan): string[] {
  const notes = [
    'kube-controller-manager multiplies --kube-api-qps by 2 for its GC client (two calls per deletion), so "kcm GC, equal" runs with 1,000 QPS effective, kubegc with 500.',
    'kubegc runs the built `dist/cli.js` (the bench runs `npm run build` first), as the image and the `kubegc` bin run it.',
    `kubegc and the graph process run with kubegc's runtime flags (${RUNTIME_FLAGS.join(' ')}; src/runtime-flags.ts), as the image and the \`kubegc\` bin start it.`,
    "Every GC is started after its objects exist and stopped right after its measurement: no two garbage collectors ever run at once (the cluster's own kube-controller-manager runs without its GC).",
  ];
  if (plan.kubegcArgs.length || plan.kcmArgs.length)
    notes.unshift(
      `Experiment: extra arguments: kubegc [${plan.kubegcArgs.join(' ')}], kube-controller-manager [${plan.kcmArgs.join(' ')}].`,
    );
  if (plan.nodeFlags.length)
    notes.unshift(
      `Experiment: kubegc and the graph process ran with Node.js flags ${plan.nodeFlags.join(' ')}.`,
    );
  if (plan.quick)
    notes.unshift(
      'Quick mode: 1 repetition per measurement (not a median); memory slope from a near-empty baseline to 10,000 objects; graph heap at 100,000 objects, not 1,000,000.',
    );
  return notes;
}

async function withCluster<T>(
  plan: Plan,
  fn: (env: Env) => Promise<T>,
): Promise<{ value: T; cluster: Cluster }> {
  const dir = path.join(REPO_ROOT, '.cluster-bench');
  // A fresh control plane: leftovers of an interrupted run would skew memory and timing.
  await down(dir);
  log('starting the benchmark control plane in .cluster-bench/');
  const cluster = await up({ dir, log: (l) => log(`cluster: ${l}`) });
  if (cluster.builtinGc)
    throw new Error('the benchmark cluster runs kube-controller-manager with its GC');
  const client = await benchClient(cluster.kubeconfig);
  try {
    const extras = {
      nodeFlags: plan.nodeFlags,
      kubegcArgs: plan.kubegcArgs,
      kcmArgs: plan.kcmArgs,
    };
    return { value: await fn({ cluster, client, log, extras }), cluster };
  } finally {
    client.close();
    if (plan.keepCluster) log(`keeping the control plane in ${dir}`);
    else await down(dir);
  }
}

async function main(): Promise<void> {
  const plan = parsePlan(process.argv.slice(2));
  // kubegc is measured as users run it: the compiled dist/, built from this tree now.
  execFileSync('npm', ['run', 'build'], { cwd: REPO_ROOT, stdio: 'inherit' });
  const notes = standardNotes(plan);
  const started = new Date();
  const loadAtStart = os.loadavg().map(round2);
  const graph = plan.only.has('graph') ? await graphPhase(plan, notes) : [];
  const { value, cluster } = await withCluster(plan, async (env) => ({
    casc: plan.only.has('cascade') ? await cascadePhase(env, plan, notes) : undefined,
    fg: plan.only.has('foreground') ? await foregroundPhase(env, plan, notes) : undefined,
    mem: plan.only.has('memory') ? await memoryPhase(env, plan, notes) : undefined,
  }));
  const results = assemble(plan, graph, value.casc, value.fg, value.mem);
  const m: Machine = {
    ...machine(cluster.version, path.join(cluster.binDir, 'kube-controller-manager')),
    loadAverageAtStart: loadAtStart,
    loadAverageAtEnd: os.loadavg().map(round2),
  };
  const details: Details = {
    repetitions: plan.reps,
    notes,
    started: started.toISOString(),
    minutes: round2((performance.now() - runStart) / 60_000),
    foregroundShape: `${plan.middles} middle objects → ${plan.leaves} leaves each`,
    graph: graph.length ? graphMedians(graph) : undefined,
    cascadeCost: value.casc ? costMedians(value.casc) : undefined,
    foregroundCost: value.fg ? costMedians(value.fg) : undefined,
    kubegcHeapMb: memoryPoints(value.mem).map((p) => toMb(median(p.kubegc.heap))),
    graphRuns: graph,
    cascadeRuns: value.casc,
    foregroundRuns: value.fg,
    memoryRuns: value.mem,
    machine: m,
  };
  const report = render(results, details, m);
  console.log(report);
  await writeOutputs(plan, results, details, report, started);
}

async function writeOutputs(
  plan: Plan,
  results: Results,
  details: Details,
  report: string,
  started: Date,
): Promise<void> {
  const dir = RESULTS_DIR(REPO_ROOT);
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  await fs.writeFile(
    path.join(dir, 'latest.details.json'),
    `${JSON.stringify(details, null, 2)}\n`,
  );
  const when = `${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${details.minutes as number} minutes`;
  const md = path.join(REPO_ROOT, 'bench', 'RESULTS.md');
  const previous = (() => {
    try {
      return readFileSync(md, 'utf8');
    } catch {
      return '';
    }
  })();
  // Formatted as `npm run lint` (prettier --check) expects of the committed file.
  const markdown = await prettier.format(resultsMarkdown(report, previous, when, plan.quick), {
    ...((await prettier.resolveConfig(md)) ?? {}),
    parser: 'markdown',
  });
  await fs.writeFile(path.join(dir, 'latest.md'), markdown);
  // RESULTS.md holds full runs only; a partial (--only) or quick run never replaces it.
  const complete =
    plan.only.size === 4 &&
    plan.contenders.size === 4 &&
    !plan.quick &&
    !plan.nodeFlags.length &&
    !plan.kubegcArgs.length &&
    !plan.kcmArgs.length;
  if (complete) await fs.writeFile(md, markdown);
  log(
    `wrote ${path.relative(REPO_ROOT, dir)}/latest.json${complete ? ' and bench/RESULTS.md' : ''}`,
  );
}

await main();
