// A garbage collector started on a backlog, as after a restart: kubegc against
// kube-controller-manager's GC, one after another on the same control plane.
// See bench/README.md ("A GC started on a backlog").
//   npm run bench:restart                  full: 5 rounds, N = 3,000 and 30,000, one and 100
//                                          dependents per owner, the healthy restart at 200,000
//   npm run bench:restart -- --quick       1 round, N = 3,000, one dependent per owner, healthy at 20,000
// Options: --rounds R, --n 3000,30000[,200000], --fanouts 1,100, --healthy M (0: skip),
// --only restart,healthy, --contenders kcm_default,kubegc_kcm_budget,kubegc, --user-delay S,
// --seed S, --keep-cluster, --kubegc-entry PATH (another build's dist/cli.js, e.g. a
// baseline), --kubegc-args "ARGS", --kcm-args "ARGS", --no-build, --results (write the
// section of bench/RESULTS.md even when the run is not full); --render FILE [--results]: no run,
// the report of a recorded run (bench/results/restart-*.json) written again.
//
// Restart: N dependents (ConfigMaps) whose owners were deleted while no GC ran
// (created owned, then each owner deleted with propagationPolicy Background,
// which with no GC running deletes the owner alone), plus a user's tree (one
// owner, 100 dependents). The GC is started cold; `--user-delay` seconds
// (3) after its spawn the user deletes the tree's owner with Background. One
// watch on the namespace times the two: the user's cascade (from that DELETE
// to its 100th dependent DELETED) and the leaked dependents (from the GC's
// spawn to the last of them DELETED).
//
// Healthy restart: M objects, half owners, half owned (dependents named to
// list before their owners, so each owner is first met as a reference), every
// owner alive. Each GC is started cold; once synced and its reads have
// stopped, the owner reads it sent and (kubegc) the verification items it
// queued are counted. Nothing is collectable: a DELETE fails the repetition.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, delay, down, up, type Cluster } from '../cluster/controlplane.ts';
import type { KubeClient } from '../src/api/client.ts';
import {
  CONTENDERS,
  contenderLabel,
  controlPlanePids,
  cpuSeconds,
  scrapeSum,
  start,
  type Extras,
  type Running,
} from './lib/contenders.ts';
import { optionReader, words } from './lib/args.ts';
import {
  benchClient,
  collectionVersion,
  createConfigMaps,
  createNamespace,
  deleteConfigMap,
  deleteNamespace,
  emptyCollection,
  pool,
  watchUntil,
  type ObjectSpec,
} from './lib/kube.ts';
import {
  machine,
  machineTable,
  RESULTS_DIR,
  table,
  writeResultsSection,
  type Machine,
} from './lib/report.ts';
import { configMapRequests, type Env } from './lib/scenarios.ts';
import { pairedRatios, rng, round2, shuffled, summarize, type Summary } from './lib/stats.ts';

const RESTART_CONTENDERS = ['kcm_default', 'kubegc_kcm_budget', 'kubegc'] as const;
type Contender = (typeof RESTART_CONTENDERS)[number];
const SCENARIOS = ['restart', 'healthy'] as const;
type Scenario = (typeof SCENARIOS)[number];
/** Dependents of the user's tree. */
const USER_DEPENDENTS = 100;

export interface Plan {
  quick: boolean;
  rounds: number;
  seed: number;
  ns: number[];
  fanouts: number[];
  healthy: number;
  userDelayS: number;
  only: Set<Scenario>;
  contenders: Contender[];
  keepCluster: boolean;
  build: boolean;
  results: boolean;
  extras: Extras;
}

export function parsePlan(argv: string[]): Plan {
  const quick = argv.includes('--quick');
  const opt = optionReader(argv);
  const ints = (name: string, fallback: string, min: number): number[] => {
    const v = (opt(name) ?? fallback).split(',').map(Number);
    if (v.some((x) => !Number.isInteger(x) || x < min))
      throw new Error(`${name} takes integers ≥ ${min}`);
    return v;
  };
  const pick = <T extends string>(name: string, all: readonly T[]): T[] => {
    const given = opt(name)?.split(',') ?? [...all];
    const known = all.filter((x) => given.includes(x));
    if (known.length !== given.length)
      throw new Error(`${name}: one of ${all.join(', ')}, comma-separated`);
    return known;
  };
  const [rounds = 1] = ints('--rounds', quick ? '1' : '5', 1);
  const [healthy = 0] = ints('--healthy', quick ? '20000' : '200000', 0);
  const [userDelayS = 3] = ints('--user-delay', '3', 0);
  const seedText = opt('--seed');
  const seed = seedText === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(seedText);
  if (!Number.isInteger(seed)) throw new Error('--seed must be an integer');
  const entry = opt('--kubegc-entry');
  const plan: Plan = {
    quick,
    rounds,
    seed,
    ns: ints('--n', quick ? '3000' : '3000,30000', 1),
    fanouts: ints('--fanouts', quick ? '1' : '1,100', 1),
    healthy: healthy - (healthy % 2),
    userDelayS,
    only: new Set(pick('--only', SCENARIOS)),
    contenders: pick('--contenders', RESTART_CONTENDERS),
    keepCluster: argv.includes('--keep-cluster'),
    build: !argv.includes('--no-build'),
    results: argv.includes('--results'),
    extras: {
      nodeFlags: [],
      kubegcArgs: words(opt('--kubegc-args')),
      kcmArgs: words(opt('--kcm-args')),
      ...(entry ? { kubegcEntry: path.resolve(entry) } : {}),
    },
  };
  if (plan.healthy === 0) plan.only.delete('healthy');
  return plan;
}

/** What keeps the run from replacing the section of bench/RESULTS.md (empty: it does). */
export function notFullBecause(plan: Plan): string[] {
  const full = parsePlan(['--seed', '0']);
  const why: string[] = [];
  if (plan.quick) why.push('--quick');
  if (plan.rounds < full.rounds) why.push(`--rounds ${plan.rounds}`);
  if (plan.ns.join() !== full.ns.join()) why.push(`--n ${plan.ns.join(',')}`);
  if (plan.fanouts.join() !== full.fanouts.join()) why.push(`--fanouts ${plan.fanouts.join(',')}`);
  if (plan.healthy !== full.healthy) why.push(`--healthy ${plan.healthy}`);
  if (plan.userDelayS !== full.userDelayS) why.push(`--user-delay ${plan.userDelayS}`);
  if (plan.only.size !== full.only.size) why.push(`--only ${[...plan.only].join(',')}`);
  if (plan.contenders.length !== full.contenders.length)
    why.push(`--contenders ${plan.contenders.join(',')}`);
  if (plan.extras.kubegcArgs.length) why.push('--kubegc-args');
  if (plan.extras.kcmArgs.length) why.push('--kcm-args');
  if (plan.extras.kubegcEntry) why.push(`--kubegc-entry ${plan.extras.kubegcEntry}`);
  return why;
}

const runStart = performance.now();
function log(line: string): void {
  const s = ((performance.now() - runStart) / 1000).toFixed(0).padStart(5);
  process.stderr.write(`[${s}s] ${line}\n`);
}

export interface RestartRecord {
  scenario: Scenario;
  contender: Contender;
  label: string;
  round: number;
  position: number;
  params: { n: number; fanout: number };
  ok: boolean;
  error?: string;
  values: Record<string, number | null | Record<string, number>>;
}

/** Requests on ConfigMaps the API server completed, and the control plane's CPU, at one instant. */
async function meterNow(env: Env): Promise<{
  requests: Record<string, number>;
  cpu: { apiserver: number; etcd: number };
}> {
  const pids = await controlPlanePids(env.cluster);
  return {
    requests: await configMapRequests(env),
    cpu: {
      apiserver: await cpuSeconds(pids['kube-apiserver'] ?? 0),
      etcd: await cpuSeconds(pids.etcd ?? 0),
    },
  };
}

function requestsSince(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [verb, n] of Object.entries(after)) {
    const d = n - (before[verb] ?? 0);
    if (d > 0) out[verb] = d;
  }
  return out;
}

/** kubegc's own counts from its metrics: verification items queued, its requests by verb. */
async function kubegcCounts(gc: Running): Promise<Record<string, number>> {
  if (!gc.metricsUrl) return {};
  const url = gc.metricsUrl;
  return {
    // Every lane of the attempt-to-delete queue (a label may split it).
    attemptToDeleteAdds: await scrapeSum(url, 'workqueue_adds_total', /attempt_to_delete/),
    attemptToOrphanAdds: await scrapeSum(url, 'workqueue_adds_total', /attempt_to_orphan/),
    apiGets: await scrapeSum(url, 'kubegc_api_requests_total', /verb="GET"/),
    apiLists: await scrapeSum(url, 'kubegc_api_requests_total', /verb="LIST"/),
  };
}

const pad = (i: number): string => String(i).padStart(6, '0');
let namespaces = 0;

/**
 * The restart's objects in a fresh namespace: `n` leaked dependents (their
 * owners created, then deleted while no GC runs) and the user's tree.
 */
async function leakedNamespace(env: Env, n: number, fanout: number): Promise<string> {
  const ns = `restart-${Date.now().toString(36)}-${++namespaces}`;
  await createNamespace(env.client, ns);
  const owners = Array.from({ length: Math.ceil(n / fanout) }, (_, i) => `owner-${pad(i)}`);
  const uids = await createConfigMaps(
    env.client,
    ns,
    owners.map((name) => ({ name })),
  );
  const leaked = Array.from({ length: n }, (_, j): ObjectSpec => {
    const k = Math.floor(j / fanout);
    return {
      name: `leak-${pad(j)}`,
      owner: { name: owners[k] ?? '', uid: uids[k] ?? '', blockOwnerDeletion: false },
    };
  });
  await createConfigMaps(env.client, ns, leaked);
  // No GC runs: a Background deletion removes the owner at once and leaves
  // its dependents naming it, as a collector that was down would find them.
  await pool(owners, 100, (name) => deleteConfigMap(env.client, ns, name, 'Background'));
  const [userUid] = await createConfigMaps(env.client, ns, [{ name: 'user-owner' }]);
  const owner = { name: 'user-owner', uid: userUid ?? '', blockOwnerDeletion: false };
  await createConfigMaps(
    env.client,
    ns,
    Array.from({ length: USER_DEPENDENTS }, (_, i) => ({ name: `user-dep-${pad(i)}`, owner })),
  );
  return ns;
}

/**
 * Leaves nothing of the namespace for the next GC to find, and waits until
 * the namespace controller has finished with it: its own writes (the
 * namespace's kube-root-ca.crt ConfigMap deleted) must not fall into the next
 * repetition's counts.
 */
async function removeNamespace(env: Env, ns: string): Promise<void> {
  await emptyCollection(env.client, ns, 'configmaps');
  await deleteNamespace(env.client, ns);
  for (const deadline = performance.now() + 300_000; performance.now() < deadline;) {
    const gone = await env.client.request('GET', `/api/v1/namespaces/${ns}`).then(
      () => false,
      (err: unknown) => (err as { status?: number }).status === 404,
    );
    if (gone) return;
    await delay(500);
  }
  throw new Error(`namespace ${ns} not gone within 300 s`);
}

/** One restart repetition: the two instants, the requests, the GC's own counts. */
async function restartRep(
  env: Env,
  key: Contender,
  n: number,
  fanout: number,
  userDelayS: number,
): Promise<RestartRecord['values']> {
  const t = performance.now();
  const ns = await leakedNamespace(env, n, fanout);
  const createSeconds = (performance.now() - t) / 1000;
  log(`  created ${n} leaked dependents and the user's tree in ${createSeconds.toFixed(1)} s`);
  const from = await collectionVersion(env.client, ns);
  let leakedDeleted = 0;
  let userDeleted = 0;
  let leakedDoneAt: number | undefined;
  let userDoneAt: number | undefined;
  const watch = watchUntil(env.client, ns, from, (ev) => {
    if (ev.type === 'DELETED' && ev.name.startsWith('leak-') && ++leakedDeleted === n)
      leakedDoneAt = performance.now();
    if (ev.type === 'DELETED' && ev.name.startsWith('user-dep-'))
      if (++userDeleted === USER_DEPENDENTS) userDoneAt = performance.now();
    return leakedDoneAt !== undefined && userDoneAt !== undefined;
  });
  const before = await meterNow(env);
  const gc = await start(env.cluster, CONTENDERS[key], env.extras);
  // Long enough for kcm at 40 QPS and three requests per leaked dependent, with room.
  const deadlineMs = Math.max(900_000, n * 250);
  try {
    await delay(Math.max(0, gc.startedAt + userDelayS * 1000 - performance.now()));
    const userDeleteAt = performance.now();
    await deleteConfigMap(env.client, ns, 'user-owner', 'Background');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `not done within ${deadlineMs / 1000} s: ${leakedDeleted}/${n} leaked, ${userDeleted}/${USER_DEPENDENTS} of the user's dependents deleted`,
            ),
          ),
        deadlineMs,
      );
    });
    await Promise.race([watch.finished, timeout]).finally(() => clearTimeout(timer));
    const after = await meterNow(env);
    const syncSeconds = await gc.synced.catch(() => null);
    return {
      createSeconds: round2(createSeconds),
      syncSeconds: syncSeconds === null ? null : round2(syncSeconds),
      userCascadeSeconds: round2(((userDoneAt ?? 0) - userDeleteAt) / 1000),
      leakedCollectedSeconds: round2(((leakedDoneAt ?? 0) - gc.startedAt) / 1000),
      gcCpuSeconds: round2(await cpuSeconds(gc.pid)),
      apiserverCpuSeconds: round2(after.cpu.apiserver - before.cpu.apiserver),
      etcdCpuSeconds: round2(after.cpu.etcd - before.cpu.etcd),
      requests: requestsSince(before.requests, after.requests),
      ...(await kubegcCounts(gc)),
    };
  } finally {
    watch.stop();
    await gc.stop();
    await removeNamespace(env, ns);
  }
}

const HEALTHY_NAMESPACE = 'restart-healthy';

/** The healthy cluster: m/2 owners alive, m/2 dependents, each dependent listed before its owner. */
async function healthyObjects(env: Env, m: number): Promise<void> {
  await createNamespace(env.client, HEALTHY_NAMESPACE);
  const owners = Array.from({ length: m / 2 }, (_, i) => ({ name: `b-owner-${pad(i)}` }));
  const uids = await createConfigMaps(env.client, HEALTHY_NAMESPACE, owners);
  await createConfigMaps(
    env.client,
    HEALTHY_NAMESPACE,
    owners.map((o, i): ObjectSpec => ({
      name: `a-dep-${pad(i)}`,
      owner: { name: o.name, uid: uids[i] ?? '', blockOwnerDeletion: false },
    })),
  );
}

/** Owner reads so far: GETs and LISTs of ConfigMaps (the GC's reads; the benchmark sends none meanwhile). */
const reads = (r: Record<string, number>): number => (r.GET ?? 0) + (r.LIST ?? 0);

/** One healthy repetition: the GC started cold, counted once it has synced and its reads have stopped. */
async function healthyRep(env: Env, key: Contender): Promise<RestartRecord['values']> {
  const before = await meterNow(env);
  const gc = await start(env.cluster, CONTENDERS[key], env.extras);
  try {
    const syncSeconds = await gc.synced;
    // Settled: no new read for 5 s (at most 120 s after the sync).
    let last = reads(await configMapRequests(env));
    for (let quiet = 0, waited = 0; quiet < 5 && waited < 120; waited++) {
      await delay(1000);
      const now = reads(await configMapRequests(env));
      quiet = now === last ? quiet + 1 : 0;
      last = now;
    }
    const after = await meterNow(env);
    const requests = requestsSince(before.requests, after.requests);
    if (requests.DELETE)
      throw new Error(`${requests.DELETE} DELETEs in a cluster where every owner exists`);
    return {
      syncSeconds: round2(syncSeconds),
      ownerReads: reads(requests),
      gcCpuSeconds: round2(await cpuSeconds(gc.pid)),
      requests,
      ...(await kubegcCounts(gc)),
    };
  } finally {
    await gc.stop();
  }
}

class Recorder {
  readonly records: RestartRecord[] = [];
  private readonly plan: Plan;
  private readonly rawFile: string;
  constructor(plan: Plan, rawFile: string) {
    this.plan = plan;
    this.rawFile = rawFile;
  }

  async run(
    scenario: Scenario,
    contender: Contender,
    round: number,
    position: number,
    params: { n: number; fanout: number },
    fn: () => Promise<RestartRecord['values']>,
  ): Promise<void> {
    const label = contenderLabel(contender, this.plan.extras);
    log(`${scenario} ${JSON.stringify(params)}: ${label}, round ${round}/${this.plan.rounds}`);
    const base = { scenario, contender, label, round, position, params };
    try {
      const values = await fn();
      this.records.push({ ...base, ok: true, values });
      log(`  ${JSON.stringify(values)}`);
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      this.records.push({ ...base, ok: false, error, values: {} });
      log(`  FAILED: ${error}`);
    }
    await fs.writeFile(this.rawFile, `${JSON.stringify(this.records)}\n`);
  }
}

async function measure(env: Env, plan: Plan, rec: Recorder): Promise<void> {
  const random = rng(plan.seed);
  if (plan.only.has('restart'))
    for (const n of plan.ns)
      for (const fanout of plan.fanouts)
        for (let round = 1; round <= plan.rounds; round++)
          for (const [i, key] of shuffled(plan.contenders, random).entries())
            await rec.run('restart', key, round, i + 1, { n, fanout }, () =>
              restartRep(env, key, n, fanout, plan.userDelayS),
            );
  if (plan.only.has('healthy')) {
    log(`healthy: creating ${plan.healthy} ConfigMaps (half owned by the other half)`);
    const t = performance.now();
    await healthyObjects(env, plan.healthy);
    log(`healthy: created in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    for (let round = 1; round <= plan.rounds; round++)
      for (const [i, key] of shuffled(plan.contenders, random).entries())
        await rec.run('healthy', key, round, i + 1, { n: plan.healthy, fanout: 1 }, () =>
          healthyRep(env, key),
        );
  }
}

// ---------------------------------------------------------------------------
// Summary and report

type Figure = 'userCascadeSeconds' | 'leakedCollectedSeconds';

function valuesOf(rs: RestartRecord[], figure: string): (number | null)[] {
  return rs.map((r) => {
    const v = r.values[figure];
    return r.ok && typeof v === 'number' ? v : null;
  });
}

const fmt = (s: Summary, digits = 1): string =>
  s.median === null
    ? '–'
    : `${s.median.toFixed(digits)} (${(s.min ?? 0).toFixed(digits)}–${(s.max ?? 0).toFixed(digits)})`;
const num = (xs: (number | null)[]): number[] => xs.filter((x): x is number => x !== null);

/** Per round: this contender's figure ÷ kcm's in the same round. */
function ratioToKcm(rs: RestartRecord[], all: RestartRecord[], figure: Figure): string {
  const kcm = all.filter((r) => r.contender === 'kcm_default');
  if (!kcm.length || rs[0]?.contender === 'kcm_default') return '';
  const byRound = (xs: RestartRecord[]): (number | null)[] => {
    const out: (number | null)[] = [];
    for (const r of xs) out[r.round - 1] = valuesOf([r], figure)[0] ?? null;
    return out;
  };
  const ratios = summarize(pairedRatios(byRound(rs), byRound(kcm)));
  return ratios.median === null
    ? '–'
    : `${ratios.median.toFixed(2)}× (${(ratios.min ?? 0).toFixed(2)}–${(ratios.max ?? 0).toFixed(2)})`;
}

function requestsText(rs: RestartRecord[]): string {
  const first = rs.find((r) => r.ok)?.values.requests;
  if (!first || typeof first !== 'object') return '–';
  if (Object.keys(first).length === 0) return 'none';
  return Object.entries(first)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([verb, count]) => `${count} ${verb}`)
    .join(', ');
}

function medianOf(rs: RestartRecord[], figure: string): number | null {
  return summarize(num(valuesOf(rs, figure))).median;
}

/** The repetitions of each size, fan-out and contender: sizes in order, kcm first. */
function groups(records: RestartRecord[], scenario: Scenario): RestartRecord[][] {
  const out = new Map<string, RestartRecord[]>();
  const rank = (r: RestartRecord): number => RESTART_CONTENDERS.indexOf(r.contender);
  const sorted = records
    .filter((x) => x.scenario === scenario)
    .sort(
      (a, b) => a.params.n - b.params.n || a.params.fanout - b.params.fanout || rank(a) - rank(b),
    );
  for (const r of sorted) {
    const k = `${r.params.n}/${r.params.fanout}/${r.contender}`;
    out.set(k, [...(out.get(k) ?? []), r]);
  }
  return [...out.values()];
}

export function renderTables(records: RestartRecord[]): string {
  const parts: string[] = [];
  const restart = groups(records, 'restart');
  if (restart.length) {
    const rows = restart.map((rs) => {
      const r0 = rs[0] as RestartRecord;
      const same = records.filter(
        (r) =>
          r.scenario === 'restart' &&
          r.params.n === r0.params.n &&
          r.params.fanout === r0.params.fanout,
      );
      const failed = rs.filter((r) => !r.ok).length;
      return [
        r0.label,
        r0.params.n.toLocaleString('en-US'),
        String(r0.params.fanout),
        `${rs.length}${failed ? ` (${failed} failed)` : ''}`,
        fmt(summarize(num(valuesOf(rs, 'syncSeconds'))), 2),
        fmt(summarize(num(valuesOf(rs, 'userCascadeSeconds')))),
        ratioToKcm(rs, same, 'userCascadeSeconds'),
        fmt(summarize(num(valuesOf(rs, 'leakedCollectedSeconds')))),
        ratioToKcm(rs, same, 'leakedCollectedSeconds'),
        String(medianOf(rs, 'attemptToDeleteAdds') ?? '–'),
        requestsText(rs),
      ];
    });
    parts.push(
      '### Restart: leaked dependents, and a user deletes an owner with 100 dependents 3 s after the GC starts (median (min–max))',
      '',
      table(
        [
          'contender',
          'leaked N',
          'per owner',
          'reps',
          's to synced',
          "user's cascade s",
          '÷ kcm',
          'leaked collected s (from spawn)',
          '÷ kcm',
          'attempt-to-delete adds',
          'ConfigMap requests (first repetition)',
        ],
        rows,
      ),
    );
  }
  const healthy = groups(records, 'healthy');
  if (healthy.length) {
    const rows = healthy.map((rs) => {
      const r0 = rs[0] as RestartRecord;
      const failed = rs.filter((r) => !r.ok).length;
      return [
        r0.label,
        r0.params.n.toLocaleString('en-US'),
        `${rs.length}${failed ? ` (${failed} failed)` : ''}`,
        fmt(summarize(num(valuesOf(rs, 'syncSeconds'))), 2),
        String(medianOf(rs, 'ownerReads') ?? '–'),
        String(medianOf(rs, 'attemptToDeleteAdds') ?? 'not exposed'),
        requestsText(rs),
      ];
    });
    parts.push(
      '',
      '### Healthy restart: every owner alive (median)',
      '',
      table(
        [
          'contender',
          'objects',
          'reps',
          's to synced',
          'owner reads (GET + LIST of ConfigMaps)',
          'attempt-to-delete adds',
          'ConfigMap requests (first repetition)',
        ],
        rows,
      ),
    );
  }
  const failures = records.filter((r) => !r.ok);
  if (failures.length)
    parts.push(
      '',
      '### Failed repetitions',
      '',
      ...failures.map(
        (r) =>
          `- ${r.scenario} N=${r.params.n}/${r.params.fanout}, ${r.label}, round ${r.round}: ${r.error}`,
      ),
    );
  return parts.join('\n');
}

/** The issue's targets, judged on kubegc at kcm's budget against kcm at its defaults. */
export function targets(records: RestartRecord[]): string[][] {
  const rows: string[][] = [];
  const restart = records.filter((r) => r.scenario === 'restart');
  const keys = [...new Set(restart.map((r) => `${r.params.n}/${r.params.fanout}`))];
  for (const k of keys) {
    const [n, fanout] = k.split('/').map(Number);
    const same = restart.filter((r) => r.params.n === n && r.params.fanout === fanout);
    const budget = same.filter((r) => r.contender === 'kubegc_kcm_budget');
    if (!budget.length) continue;
    const user = medianOf(budget, 'userCascadeSeconds');
    rows.push([
      `user's cascade at kcm's budget, N=${n}, ${fanout} per owner`,
      user === null ? '–' : `${user.toFixed(1)} s`,
      '≤ 5 s',
      user !== null && user <= 5 ? 'yes' : '**no**',
    ]);
    const ratio = ratioToKcm(budget, same, 'leakedCollectedSeconds');
    const m = /^([\d.]+)×/.exec(ratio)?.[1];
    rows.push([
      `leaked collected at kcm's budget ÷ kcm, N=${n}, ${fanout} per owner`,
      ratio || 'kcm not measured',
      '≤ 0.25×',
      m !== undefined && Number(m) <= 0.25 ? 'yes' : '**no**',
    ]);
  }
  for (const rs of groups(records, 'healthy').filter((g) => g[0]?.contender !== 'kcm_default')) {
    const r0 = rs[0] as RestartRecord;
    const readsMedian = medianOf(rs, 'ownerReads');
    const adds = medianOf(rs, 'attemptToDeleteAdds');
    rows.push([
      `healthy restart at ${r0.params.n.toLocaleString('en-US')}, ${r0.label}: owner reads / verification items queued`,
      `${readsMedian ?? '–'} / ${adds ?? '–'}`,
      '0 / 0',
      readsMedian === 0 && adds === 0 ? 'yes' : '**no**',
    ]);
  }
  return rows;
}

export function render(raw: Raw, rawFile: string): string {
  const t = targets(raw.records);
  return [
    '## A GC started on a backlog (bench/restart.ts)',
    '',
    `\`${raw.command}\`, ${raw.started.slice(0, 16).replace('T', ' ')} UTC, ${raw.minutes} minutes, seed ${raw.plan.seed}.`,
    raw.notFullBecause.length ? `Not a full run: ${raw.notFullBecause.join(', ')}.` : '',
    `Every repetition is in \`${rawFile}\`.`,
    '',
    renderTables(raw.records),
    '',
    ...(t.length
      ? ['### Targets (issue 34)', '', table(['', 'measured', 'goal', 'met'], t), '']
      : []),
    '### Notes',
    '',
    "- Leaked dependents: ConfigMaps created owned, then each owner deleted with propagationPolicy Background while no GC ran (so only the owner went). The user's tree: one owner ConfigMap and 100 dependents, in the same namespace, deleted with Background `--user-delay` seconds after the GC's spawn. Each repetition has a fresh namespace, emptied before the next GC starts.",
    "- user's cascade: from the user's DELETE to a watch's 100th DELETED of its dependents. Leaked collected: from the GC's spawn to the watch's last DELETED of a leaked dependent. s to synced: kubegc's `garbage collector started`, kcm's `all resource monitors have synced`.",
    "- ConfigMap requests: the API server's own `apiserver_request_total` for ConfigMaps over the repetition (the benchmark adds one DELETE, the user's; `GET 404` is a read of an owner that is gone). attempt-to-delete adds: kubegc's `workqueue_adds_total` for its attempt-to-delete queue (every lane); kcm serves no metrics here.",
    '- kcm GC (defaults) gets 40 QPS, burst 30 (kcm doubles `--kube-api-qps` for its GC client); `kubegc_kcm_budget` runs kubegc at that budget.',
    '- Healthy restart: dependents are named to list before their owners, so each owner is first met as a reference (a virtual owner); counted once the GC has synced and 5 s have passed without a new read.',
    '',
    machineTable(raw.machine),
  ]
    .filter((l, i, a) => l !== '' || a[i - 1] !== '')
    .join('\n');
}

interface Raw {
  command: string;
  started: string;
  minutes: number;
  notFullBecause: string[];
  plan: Omit<Plan, 'only'> & { only: Scenario[] };
  machine: Machine;
  records: RestartRecord[];
}

async function withCluster(plan: Plan, fn: (env: Env) => Promise<void>): Promise<Cluster> {
  const dir = path.join(REPO_ROOT, '.cluster-bench-restart');
  await down(dir);
  log('starting the benchmark control plane in .cluster-bench-restart/');
  const cluster = await up({ dir, log: (l) => log(`cluster: ${l}`) });
  if (cluster.builtinGc) throw new Error('the benchmark cluster runs kcm with its GC');
  const client: KubeClient = await benchClient(cluster.kubeconfig);
  try {
    await fn({ cluster, client, log, extras: plan.extras });
  } finally {
    client.close();
    if (plan.keepCluster) log(`keeping the control plane in ${dir}`);
    else await down(dir);
  }
  return cluster;
}

/** Writes the report of a recorded run (its raw file) again: restart-latest.md and, with --results, its section. */
async function renderAgain(file: string, results: boolean): Promise<void> {
  const raw = JSON.parse(await fs.readFile(file, 'utf8')) as Raw;
  const section = render(raw, path.relative(REPO_ROOT, path.resolve(file)));
  await fs.writeFile(path.join(RESULTS_DIR(REPO_ROOT), 'restart-latest.md'), `${section}\n`);
  console.log(section);
  if (results)
    await writeResultsSection(path.join(REPO_ROOT, 'bench', 'RESULTS.md'), 'restart', section);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const again = argv.indexOf('--render');
  if (again !== -1) {
    await renderAgain(argv[again + 1] ?? '', argv.includes('--results'));
    return;
  }
  const plan = parsePlan(argv);
  const why = notFullBecause(plan);
  log(`seed ${plan.seed}; ${why.length ? `not a full run (${why.join(', ')})` : 'a full run'}`);
  if (plan.build) execFileSync('npm', ['run', 'build'], { cwd: REPO_ROOT, stdio: 'inherit' });
  const started = new Date();
  const dir = RESULTS_DIR(REPO_ROOT);
  await fs.mkdir(dir, { recursive: true });
  const rec = new Recorder(plan, path.join(dir, 'restart-latest.raw.json'));
  const loadAverageAtStart = os.loadavg().map(round2);
  const cluster = await withCluster(plan, (env) => measure(env, plan, rec));
  const raw: Raw = {
    command: `npm run bench:restart${argv.length ? ` -- ${argv.join(' ')}` : ''}`,
    started: started.toISOString(),
    minutes: round2((performance.now() - runStart) / 60_000),
    notFullBecause: why,
    plan: { ...plan, only: [...plan.only] },
    machine: {
      ...machine(cluster.version, path.join(cluster.binDir, 'kube-controller-manager')),
      loadAverageAtStart,
      loadAverageAtEnd: os.loadavg().map(round2),
    },
    records: rec.records,
  };
  const stamp = started.toISOString().slice(0, 16).replace(':', '');
  // Kept (committed) only with the section of RESULTS.md that quotes it.
  const record = why.length === 0 || plan.results;
  const rawName = record ? `restart-${stamp}.json` : 'restart-latest.json';
  await fs.writeFile(path.join(dir, rawName), `${JSON.stringify(raw, null, 1)}\n`);
  const section = render(raw, `bench/results/${rawName}`);
  await fs.writeFile(path.join(dir, 'restart-latest.md'), `${section}\n`);
  console.log(section);
  if (record) {
    await writeResultsSection(path.join(REPO_ROOT, 'bench', 'RESULTS.md'), 'restart', section);
    log(`wrote bench/results/${rawName} and the restart section of bench/RESULTS.md`);
  } else log(`wrote bench/results/${rawName} and restart-latest.md (bench/RESULTS.md unchanged)`);
}

if (import.meta.main) await main();
