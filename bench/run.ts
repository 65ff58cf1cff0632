// kubegc against kube-controller-manager's own garbage collector and against
// the API server's ceiling, all in one run. See bench/README.md.
//   npm run bench                 full: 5 repetitions of everything (about an hour on 2 cores)
//   npm run bench -- --quick      1 repetition, small sizes (< 10 min)
// Development overrides: --reps R, --seed S, --n N, --memory M1,M2,..., --payloads empty,data300,cr,
// --graph-objects G, --only graph,cascade,foreground,live,memory,
// --contenders kubegc,kubegc_kcm_budget,kubegc_no_runtime_flags,kcm_default,kcm_equal,ceiling,
// --keep-cluster, --heap-snapshots DIR (each kubegc of the memory phase writes a
// heap snapshot there once settled), --kubegc-entry PATH (another build's dist/cli.js, e.g. a
// baseline), --baseline PATH (the build the memory phase's kubegc_baseline contender runs, beside
// this tree's kubegc), and for experiments --node-flags "FLAGS" (Node.js flags for
// kubegc and the graph process), --kubegc-args "ARGS", --kcm-args "ARGS".
// Only a run with none of them (--seed and --keep-cluster aside) is "full"
// and replaces bench/RESULTS.md.
import { RUNTIME_FLAGS } from '../src/runtime-flags.ts';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as prettier from 'prettier';
import { REPO_ROOT, down, up, type Cluster } from '../cluster/controlplane.ts';
import type { GraphResult } from './graph.ts';
import { optionReader, words } from './lib/args.ts';
import { CONTENDERS, contenderLabel, type ContenderKey, type Extras } from './lib/contenders.ts';
import { benchClient, ensureWidgetCrd } from './lib/kube.ts';
import { RESULTS_DIR, machine, machineTable, resultsMarkdown, type Machine } from './lib/report.ts';
import {
  cascade,
  clearMemoryObjects,
  foreground,
  growMemoryObjects,
  liveChurn,
  liveSecondOwner,
  PAYLOAD_TEXT,
  startup,
  type Env,
  type Payload,
} from './lib/scenarios.ts';
import { rng, round2, shuffled } from './lib/stats.ts';
import { renderTables, summarizeRecords, targets, type RepRecord } from './lib/summary.ts';

const PHASES = ['graph', 'cascade', 'foreground', 'live', 'memory'] as const;
const ALL_CONTENDERS: ContenderKey[] = [
  'kubegc',
  'kubegc_kcm_budget',
  'kubegc_no_runtime_flags',
  'kcm_default',
  'kcm_equal',
  'ceiling',
];
const PAYLOADS: Payload[] = ['empty', 'data300', 'cr'];

/** Which contenders each scenario compares. */
const SCENARIO_CONTENDERS: Record<string, ContenderKey[]> = {
  // Both budgets of both GCs, the A/B of kubegc's runtime flags, and the ceiling.
  cascade: ALL_CONTENDERS,
  foreground: ['kubegc', 'kcm_equal'],
  live_second_owner: ['kubegc', 'kcm_equal'],
  live_churn: ['kubegc', 'kcm_equal'],
  // A GC's memory and start-up do not depend on its client budget.
  memory: ['kubegc', 'kubegc_no_runtime_flags', 'kcm_default', 'kubegc_baseline'],
};

export interface Plan {
  quick: boolean;
  reps: number;
  seed: number;
  n: number;
  middles: number;
  leaves: number;
  /** Memory sizes; 0 = a near-empty baseline. */
  memory: number[];
  payloads: Payload[];
  graphObjects: number;
  fanout: number;
  only: Set<string>;
  keepCluster: boolean;
  extras: Extras;
  contenders: Set<ContenderKey>;
}

export function parsePlan(argv: string[]): Plan {
  const quick = argv.includes('--quick');
  const opt = optionReader(argv);
  const num = (name: string, fallback: number): number => {
    const v = Number(opt(name) ?? fallback);
    if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
    return v;
  };
  const list = <T extends string>(
    name: string,
    fallback: readonly T[],
    allowed: readonly T[],
  ): T[] => {
    const v = (opt(name)?.split(',') ?? fallback) as T[];
    const bad = v.filter((x) => !allowed.includes(x));
    if (bad.length)
      throw new Error(`${name}: unknown ${bad.join(', ')} (allowed: ${allowed.join(', ')})`);
    return v;
  };
  const n = num('--n', quick ? 500 : 2000);
  const memory = (opt('--memory') ?? (quick ? '0,10000' : '0,10000,50000,200000'))
    .split(',')
    .map(Number);
  if (memory.some((m) => !Number.isInteger(m) || m < 0 || m % 2))
    throw new Error('--memory takes even object counts (0: a near-empty baseline)');
  const seedText = opt('--seed');
  const seed = seedText === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(seedText);
  if (!Number.isInteger(seed)) throw new Error('--seed must be an integer');
  return {
    quick,
    reps: num('--reps', quick ? 1 : 5),
    seed,
    n,
    // The shape is 20 middle objects with 100 leaves each at N = 2,000.
    middles: Math.max(1, Math.round(n / 100)),
    leaves: 100,
    memory: [...new Set(memory)].sort((a, b) => a - b),
    payloads: list('--payloads', quick ? ['empty'] : ['empty', 'cr'], PAYLOADS),
    graphObjects: num('--graph-objects', quick ? 100_000 : 1_000_000),
    fanout: 100_000,
    only: new Set(list('--only', PHASES, PHASES)),
    keepCluster: argv.includes('--keep-cluster'),
    extras: {
      nodeFlags: words(opt('--node-flags')),
      kubegcArgs: words(opt('--kubegc-args')),
      kcmArgs: words(opt('--kcm-args')),
      ...(opt('--heap-snapshots')
        ? { heapSnapshotDir: path.resolve(opt('--heap-snapshots') ?? '') }
        : {}),
      ...(opt('--kubegc-entry') ? { kubegcEntry: path.resolve(opt('--kubegc-entry') ?? '') } : {}),
      ...(opt('--baseline') ? { baselineEntry: path.resolve(opt('--baseline') ?? '') } : {}),
    },
    // kubegc_baseline only when asked for by name (it needs --baseline).
    contenders: new Set(
      list('--contenders', ALL_CONTENDERS, [...ALL_CONTENDERS, 'kubegc_baseline']),
    ),
  };
}

/**
 * What keeps a run from being "full" (empty: it is): every option that
 * changes what is measured, compared with the full run's defaults.
 */
export function notFullBecause(plan: Plan): string[] {
  const full = parsePlan(['--seed', '0']);
  const why: string[] = [];
  if (plan.quick) why.push('--quick');
  if (plan.reps < full.reps) why.push(`--reps ${plan.reps} (a full run has ≥ ${full.reps})`);
  if (plan.n !== full.n) why.push(`--n ${plan.n}`);
  if (plan.memory.join() !== full.memory.join()) why.push(`--memory ${plan.memory.join(',')}`);
  if (plan.payloads.join() !== full.payloads.join())
    why.push(`--payloads ${plan.payloads.join(',')}`);
  if (plan.graphObjects !== full.graphObjects) why.push(`--graph-objects ${plan.graphObjects}`);
  if (plan.only.size !== full.only.size) why.push(`--only ${[...plan.only].join(',')}`);
  if (plan.contenders.size !== full.contenders.size)
    why.push(`--contenders ${[...plan.contenders].join(',')}`);
  if (plan.extras.nodeFlags.length) why.push('--node-flags');
  if (plan.extras.kubegcArgs.length) why.push('--kubegc-args');
  if (plan.extras.kcmArgs.length) why.push('--kcm-args');
  if (plan.extras.heapSnapshotDir) why.push('--heap-snapshots');
  if (plan.extras.kubegcEntry) why.push(`--kubegc-entry ${plan.extras.kubegcEntry}`);
  if (plan.contenders.has('kubegc_baseline')) why.push('kubegc_baseline');
  return why;
}

const runStart = performance.now();
function log(line: string): void {
  const s = ((performance.now() - runStart) / 1000).toFixed(0).padStart(5);
  process.stderr.write(`[${s}s] ${line}\n`);
}

class Recorder {
  readonly records: RepRecord[] = [];
  private readonly random: () => number;
  private readonly plan: Plan;
  private readonly rawFile: string;
  constructor(plan: Plan, rawFile: string) {
    this.plan = plan;
    this.rawFile = rawFile;
    this.random = rng(plan.seed);
  }

  /** This round's contenders of `scenario`, in a fresh random order. */
  order(scenario: string): ContenderKey[] {
    const mine = (SCENARIO_CONTENDERS[scenario] ?? []).filter((c) => this.plan.contenders.has(c));
    return shuffled(mine, this.random);
  }

  /** Runs one repetition; a failure is recorded (and shown), never swallowed. */
  async run(
    scenario: string,
    contender: ContenderKey,
    rep: number,
    position: number,
    params: Record<string, string | number>,
    fn: () => Promise<Record<string, unknown>>,
  ): Promise<void> {
    const label =
      scenario === 'graph' ? 'bench/graph.ts' : contenderLabel(contender, this.plan.extras);
    log(
      `${scenario} ${JSON.stringify(params)}: ${contender}, round ${rep}/${this.plan.reps} (#${position})`,
    );
    const base = { scenario, contender, label, rep, position, params };
    try {
      const values = await fn();
      this.records.push({ ...base, ok: true, values });
      log(`  ${summaryLine(values)}`);
    } catch (err) {
      const error = (err as Error).message;
      this.records.push({ ...base, ok: false, error, values: {} });
      log(`  FAILED: ${error}`);
    }
    // Written after every repetition: an interrupted run keeps what it measured.
    await fs.writeFile(this.rawFile, `${JSON.stringify(this.records)}\n`);
  }
}

function summaryLine(v: Record<string, unknown>): string {
  return Object.entries(v)
    .filter(([, x]) => typeof x === 'number')
    .map(([k, x]) => `${k} ${round2(x as number)}`)
    .join(', ');
}

function runGraph(plan: Plan): Promise<GraphResult> {
  const child = spawn(
    process.execPath,
    [
      ...RUNTIME_FLAGS,
      ...plan.extras.nodeFlags,
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
    for (const l of b.toString().trimEnd().split('\n')) log(`  ${l}`);
  });
  return new Promise((resolve, reject) =>
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`bench/graph.ts exited with ${code}`));
      else resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as GraphResult);
    }),
  );
}

async function graphPhase(plan: Plan, rec: Recorder): Promise<void> {
  for (let rep = 1; rep <= plan.reps; rep++)
    await rec.run('graph', 'kubegc', rep, 1, { objects: plan.graphObjects }, async () => ({
      ...(await runGraph(plan)),
    }));
}

/** Rounds of a cascade-shaped scenario: every contender once per round, in a random order. */
async function rounds(
  scenario: string,
  plan: Plan,
  rec: Recorder,
  params: Record<string, number>,
  measure: (key: ContenderKey) => Promise<Record<string, unknown>>,
): Promise<void> {
  for (let rep = 1; rep <= plan.reps; rep++) {
    const order = rec.order(scenario);
    for (const [i, key] of order.entries())
      await rec.run(scenario, key, rep, i + 1, params, () => measure(key));
  }
}

const specOf = (key: ContenderKey) => (key === 'ceiling' ? undefined : CONTENDERS[key]);
const spec = (key: ContenderKey) => {
  const s = specOf(key);
  if (!s) throw new Error(`${key} cannot run this scenario`);
  return s;
};

async function cascadePhases(env: Env, plan: Plan, rec: Recorder): Promise<void> {
  if (plan.only.has('cascade'))
    await rounds('cascade', plan, rec, { n: plan.n }, async (k) => ({
      ...(await cascade(env, specOf(k), plan.n)),
    }));
  if (plan.only.has('foreground'))
    await rounds(
      'foreground',
      plan,
      rec,
      { n: plan.middles + plan.middles * plan.leaves, middles: plan.middles, leaves: plan.leaves },
      async (k) => ({ ...(await foreground(env, spec(k), plan.middles, plan.leaves)) }),
    );
  if (plan.only.has('live')) {
    await rounds('live_second_owner', plan, rec, { n: plan.n }, async (k) => ({
      ...(await liveSecondOwner(env, spec(k), plan.n)),
    }));
    await rounds('live_churn', plan, rec, { n: plan.n }, async (k) => ({
      ...(await liveChurn(env, spec(k), plan.n)),
    }));
  }
}

/** Per payload: grow the same objects through each size; every contender starts on each, in random order. */
async function memoryPhase(env: Env, plan: Plan, rec: Recorder): Promise<void> {
  for (const [pi, payload] of plan.payloads.entries()) {
    let have = 0;
    for (const m of plan.memory) {
      // The near-empty baseline is the same for every payload: measured once.
      if (m === 0 && pi > 0) continue;
      if (m > have) {
        log(`memory: creating ${PAYLOAD_TEXT[payload]} ${have} → ${m}`);
        const seconds = await growMemoryObjects(env, payload, have, m);
        log(
          `memory: created ${m - have} in ${seconds.toFixed(1)} s (${Math.round((m - have) / seconds)}/s)`,
        );
        have = m;
      }
      for (let rep = 1; rep <= plan.reps; rep++) {
        const order = rec.order('memory');
        for (const [i, key] of order.entries())
          await rec.run('memory', key, rep, i + 1, { payload, objects: m }, async () => ({
            ...(await startup(env, spec(key))),
          }));
      }
    }
    if (pi < plan.payloads.length - 1 || plan.keepCluster) {
      log(`memory: removing the ${PAYLOAD_TEXT[payload]}`);
      const seconds = await clearMemoryObjects(env, payload);
      log(`memory: removed in ${seconds.toFixed(1)} s`);
    }
  }
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
    // Present for every measurement, so every GC watches the same resources throughout.
    await ensureWidgetCrd(client);
    return { value: await fn({ cluster, client, log, extras: plan.extras }), cluster };
  } finally {
    client.close();
    if (plan.keepCluster) log(`keeping the control plane in ${dir}`);
    else await down(dir);
  }
}

function standardNotes(plan: Plan, why: string[]): string[] {
  const notes = [
    `Seed ${plan.seed}: each round runs its contenders in an order drawn from it (\`--seed ${plan.seed}\` repeats the order).`,
    "kube-controller-manager multiplies --kube-api-qps by 2 for its GC client (cmd/kube-controller-manager/app/core.go), so kcm's defaults are 40 QPS, burst 30 for its GC, and `--kube-api-qps=500` is 1,000 QPS; kubegc's `--kube-api-qps` is what its client gets.",
    'kubegc runs the built `dist/cli.js` (the bench runs `npm run build` first), as the image and the `kubegc` bin run it.',
    "Every GC is started after its objects exist and stopped right after its measurement: no two garbage collectors ever run at once (the cluster's own kube-controller-manager runs without its GC).",
  ];
  if (why.length) notes.unshift(`Not a full run: ${why.join(', ')}.`);
  return notes;
}

async function main(): Promise<void> {
  const plan = parsePlan(process.argv.slice(2));
  const why = notFullBecause(plan);
  log(`seed ${plan.seed}; ${why.length ? `not a full run (${why.join(', ')})` : 'a full run'}`);
  // kubegc is measured as users run it: the compiled dist/, built from this tree now.
  execFileSync('npm', ['run', 'build'], { cwd: REPO_ROOT, stdio: 'inherit' });
  const started = new Date();
  const stamp = started.toISOString().slice(0, 16).replace(':', '');
  const dir = RESULTS_DIR(REPO_ROOT);
  await fs.mkdir(dir, { recursive: true });
  if (plan.extras.heapSnapshotDir) await fs.mkdir(plan.extras.heapSnapshotDir, { recursive: true });
  const rec = new Recorder(plan, path.join(dir, 'latest.raw.json'));
  const loadAtStart = os.loadavg().map(round2);
  if (plan.only.has('graph')) await graphPhase(plan, rec);
  const needsCluster = ['cascade', 'foreground', 'live', 'memory'].some((p) => plan.only.has(p));
  let version = 'not started';
  let kcmBinary = '';
  if (needsCluster) {
    const { cluster } = await withCluster(plan, async (env) => {
      await cascadePhases(env, plan, rec);
      if (plan.only.has('memory')) await memoryPhase(env, plan, rec);
    });
    version = cluster.version;
    kcmBinary = path.join(cluster.binDir, 'kube-controller-manager');
  }
  const m: Machine = {
    ...machine(version, kcmBinary),
    loadAverageAtStart: loadAtStart,
    loadAverageAtEnd: os.loadavg().map(round2),
  };
  const minutes = round2((performance.now() - runStart) / 60_000);
  const summary = summarizeRecords(rec.records);
  const notes = standardNotes(plan, why);
  const report = [
    renderTables(rec.records, summary, PAYLOAD_TEXT),
    '',
    '### Notes',
    ...notes.map((n) => `- ${n}`),
    '',
    machineTable(m),
  ].join('\n');
  console.log(report);
  const raw = {
    started: started.toISOString(),
    minutes,
    full: why.length === 0,
    notFullBecause: why,
    plan: { ...plan, only: [...plan.only], contenders: [...plan.contenders] },
    machine: m,
    notes,
    summary,
    targets: targets(rec.records, summary),
    records: rec.records,
  };
  await fs.writeFile(path.join(dir, 'latest.json'), `${JSON.stringify(raw, null, 2)}\n`);
  const when = `${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${minutes} minutes, seed ${plan.seed}`;
  const md = path.join(REPO_ROOT, 'bench', 'RESULTS.md');
  const previous = (() => {
    try {
      return readFileSync(md, 'utf8');
    } catch {
      return '';
    }
  })();
  const rawName = `full-${stamp}.json`;
  const markdown = await prettier.format(
    resultsMarkdown(report, previous, when, plan.quick, `bench/results/${rawName}`),
    {
      ...((await prettier.resolveConfig(md)) ?? {}),
      parser: 'markdown',
    },
  );
  await fs.writeFile(path.join(dir, 'latest.md'), markdown);
  if (why.length === 0) {
    // Every repetition of every full run is kept (committed), dated, beside RESULTS.md.
    await fs.writeFile(path.join(dir, rawName), `${JSON.stringify(raw, null, 1)}\n`);
    await fs.writeFile(md, markdown);
    log(`wrote bench/results/${rawName} and bench/RESULTS.md`);
  } else
    log(
      `wrote ${path.relative(REPO_ROOT, dir)}/latest.{json,md} (not a full run: RESULTS.md unchanged)`,
    );
}

if (import.meta.main) await main();
