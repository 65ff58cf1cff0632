// Results: the JSON the issue specifies (field names fixed so runs can be
// compared), the details behind each median, the machine, the printed table
// and the markdown that becomes bench/RESULTS.md after a full run.
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

/** Exactly the fields of issue 7; null where a measurement failed. */
export interface Results {
  quick: boolean;
  cascade: {
    n: number;
    kubegc_s: number | null;
    kcm_default_s: number | null;
    kcm_equal_s: number | null;
    ceiling_s: number | null;
  };
  foreground: { n: number; kubegc_s: number | null; kcm_equal_s: number | null };
  memory: {
    objects: number[];
    kubegc_rss_mb: (number | null)[];
    kcm_rss_mb: (number | null)[];
    kubegc_bytes_per_object: number | null;
    kcm_bytes_per_object: number | null;
  };
  graph: {
    objects: number;
    events_per_s: number | null;
    heap_bytes_per_object: number | null;
    fanout_enqueue_ms: number | null;
  };
  startup: { objects: number; kubegc_sync_s: number | null; kcm_sync_s: number | null };
}

export interface Machine {
  cores: number;
  cpu: string;
  memoryGiB: number;
  kernel: string;
  node: string;
  go: string;
  kubernetes: string;
  loadAverageAtStart?: number[];
  loadAverageAtEnd?: number[];
}

export function machine(kubernetes: string, kcmBinary: string): Machine {
  return {
    cores: os.cpus().length,
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    go: goVersionOf(kcmBinary),
    kubernetes,
  };
}

/** The Go release the control-plane binaries were built with (`go version FILE`). */
function goVersionOf(binary: string): string {
  try {
    const out = execFileSync('go', ['version', binary], { encoding: 'utf8' });
    return out.slice(out.lastIndexOf(':') + 1).trim();
  } catch {
    return 'unknown';
  }
}

export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? null) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

export const round2 = (x: number): number => Math.round(x * 100) / 100;
const MB = 2 ** 20;
export const toMb = (bytes: number | null): number | null =>
  bytes === null ? null : round2(bytes / MB);

/** Bytes per object between two (objects, RSS bytes) points. */
export function slope(objects: number[], rss: (number | null)[]): number | null {
  const [o1, o2] = objects;
  const [r1, r2] = rss;
  if (o1 === undefined || o2 === undefined || r1 == null || r2 == null || o2 === o1) return null;
  return Math.round(((r2 - r1) * MB) / (o2 - o1));
}

export interface Target {
  what: string;
  value: string;
  goal: string;
  met: boolean | null;
}

const ratio = (a: number | null, b: number | null): number | null =>
  a === null || b === null || b === 0 ? null : a / b;

export function targets(r: Results): Target[] {
  const c = r.cascade;
  const fmtX = (x: number | null): string => (x === null ? 'n/a' : `${x.toFixed(2)}×`);
  const vsDefault = ratio(c.kcm_default_s, c.kubegc_s);
  const vsEqual = ratio(c.kcm_equal_s, c.kubegc_s);
  const ofCeiling = ratio(c.ceiling_s, c.kubegc_s);
  const mem = ratio(r.memory.kubegc_bytes_per_object, r.memory.kcm_bytes_per_object);
  const g = r.graph;
  const at =
    g.objects === 1_000_000 ? '' : ` (at ${g.objects.toLocaleString('en-US')}, not 1,000,000)`;
  const check = (x: number | null, ok: (v: number) => boolean): boolean | null =>
    x === null ? null : ok(x);
  return [
    {
      what: 'cascade: kubegc vs kcm defaults (speed-up)',
      value: fmtX(vsDefault),
      goal: '≥ 5×',
      met: check(vsDefault, (v) => v >= 5),
    },
    {
      what: 'cascade: kubegc vs kcm equal settings (speed-up)',
      value: fmtX(vsEqual),
      goal: '≥ 1×',
      met: check(vsEqual, (v) => v >= 1),
    },
    {
      what: 'cascade: kubegc throughput / ceiling throughput',
      value: ofCeiling === null ? 'n/a' : `${(ofCeiling * 100).toFixed(0)}%`,
      goal: '≥ 75%',
      met: check(ofCeiling, (v) => v >= 0.75),
    },
    {
      what: 'memory: kubegc / kcm marginal bytes per object',
      value: mem === null ? 'n/a' : `${(mem * 100).toFixed(0)}%`,
      goal: '≤ 50%',
      met: check(mem, (v) => v <= 0.5),
    },
    {
      what: `graph: heap bytes per object${at}`,
      value: g.heap_bytes_per_object === null ? 'n/a' : `${g.heap_bytes_per_object.toFixed(0)} B`,
      goal: '≤ 600 B',
      met: check(g.heap_bytes_per_object, (v) => v <= 600),
    },
    {
      what: 'graph: events applied per second',
      value: g.events_per_s === null ? 'n/a' : Math.round(g.events_per_s).toLocaleString('en-US'),
      goal: '≥ 300,000',
      met: check(g.events_per_s, (v) => v >= 300_000),
    },
    {
      what: 'graph: owner with 100,000 dependents fully queued',
      value: g.fanout_enqueue_ms === null ? 'n/a' : `${g.fanout_enqueue_ms.toFixed(0)} ms`,
      goal: '< 1,000 ms',
      met: check(g.fanout_enqueue_ms, (v) => v < 1000),
    },
  ];
}

// ---------------------------------------------------------------------------
// Rendering

const fmt = (x: number | null, digits = 2): string => (x === null ? 'n/a' : x.toFixed(digits));
const rate = (n: number, s: number | null): string =>
  s === null || s === 0 ? '' : Math.round(n / s).toLocaleString('en-US');
const int = (x: number | null): string =>
  x === null ? 'failed' : Math.round(x).toLocaleString('en-US');

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

interface Cost {
  cpu: { gc: number; apiserver: number; etcd: number };
  requests: Record<string, number>;
}

/** "GC / apiserver / etcd" CPU seconds during the measured window (the ceiling's GC column is the benchmark client). */
function cpuCell(all: unknown, key: string): string {
  const c = (all as Record<string, Cost> | undefined)?.[key]?.cpu;
  return c ? `${c.gc.toFixed(1)} / ${c.apiserver.toFixed(1)} / ${c.etcd.toFixed(1)}` : '';
}

/** ConfigMap GETs and DELETEs (and PATCHes, if any) the API server completed in the window. */
function requestCell(all: unknown, key: string): string {
  const r = (all as Record<string, Cost> | undefined)?.[key]?.requests;
  if (!r) return '';
  return ['GET', 'DELETE', 'PATCH']
    .filter((v) => r[v])
    .map((v) => `${Math.round(r[v] ?? 0)} ${v}`)
    .join(', ');
}

export interface Details {
  repetitions: number;
  notes: string[];
  [k: string]: unknown;
}

/** The report as markdown tables (printed as-is on the terminal too). */
export function render(r: Results, d: Details, m: Machine): string {
  const c = r.cascade;
  const speedup = (s: number | null): string => {
    const x = ratio(s, c.kubegc_s);
    return x === null ? '' : `${x.toFixed(2)}×`;
  };
  const heapMb = (d.kubegcHeapMb as (number | null)[] | undefined) ?? [];
  const reps =
    d.repetitions === 1
      ? `1 repetition${r.quick ? ' (quick mode)' : ''}`
      : `median of ${d.repetitions} repetitions`;
  const parts = [
    `### Cascade: Background delete of 1 owner with ${c.n.toLocaleString('en-US')} dependent ConfigMaps (${reps})`,
    table(
      [
        'contender',
        'seconds',
        'objects/s',
        'its time ÷ kubegc time',
        'CPU s: GC / apiserver / etcd',
        'ConfigMap requests',
      ],
      [
        ['kubegc (defaults: QPS 500, burst 1000, 20 workers)', c.kubegc_s, 'kubegc'],
        ['kcm GC, defaults (QPS 20, burst 30, 20 workers)', c.kcm_default_s, 'kcm_default'],
        ['kcm GC, equal (QPS 500, burst 1000, 20 workers)', c.kcm_equal_s, 'kcm_equal'],
        ['ceiling: plain client, 20 DELETEs in flight', c.ceiling_s, 'ceiling'],
      ].map(([label, s, key]) => [
        label as string,
        fmt(s as number | null),
        rate(c.n, s as number | null),
        speedup(s as number | null),
        cpuCell(d.cascadeCost, key as string),
        requestCell(d.cascadeCost, key as string),
      ]),
    ),
    '',
    `### Foreground: owner → ${d.foregroundShape as string} (${reps})`,
    table(
      ['contender', 'seconds', 'objects/s', 'CPU s: GC / apiserver / etcd', 'ConfigMap requests'],
      [
        ['kubegc (defaults)', r.foreground.kubegc_s, 'kubegc'],
        ['kcm GC, equal settings', r.foreground.kcm_equal_s, 'kcm_equal'],
      ].map(([label, s, key]) => [
        label as string,
        fmt(s as number | null),
        rate(r.foreground.n, s as number | null),
        cpuCell(d.foregroundCost, key as string),
        requestCell(d.foregroundCost, key as string),
      ]),
    ),
    '',
    `### Memory: RSS after the initial sync of M ConfigMaps (half owned; ${reps})`,
    table(
      ['M', 'kubegc RSS MB', 'kcm GC RSS MB', 'kubegc V8 heap used MB'],
      r.memory.objects
        .map((o, i) => [
          o === 0 ? '0 (near-empty baseline)' : o.toLocaleString('en-US'),
          fmt(r.memory.kubegc_rss_mb[i] ?? null, 1),
          fmt(r.memory.kcm_rss_mb[i] ?? null, 1),
          fmt(heapMb[i] ?? null, 1),
        ])
        .concat([
          [
            'marginal bytes per object',
            int(r.memory.kubegc_bytes_per_object),
            int(r.memory.kcm_bytes_per_object),
            int(slope(r.memory.objects, heapMb)),
          ],
        ]),
    ),
    '',
    `### Time to initial sync on ${r.startup.objects.toLocaleString('en-US')} ConfigMaps (process start → sync done; ${reps})`,
    table(
      ['contender', 'seconds'],
      [
        ['kubegc ("garbage collector started")', fmt(r.startup.kubegc_sync_s)],
        ['kcm GC ("all resource monitors have synced")', fmt(r.startup.kcm_sync_s)],
      ],
    ),
    '',
    `### In-process graph, no API server (${r.graph.objects.toLocaleString('en-US')} objects)`,
    table(
      ['measure', 'value'],
      [
        ['events applied per second (adds + one update each)', int(r.graph.events_per_s)],
        [
          '  of which adds per second',
          int((d.graph as { add_events_per_s?: number } | undefined)?.add_events_per_s ?? null),
        ],
        [
          '  of which updates per second',
          int(
            (d.graph as { update_events_per_s?: number } | undefined)?.update_events_per_s ?? null,
          ),
        ],
        ['heap bytes per object (after forced GC)', int(r.graph.heap_bytes_per_object)],
        [
          'owner with 100,000 dependents: delete event → all queued (ms)',
          fmt(r.graph.fanout_enqueue_ms, 0),
        ],
      ],
    ),
    '',
    '### Targets',
    table(
      ['target', 'measured', 'goal', 'met'],
      targets(r).map((t) => [
        t.what,
        t.value,
        t.goal,
        t.met === null ? 'n/a' : t.met ? 'yes' : '**no**',
      ]),
    ),
  ];
  if (d.notes.length) parts.push('', '### Notes', ...d.notes.map((n) => `- ${n}`));
  parts.push('', machineTable(m));
  return parts.join('\n');
}

export function machineTable(m: Machine): string {
  return [
    '### Machine',
    table(
      ['', ''],
      [
        ['CPU', `${m.cores} cores, ${m.cpu}`],
        ['memory', `${m.memoryGiB} GiB`],
        ['kernel', m.kernel],
        ['Node.js', m.node],
        ['Go (control-plane build)', m.go],
        ['Kubernetes', m.kubernetes],
        ['load average at start (1/5/15 min)', (m.loadAverageAtStart ?? []).join(' / ')],
        ['load average at end', (m.loadAverageAtEnd ?? []).join(' / ')],
      ],
    ),
  ].join('\n');
}

const NOTES_START = '<!-- analysis: kept across runs -->';
const NOTES_END = '<!-- /analysis -->';

/** bench/RESULTS.md: the run's tables, with the hand-written analysis block of the previous file kept. */
export function resultsMarkdown(
  report: string,
  previous: string,
  when: string,
  quick: boolean,
): string {
  const s = previous.indexOf(NOTES_START);
  const e = previous.indexOf(NOTES_END);
  const analysis =
    s !== -1 && e > s ? previous.slice(s, e + NOTES_END.length) : `${NOTES_START}\n${NOTES_END}`;
  return [
    '# Benchmark results',
    '',
    `${quick ? 'Last **quick** run (`npm run bench -- --quick`; no full run recorded yet)' : 'Last full run (`npm run bench`)'}, ${when}.`,
    'Regenerated by the benchmark; only the analysis block below is written by hand.',
    'All contenders ran one after another on the same local control plane (etcd on',
    'tmpfs, kube-apiserver, kube-controller-manager without its GC), each alone and on',
    'a fresh namespace. See `bench/README.md` for what each number means.',
    '',
    report,
    '',
    '## Analysis',
    '',
    analysis,
    '',
  ].join('\n');
}

export const RESULTS_DIR = (root: string): string => path.join(root, 'bench', 'results');
