// The Grafana dashboard of deploy/components/prometheus-operator: it has what
// Grafana's dashboard schema requires (and panels that do not overlap), every
// query parses (`promtool check rules` of one recording rule per query), every
// metric it names is one kubegc registers (so renaming a metric in src/ fails
// here, not on a user's empty panel), and the component ships it as the
// ConfigMap kube-prometheus-stack's Grafana sidecar loads. That each query
// returns series from a real Prometheus scraping kubegc is proven by
// test/e2e/in-cluster.test.ts.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump, loadAll } from 'js-yaml';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { binaryDir } from '../../cluster/controlplane.ts';
import { ensurePackages } from '../../cluster/packages.ts';
import { createNodeMetrics } from '../../src/node/metrics.ts';
import { createControllerMetrics } from '../../src/observability/metrics.ts';
import {
  DASHBOARD_FILE,
  loadDashboard,
  panelQueries,
  substitute,
  type DashboardPanel,
} from '../support/dashboard.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const COMPONENT = path.join(ROOT, 'deploy/components/prometheus-operator');
const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };
const GRID_COLUMNS = 24;

const dashboard = loadDashboard();
const panels = dashboard.panels ?? [];
const queries = panelQueries(dashboard);

let dir: string;

beforeAll(() => {
  ensurePackages(
    [
      {
        provides: 'promtool',
        pkg: 'prometheus',
        why: "promtool check rules of the dashboard's queries",
      },
    ],
    (l) => process.stderr.write(`dashboard: ${l}\n`),
  );
  dir = mkdtempSync(path.join(os.tmpdir(), 'kubegc-dashboard-'));
}, 600_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the dashboard has the fields of the dashboard schema', () => {
  test('title, uid, schemaVersion and panels', () => {
    expect(dashboard).toMatchObject({ title: 'kubegc', uid: 'kubegc' });
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(panels.length).toBeGreaterThan(0);
  });

  test('a datasource variable of type datasource for Prometheus, and no other variable', () => {
    expect(dashboard.templating?.list).toEqual([
      expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }),
    ]);
  });

  test('panel ids are unique', () => {
    const ids = panels.map((p) => p.id);
    expect(ids.every((id) => Number.isInteger(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test.each(panels.map((p) => [p.title ?? `panel ${p.id}`, p] as const))(
    '%s: type, title, gridPos, datasource and targets with refId and expr',
    (_, p) => {
      expect(['timeseries', 'stat']).toContain(p.type);
      expect(p.title).toEqual(expect.stringMatching(/\S/));
      expect(p.description).toEqual(expect.stringMatching(/\S/));
      const g = p.gridPos ?? {};
      for (const k of ['h', 'w', 'x', 'y'] as const) expect(Number.isInteger(g[k])).toBe(true);
      expect(g.h).toBeGreaterThan(0);
      expect(g.w).toBeGreaterThan(0);
      expect(g.x).toBeGreaterThanOrEqual(0);
      expect(g.y).toBeGreaterThanOrEqual(0);
      expect((g.x ?? 0) + (g.w ?? 0)).toBeLessThanOrEqual(GRID_COLUMNS);
      expect(p.datasource).toEqual(DATASOURCE);
      expect(p.targets?.length).toBeGreaterThan(0);
      const refIds = (p.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size).toBe(refIds.length);
      for (const t of p.targets ?? []) {
        expect(t.refId).toEqual(expect.stringMatching(/^[A-Z]$/));
        expect(t.expr).toEqual(expect.stringMatching(/\S/));
        expect(t.datasource).toEqual(DATASOURCE);
      }
    },
  );

  test('no two panels overlap', () => {
    const box = (p: DashboardPanel): { x: number; y: number; w: number; h: number } => ({
      x: p.gridPos?.x ?? 0,
      y: p.gridPos?.y ?? 0,
      w: p.gridPos?.w ?? 0,
      h: p.gridPos?.h ?? 0,
    });
    const overlaps: string[] = [];
    panels.forEach((p, i) =>
      panels.slice(i + 1).forEach((q) => {
        const a = box(p);
        const b = box(q);
        if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h)
          overlaps.push(`${p.title} / ${q.title}`);
      }),
    );
    expect(overlaps).toEqual([]);
  });
});

describe('the queries', () => {
  test('template variables are substituted, and unknown ones refused', () => {
    expect(queries.length).toBeGreaterThan(0);
    expect(queries.filter((q) => q.expr.includes('$'))).toEqual([]);
    expect(substitute('rate(x[$__rate_interval]) + rate(x[${__interval}])')).toBe(
      'rate(x[1m]) + rate(x[15s])',
    );
    expect(() => substitute('x{job="$job"}')).toThrow('unknown template variable $job');
  });

  test('promtool check rules parses every one (one recording rule each)', () => {
    const rules = {
      groups: [
        {
          name: 'dashboard',
          rules: queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr })),
        },
      ],
    };
    writeFileSync(path.join(dir, 'queries.yaml'), dump(rules));
    const r = spawnSync('promtool', ['check', 'rules', 'queries.yaml'], {
      cwd: dir,
      encoding: 'utf8',
    });
    if (r.error) throw r.error;
    // Both in one assertion, so that a failure shows promtool's message.
    expect({ status: r.status, output: `${r.stdout}${r.stderr}` }).toEqual({
      status: 0,
      output: expect.stringContaining(`SUCCESS: ${queries.length} rules found`),
    });
  });

  test('every metric named is one kubegc registers, and every label matched is one it has', async () => {
    const known = await registeredMetrics();
    const unknown: string[] = [];
    for (const q of queries)
      for (const s of selectors(q.expr)) {
        const labels = known.get(s.name);
        if (!labels) unknown.push(`${q.panel}: metric ${s.name}`);
        else
          for (const l of s.labels)
            if (!labels.has(l)) unknown.push(`${q.panel}: label ${l} of ${s.name}`);
      }
    expect(unknown).toEqual([]);
  });

  test('the metric-name check finds the names it should (it would catch a rename)', () => {
    expect(
      selectors(
        'sum by (le) (rate(a_bucket{x="y", z=~"1e3"}[1m])) or 0 * sum(b_total) and on (job) c == 1e-3',
      ),
    ).toEqual([
      { name: 'a_bucket', labels: ['x', 'z'] },
      { name: 'b_total', labels: [] },
      { name: 'c', labels: [] },
    ]);
  });
});

test('the component ships the dashboard as ConfigMap kubegc-dashboard labelled grafana_dashboard: "1", with the same JSON', async () => {
  // A user's overlay: deploy/ plus the component (kustomize wants relative paths).
  const overlay = path.join(dir, 'overlay');
  const deploy = path.relative(overlay, path.join(ROOT, 'deploy'));
  mkdirSync(overlay, { recursive: true });
  writeFileSync(
    path.join(overlay, 'kustomization.yaml'),
    dump({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [deploy],
      components: [path.relative(overlay, COMPONENT)],
    }),
  );
  const rendered = execFileSync(await kubectlBinary(), ['kustomize', overlay], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const objects = loadAll(rendered) as {
    kind?: string;
    metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
    data?: Record<string, string>;
  }[];
  const cms = objects.filter(
    (o) => o.kind === 'ConfigMap' && /dashboard/.test(o.metadata?.name ?? ''),
  );
  expect(cms.map((o) => o.metadata)).toEqual([
    {
      name: 'kubegc-dashboard',
      namespace: 'kubegc-system',
      labels: { grafana_dashboard: '1' },
    },
  ]);
  expect(cms[0]?.data).toEqual({ 'kubegc.json': readFileSync(DASHBOARD_FILE, 'utf8') });
});

/**
 * Metric name → its label names (with Prometheus' target labels), as
 * `kubegc controller` and `kubegc node` register them: histograms expose
 * _bucket (with `le`), _sum and _count.
 */
async function registeredMetrics(): Promise<Map<string, Set<string>>> {
  const controller = createControllerMetrics().registry;
  // As src/cli/node.ts: the process metrics, then the node GC's own.
  const node = new Registry();
  collectDefaultMetrics({ register: node });
  createNodeMetrics(node);
  const out = new Map<string, Set<string>>();
  const TARGET_LABELS = ['job', 'instance'];
  for (const registry of [controller, node]) {
    const types = new Map((await registry.getMetricsAsJSON()).map((m) => [m.name, m.type]));
    for (const m of registry.getMetricsAsArray()) {
      const labels = [...((m as { labelNames?: string[] }).labelNames ?? []), ...TARGET_LABELS];
      const type = String(types.get(m.name));
      const add = (name: string, extra: string[] = []): void => {
        out.set(name, new Set([...(out.get(name) ?? []), ...labels, ...extra]));
      };
      if (type === 'histogram') {
        add(`${m.name}_bucket`, ['le']);
        add(`${m.name}_sum`);
        add(`${m.name}_count`);
      } else if (type === 'summary') {
        add(m.name, ['quantile']);
        add(`${m.name}_sum`);
        add(`${m.name}_count`);
      } else add(m.name);
    }
  }
  return out;
}

const PROMQL_KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'inf',
  'nan',
  'atan2',
]);

/**
 * The vector selectors of an expression: metric names and the labels their
 * matchers name. Strings, durations and grouping label lists are blanked
 * first; an identifier followed by `(` is a function or an aggregation.
 */
function selectors(expr: string): { name: string; labels: string[] }[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ');
  const out: { name: string; labels: string[] }[] = [];
  const token = /(?<![\w.:])([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?\s*(\()?/g;
  for (const m of s.matchAll(token)) {
    const [, name = '', matchers, call] = m;
    if (call || PROMQL_KEYWORDS.has(name.toLowerCase())) continue;
    const labels = [...(matchers ?? '').matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g)].map((l) => l[1] ?? '');
    out.push({ name, labels });
  }
  return out;
}

/** kubectl on PATH (what a user runs `kubectl apply -k` with), else the local control plane's. */
async function kubectlBinary(): Promise<string> {
  if (spawnSync('sh', ['-c', 'command -v kubectl'], { stdio: 'ignore' }).status === 0)
    return 'kubectl';
  const built = path.join(await binaryDir(), 'kubectl');
  if (existsSync(built)) return built;
  throw new Error(
    `kubectl is neither on PATH nor at ${built}: install it, or build the local control plane (npm run cluster -- up)`,
  );
}
