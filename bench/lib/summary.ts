// From the raw repetitions of one run to its summary (bench/results/*.json),
// its targets and its markdown tables. Pure functions over the records, so
// every figure in RESULTS.md can be recomputed from the committed raw file.
import type { GraphResult } from '../graph.ts';
import { table } from './report.ts';
import {
  leastSquaresSlope,
  median,
  pairedRatios,
  round2,
  summarize,
  type Summary,
} from './stats.ts';

/** One repetition of one contender in one scenario, as it ran. */
export interface RepRecord {
  scenario: string;
  contender: string;
  /** The command line actually run (contenderLabel). */
  label: string;
  /** 1-based repetition (round) number. */
  rep: number;
  /** Position in its round's shuffled order (1 = ran first). */
  position: number;
  ok: boolean;
  error?: string;
  /** Scenario parameters (objects, payload...). */
  params: Record<string, string | number>;
  /** Scenario figures (seconds, CPU, requests, RSS...). */
  values: Record<string, unknown>;
}

/** Scenarios, with what each table says about itself. */
export const CASCADE_SCENARIOS = {
  cascade: 'Background delete of 1 owner with N dependent ConfigMaps (graph-copy path)',
  foreground: 'Foreground delete: owner → middle objects → leaves, every reference blocking',
  live_second_owner:
    'Live path: 1 owner deleted, N dependents each keeping a second, live owner (kcm: GET + GET + PATCH each)',
  live_churn:
    'Live path: N dependents deleted while 10 clients keep patching them (the copy goes stale before the DELETE)',
} as const;

export interface ContenderSummary {
  label: string;
  ok: number;
  failed: number;
  errors: string[];
  seconds: Summary;
  /** Medians of the window's cost. */
  cpu: { gc: number; apiserver: number; etcd: number } | null;
  requests: Record<string, number>;
}

export interface MemoryContender {
  label: string;
  /** Per size, in the order of `objects`. */
  rss_mb: Summary[];
  listed_s: Summary[];
  sync_s: Summary[];
  heap_mb: Summary[];
  /** MB read from spawn to sync (the initial lists on the wire; older runs: empty). */
  read_mb: Summary[];
  /** CPU seconds from spawn to sync (older runs: empty). */
  sync_cpu_s: Summary[];
  failed: number[];
  /** Least-squares slope of median RSS over the sizes measured (not the baseline). */
  bytes_per_object: number | null;
}

export interface Summarized {
  cascades: Record<string, { n: number; contenders: Record<string, ContenderSummary> }>;
  memory: Record<string, { objects: number[]; contenders: Record<string, MemoryContender> }>;
  graph: Record<string, Summary> & { objects?: number };
}

const secondsOf = (r: RepRecord): number | null =>
  r.ok && typeof r.values.seconds === 'number' ? r.values.seconds : null;

/** Values of the contender's repetitions, indexed by round (null where it failed). */
export function byRound(
  records: readonly RepRecord[],
  scenario: string,
  contender: string,
  value: (r: RepRecord) => number | null,
  match: (r: RepRecord) => boolean = () => true,
): (number | null)[] {
  const out: (number | null)[] = [];
  for (const r of records)
    if (r.scenario === scenario && r.contender === contender && match(r)) out[r.rep - 1] = value(r);
  return Array.from(out, (x) => x ?? null);
}

function cascadeSummary(records: RepRecord[]): ContenderSummary {
  const ok = records.filter((r) => r.ok);
  const m = (xs: number[]): number => round2(median(xs) ?? 0);
  const cpus = ok.map((r) => r.values.cpu as { gc: number; apiserver: number; etcd: number });
  const reqs = ok.map((r) => r.values.requests as Record<string, number>);
  const verbs = new Set(reqs.flatMap((q) => Object.keys(q)));
  return {
    label: records[0]?.label ?? '',
    ok: ok.length,
    failed: records.length - ok.length,
    errors: records.filter((r) => !r.ok).map((r) => `rep ${r.rep}: ${r.error ?? 'failed'}`),
    seconds: summarize(ok.map((r) => r.values.seconds as number)),
    cpu: cpus.length
      ? {
          gc: m(cpus.map((c) => c.gc)),
          apiserver: m(cpus.map((c) => c.apiserver)),
          etcd: m(cpus.map((c) => c.etcd)),
        }
      : null,
    requests: Object.fromEntries([...verbs].map((v) => [v, m(reqs.map((q) => q[v] ?? 0))])),
  };
}

const MB = 2 ** 20;

export function summarizeRecords(records: readonly RepRecord[]): Summarized {
  const cascades: Summarized['cascades'] = {};
  for (const scenario of Object.keys(CASCADE_SCENARIOS)) {
    const rs = records.filter((r) => r.scenario === scenario);
    if (!rs.length) continue;
    const contenders = [...new Set(rs.map((r) => r.contender))];
    cascades[scenario] = {
      n: Number(rs[0]?.params.n ?? 0),
      contenders: Object.fromEntries(
        contenders.map((c) => [c, cascadeSummary(rs.filter((r) => r.contender === c))]),
      ),
    };
  }
  const memory: Summarized['memory'] = {};
  for (const r of records.filter((x) => x.scenario === 'memory')) {
    const payload = String(r.params.payload);
    const p = (memory[payload] ??= { objects: [], contenders: {} });
    const objects = Number(r.params.objects);
    if (!p.objects.includes(objects)) p.objects.push(objects);
  }
  for (const [payload, p] of Object.entries(memory)) {
    p.objects.sort((a, b) => a - b);
    const rs = records.filter((r) => r.scenario === 'memory' && r.params.payload === payload);
    for (const c of new Set(rs.map((r) => r.contender))) {
      const mine = rs.filter((r) => r.contender === c);
      const at = (o: number): RepRecord[] => mine.filter((r) => r.params.objects === o && r.ok);
      const num = (r: RepRecord, k: string): number | null =>
        typeof r.values[k] === 'number' ? r.values[k] : null;
      const sum = (o: number, k: string, scale = 1): Summary =>
        summarize(
          at(o)
            .map((r) => num(r, k))
            .filter((x): x is number => x !== null)
            .map((x) => round2(x / scale)),
        );
      const rss = p.objects.map((o) => sum(o, 'rssBytes', MB));
      const sized = p.objects
        .map((o, i) => ({ x: o, y: (rss[i]?.median ?? NaN) * MB }))
        .filter((pt) => pt.x > 0 && Number.isFinite(pt.y));
      const slope = leastSquaresSlope(sized);
      p.contenders[c] = {
        label: mine[0]?.label ?? '',
        rss_mb: rss,
        listed_s: p.objects.map((o) => sum(o, 'listedSeconds')),
        sync_s: p.objects.map((o) => sum(o, 'syncSeconds')),
        heap_mb: p.objects.map((o) => sum(o, 'heapUsedBytes', MB)),
        read_mb: p.objects.map((o) => sum(o, 'readBytes', MB)),
        sync_cpu_s: p.objects.map((o) => sum(o, 'syncCpuSeconds')),
        failed: p.objects.map((o) => mine.filter((r) => r.params.objects === o && !r.ok).length),
        bytes_per_object: slope === null ? null : Math.round(slope),
      };
    }
  }
  const graphRuns = records.filter((r) => r.scenario === 'graph' && r.ok);
  const graph: Summarized['graph'] = {};
  if (graphRuns.length) {
    const first = graphRuns[0]?.values as unknown as GraphResult;
    graph.objects = first.objects;
    for (const k of Object.keys(first) as (keyof GraphResult)[]) {
      if (k === 'objects' || typeof first[k] !== 'number') continue;
      graph[k] = summarize(graphRuns.map((r) => (r.values as unknown as GraphResult)[k]));
    }
  }
  return { cascades, memory, graph };
}

// ---------------------------------------------------------------------------
// Targets (issue 22, and issue 13's where issue 22 set none): each a ratio in one run, the median of the per-round
// ratios, with their range.

export interface Target {
  what: string;
  /** Median, and the range over rounds where that applies. */
  value: string;
  goal: string;
  met: boolean | null;
}

const x2 = (v: number): string => `${v.toFixed(2)}×`;
const pct = (v: number): string => `${(v * 100).toFixed(0)}%`;

function ratioTarget(
  what: string,
  ratios: number[],
  goal: string,
  ok: ((v: number) => boolean) | null,
  show: (v: number) => string = x2,
): Target {
  const m = median(ratios);
  if (m === null) return { what, value: 'n/a', goal, met: null };
  const range =
    ratios.length > 1 ? ` (${show(Math.min(...ratios))}–${show(Math.max(...ratios))})` : '';
  return { what, value: `${show(m)}${range}`, goal, met: ok ? ok(m) : null };
}

export function targets(records: readonly RepRecord[], s: Summarized): Target[] {
  const secs = (scenario: string, c: string): (number | null)[] =>
    byRound(records, scenario, c, secondsOf);
  // "kcm's time ÷ kubegc's time" per round: > 1 means kubegc was faster.
  const speedup = (scenario: string, other: string, mine = 'kubegc'): number[] =>
    pairedRatios(secs(scenario, other), secs(scenario, mine));
  const out: Target[] = [
    ratioTarget(
      'cascade (graph-copy path): kcm at equal settings ÷ kubegc',
      speedup('cascade', 'kcm_equal'),
      '≥ 1.6×',
      (v) => v >= 1.6,
    ),
    ratioTarget(
      'cascade (graph-copy path): kubegc throughput ÷ ceiling throughput',
      speedup('cascade', 'ceiling').map((v) => v),
      '≥ 90%',
      (v) => v >= 0.9,
      pct,
    ),
    ratioTarget(
      'live path, second live owner: kcm at equal settings ÷ kubegc',
      speedup('live_second_owner', 'kcm_equal'),
      '≥ 1×',
      (v) => v >= 1,
    ),
    ratioTarget(
      'live path, dependents changing: kcm at equal settings ÷ kubegc',
      speedup('live_churn', 'kcm_equal'),
      '≥ 1.2×',
      (v) => v >= 1.2,
    ),
  ];
  for (const [payload, p] of Object.entries(s.memory)) {
    const mem = (c: string, k: string, o: number): (number | null)[] =>
      byRound(
        records,
        'memory',
        c,
        (r) => (r.ok && typeof r.values[k] === 'number' ? r.values[k] : null),
        (r) => r.params.payload === payload && r.params.objects === o,
      );
    for (const o of p.objects) {
      if (o === 0) continue;
      const at = `${o.toLocaleString('en-US')} ${payload}`;
      if (o >= 50_000) {
        out.push(
          ratioTarget(
            `start-up at ${at}: kubegc "informers listed" ÷ kcm synced`,
            pairedRatios(mem('kubegc', 'listedSeconds', o), mem('kcm_default', 'syncSeconds', o)),
            '≤ 0.7×',
            (v) => v <= 0.7,
          ),
          ratioTarget(
            `start-up at ${at}: kubegc "garbage collector started" ÷ kcm synced`,
            pairedRatios(mem('kubegc', 'syncSeconds', o), mem('kcm_default', 'syncSeconds', o)),
            '≤ 1×',
            (v) => v <= 1,
          ),
        );
      }
      out.push(
        ratioTarget(
          `RSS at ${at}: kubegc ÷ kcm`,
          pairedRatios(mem('kubegc', 'rssBytes', o), mem('kcm_default', 'rssBytes', o)),
          o <= 10_000 ? '≤ 0.9×' : '≤ 1×',
          (v) => v <= (o <= 10_000 ? 0.9 : 1),
        ),
      );
    }
    const k = p.contenders.kubegc?.bytes_per_object ?? null;
    const c = p.contenders.kcm_default?.bytes_per_object ?? null;
    out.push(
      ratioTarget(
        `marginal bytes per object, ${payload}: kubegc ÷ kcm (${k ?? 'n/a'} ÷ ${c ?? 'n/a'} B)`,
        k !== null && c ? [k / c] : [],
        '≤ 40%',
        (v) => v <= 0.4,
        pct,
      ),
    );
  }
  const g = s.graph;
  const at =
    g.objects === undefined || g.objects === 1_000_000
      ? ''
      : ` (at ${g.objects.toLocaleString('en-US')}, not 1,000,000)`;
  const gv = (
    k: string,
    show: (v: number) => string,
    goal: string,
    ok: (v: number) => boolean,
    what: string,
  ): Target => {
    const sm = g[k] as Summary | undefined;
    if (!sm || sm.median === null) return { what, value: 'n/a', goal, met: null };
    const range = sm.n > 1 ? ` (${show(sm.min ?? 0)}–${show(sm.max ?? 0)})` : '';
    return { what, value: `${show(sm.median)}${range}`, goal, met: ok(sm.median) };
  };
  const int = (v: number): string => Math.round(v).toLocaleString('en-US');
  out.push(
    gv(
      'heap_bytes_per_object',
      (v) => `${int(v)} B`,
      '≤ 600 B',
      (v) => v <= 600,
      `graph: heap bytes per object${at}`,
    ),
    gv(
      'events_per_s',
      int,
      '≥ 400,000',
      (v) => v >= 400_000,
      `graph: events applied per second${at}`,
    ),
    gv(
      'fanout_enqueue_ms',
      (v) => `${int(v)} ms`,
      '< 1,000 ms',
      (v) => v < 1000,
      'graph: owner with 100,000 dependents fully queued',
    ),
  );
  return out;
}

/**
 * Bytes read to sync above the near-empty baseline (the initial lists on the
 * wire), at each payload's largest size: kubegc against kcm. The baseline is
 * the contender's near-empty row, of whichever payload has one.
 */
export function wireComparisons(s: Summarized): Target[] {
  const readAt = (payload: string, c: string, o: number): number | null => {
    const p = s.memory[payload];
    const i = p?.objects.indexOf(o) ?? -1;
    return i < 0 ? null : (p?.contenders[c]?.read_mb[i]?.median ?? null);
  };
  const baseline = (c: string): number | null => {
    for (const payload of Object.keys(s.memory)) {
      const b = readAt(payload, c, 0);
      if (b !== null) return b;
    }
    return null;
  };
  const out: Target[] = [];
  for (const [payload, p] of Object.entries(s.memory)) {
    const top = Math.max(...p.objects);
    if (top <= 0) continue;
    const wire = (c: string): number | null => {
      const hi = readAt(payload, c, top);
      const lo = baseline(c);
      return hi === null || lo === null ? null : (hi - lo) * MB;
    };
    const [wk, wc] = [wire('kubegc'), wire('kcm_default')];
    if (wk === null && wc === null) continue;
    const per = (b: number | null): string =>
      b === null ? 'n/a' : `${Math.round(b / top).toLocaleString('en-US')} B/object`;
    out.push({
      what: `bytes read to sync at ${top.toLocaleString('en-US')} ${payload}, above near-empty: kubegc ÷ kcm (${per(wk)} ÷ ${per(wc)})`,
      value: wk !== null && wc ? pct(wk / wc) : 'n/a',
      goal: '—',
      met: null,
    });
  }
  return out;
}

/** Comparisons with no goal of their own: they separate "by design" from "by default". */
export function comparisons(records: readonly RepRecord[]): Target[] {
  const secs = (scenario: string, c: string): (number | null)[] =>
    byRound(records, scenario, c, secondsOf);
  const info = (what: string, a: (number | null)[], b: (number | null)[]): Target =>
    ratioTarget(what, pairedRatios(a, b), '—', null);
  return [
    info(
      'cascade: kcm defaults ÷ kubegc defaults ("faster by default")',
      secs('cascade', 'kcm_default'),
      secs('cascade', 'kubegc'),
    ),
    info(
      "cascade: kcm defaults ÷ kubegc at kcm's client budget ('faster by design', same QPS/burst/workers)",
      secs('cascade', 'kcm_default'),
      secs('cascade', 'kubegc_kcm_budget'),
    ),
    info(
      'cascade: kubegc without ÷ with its runtime flags (A/B; > 1× means the flags make it faster)',
      secs('cascade', 'kubegc_no_runtime_flags'),
      secs('cascade', 'kubegc'),
    ),
  ];
}

// ---------------------------------------------------------------------------
// Rendering

const f = (x: number | null | undefined, digits = 2): string =>
  x === null || x === undefined ? 'n/a' : x.toFixed(digits);
const span = (sm: Summary | undefined, digits = 2): string =>
  !sm || sm.min === null ? '' : `${f(sm.min, digits)}–${f(sm.max, digits)}`;
const repsCell = (ok: number, failed: number): string =>
  failed ? `${ok} (**${failed} failed**)` : String(ok);

function cpuCell(c: ContenderSummary): string {
  return c.cpu
    ? `${c.cpu.gc.toFixed(1)} / ${c.cpu.apiserver.toFixed(1)} / ${c.cpu.etcd.toFixed(1)}`
    : '';
}

function requestCell(c: ContenderSummary): string {
  return Object.entries(c.requests)
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([v, n]) => `${Math.round(n)} ${v}`)
    .join(', ');
}

export function renderTables(
  records: readonly RepRecord[],
  s: Summarized,
  payloadText: Record<string, string>,
): string {
  const parts: string[] = [];
  for (const [scenario, c] of Object.entries(s.cascades)) {
    const what = CASCADE_SCENARIOS[scenario as keyof typeof CASCADE_SCENARIOS];
    parts.push(
      `### ${what} (N = ${c.n.toLocaleString('en-US')}; per contender: median, min–max)`,
      table(
        [
          'contender',
          'reps',
          'seconds',
          'min–max',
          'objects/s',
          'kcm equal ÷ it (per round: median, range)',
          'CPU s: GC / apiserver / etcd',
          'ConfigMap requests (median)',
        ],
        Object.entries(c.contenders).map(([key, cs]) => {
          const r = pairedRatios(
            byRound(records, scenario, 'kcm_equal', secondsOf),
            byRound(records, scenario, key, secondsOf),
          );
          const rm = median(r);
          return [
            cs.label,
            repsCell(cs.ok, cs.failed),
            f(cs.seconds.median),
            span(cs.seconds),
            cs.seconds.median ? Math.round(c.n / cs.seconds.median).toLocaleString('en-US') : '',
            rm === null ? '' : `${x2(rm)} (${x2(Math.min(...r))}–${x2(Math.max(...r))})`,
            cpuCell(cs),
            requestCell(cs),
          ];
        }),
      ),
      '',
    );
  }
  for (const [payload, p] of Object.entries(s.memory)) {
    const rows: string[][] = [];
    for (const [, mc] of Object.entries(p.contenders)) {
      p.objects.forEach((o, i) => {
        rows.push([
          mc.label,
          o === 0 ? '0 (near-empty)' : o.toLocaleString('en-US'),
          repsCell(mc.rss_mb[i]?.n ?? 0, mc.failed[i] ?? 0),
          `${f(mc.rss_mb[i]?.median, 1)} (${span(mc.rss_mb[i], 1)})`,
          mc.heap_mb[i]?.n ? f(mc.heap_mb[i]?.median, 1) : '',
          mc.listed_s[i]?.n ? `${f(mc.listed_s[i]?.median)} (${span(mc.listed_s[i])})` : '',
          `${f(mc.sync_s[i]?.median)} (${span(mc.sync_s[i])})`,
          mc.sync_cpu_s[i]?.n ? f(mc.sync_cpu_s[i]?.median) : '',
          mc.read_mb[i]?.n ? f(mc.read_mb[i]?.median, 1) : '',
        ]);
      });
      rows.push([
        mc.label,
        'marginal B/object (least squares)',
        '',
        mc.bytes_per_object === null ? 'n/a' : mc.bytes_per_object.toLocaleString('en-US'),
        '',
        '',
        '',
        '',
        '',
      ]);
    }
    parts.push(
      `### Memory and start-up: ${payloadText[payload] ?? payload}, half owned by the other half (median (min–max))`,
      table(
        [
          'contender',
          'objects',
          'reps',
          'RSS MB',
          'V8 heap used MB',
          's to "informers listed"',
          's to workers started / kcm synced',
          'CPU s to sync',
          'MB read to sync',
        ],
        rows,
      ),
      '',
    );
  }
  const g = s.graph;
  if (g.objects !== undefined) {
    const row = (what: string, k: string, digits = 0): string[] => {
      const sm = g[k] as Summary | undefined;
      return [what, sm ? String(sm.n) : '0', f(sm?.median, digits), span(sm, digits)];
    };
    parts.push(
      `### In-process graph, no API server (${g.objects.toLocaleString('en-US')} objects)`,
      table(
        ['measure', 'reps', 'median', 'min–max'],
        [
          row('events applied per second (adds + one update each)', 'events_per_s'),
          row('  adds per second', 'add_events_per_s'),
          row('  updates per second', 'update_events_per_s'),
          row('heap bytes per object (after forced GC)', 'heap_bytes_per_object'),
          row('owner with 100,000 dependents: delete event → all queued (ms)', 'fanout_enqueue_ms'),
        ],
      ),
      '',
    );
  }
  const tRows = (ts: Target[]): string[][] =>
    ts.map((t) => [
      t.what,
      t.value,
      t.goal,
      t.met === null ? (t.goal === '—' ? '' : 'n/a') : t.met ? 'yes' : '**no**',
    ]);
  const ts = targets(records, s);
  const met = ts.filter((t) => t.met === true).length;
  parts.push(
    `### Targets (${met} of ${ts.length} met)`,
    table(['target', 'measured: median (range over rounds)', 'goal', 'met'], tRows(ts)),
    '',
    '### Comparisons without a goal',
    table(
      ['comparison', 'measured: median (range over rounds)', 'goal', 'met'],
      tRows([...comparisons(records), ...wireComparisons(s)]),
    ),
  );
  const failed = records.filter((r) => !r.ok);
  if (failed.length)
    parts.push(
      '',
      `### Failed repetitions (${failed.length})`,
      ...failed.map(
        (r) =>
          `- ${r.scenario} ${JSON.stringify(r.params)} ${r.contender} rep ${r.rep}: ${r.error ?? 'failed'}`,
      ),
    );
  return parts.join('\n');
}
