// The Grafana dashboard of deploy/components/prometheus-operator, read as the
// tests need it: every panel's PromQL with Grafana's template variables
// replaced by what a direct Prometheus query takes, and a check that a real
// Prometheus answers each one with at least one series. Grafana cannot run
// here; what can break without it is a query (a renamed metric or label, a
// syntax error), and that is what these prove.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Prometheus } from './prometheus.ts';

export const DASHBOARD_FILE = fileURLToPath(
  new URL('../../deploy/components/prometheus-operator/dashboards/kubegc.json', import.meta.url),
);

export interface DashboardTarget {
  refId?: string;
  expr?: string;
  legendFormat?: string;
  datasource?: { type?: string; uid?: string };
}

export interface DashboardPanel {
  id?: number;
  type?: string;
  title?: string;
  description?: string;
  gridPos?: { h?: number; w?: number; x?: number; y?: number };
  datasource?: { type?: string; uid?: string };
  targets?: DashboardTarget[];
}

export interface Dashboard {
  title?: string;
  uid?: string;
  schemaVersion?: number;
  panels?: DashboardPanel[];
  templating?: { list?: { name?: string; type?: string; query?: string }[] };
}

export function loadDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

/**
 * Grafana's built-in interval variables, as fixed values. 1m for rate() windows
 * holds several samples at any scrape interval up to 15 s (Grafana's
 * $__rate_interval is at least four scrape intervals).
 */
const BUILT_INS: Record<string, string> = {
  __rate_interval: '1m',
  __interval: '15s',
  __interval_ms: '15000',
  __range: '5m',
  __range_s: '300',
  __range_ms: '300000',
};

/** `$name` and `${name}`; `[[name]]` is Grafana's deprecated form, refused below. */
const VARIABLE = /\$\{(\w+)\}|\$(\w+)/g;

/** The expression as Prometheus itself would be sent it; throws on a variable it does not know. */
export function substitute(expr: string): string {
  if (expr.includes('[[')) throw new Error(`deprecated [[variable]] syntax in: ${expr}`);
  return expr.replace(VARIABLE, (_, braced: string | undefined, bare: string | undefined) => {
    const name = braced ?? bare ?? '';
    const value = BUILT_INS[name];
    if (value === undefined) throw new Error(`unknown template variable $${name} in: ${expr}`);
    return value;
  });
}

/** Every target's expression, by panel title, ready for a direct Prometheus query. */
export function panelQueries(dashboard: Dashboard = loadDashboard()): {
  panel: string;
  expr: string;
}[] {
  return (dashboard.panels ?? []).flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      panel: `${p.title ?? `panel ${p.id}`} [${t.refId ?? '?'}]`,
      expr: substitute(t.expr ?? ''),
    })),
  );
}

/**
 * Runs every panel query as an instant query against `prom`: the failures
 * (the query errored, or returned no series), one line each. A query that
 * returns a series whose value is NaN (a quantile of an idle histogram) passes:
 * the panel is there and draws a gap, as Grafana does.
 */
export async function checkDashboardQueries(prom: Prometheus): Promise<string[]> {
  const failures: string[] = [];
  for (const { panel, expr } of panelQueries()) {
    const r = await prom.series(expr);
    if (r.error !== undefined) failures.push(`${panel}: ${expr}: ${r.error}`);
    else if (r.series === 0) failures.push(`${panel}: ${expr}: no series`);
  }
  return failures;
}
