// The alerts of deploy/components/prometheus-operator: the PrometheusRule's
// spec passes `promtool check rules`, the unit tests beside it
// (tests/rules.test.yaml) pass `promtool test rules`, and every alert has a
// severity, a summary, a description, a runbook under docs/runbooks/ and tests
// of its own, firing and not. promtool is Debian's prometheus package, installed
// when missing as the e2e tests' prometheus is (cluster/packages.ts).
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump, load } from 'js-yaml';
import { ensurePackages } from '../../cluster/packages.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const COMPONENT = path.join(ROOT, 'deploy/components/prometheus-operator');
const RULE_FILE = path.join(COMPONENT, 'prometheusrule.yaml');
const TEST_FILE = path.join(COMPONENT, 'tests/rules.test.yaml');
const RUNBOOKS = path.join(ROOT, 'docs/runbooks');
const RUNBOOK_URL = 'https://github.com/kubegc/kubegc/blob/main/docs/runbooks/';

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

interface PrometheusRule {
  kind: string;
  spec: { groups: { name: string; rules: Rule[] }[] };
}

interface RuleTests {
  rule_files: string[];
  tests: {
    name?: string;
    alert_rule_test?: { eval_time: string; alertname: string; exp_alerts?: unknown[] }[];
  }[];
}

const rule = load(readFileSync(RULE_FILE, 'utf8')) as PrometheusRule;
const ruleTests = load(readFileSync(TEST_FILE, 'utf8')) as RuleTests;
const alerts = rule.spec.groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
const alertNames = alerts.map((r) => r.alert as string);
const cases = ruleTests.tests.flatMap((t) => t.alert_rule_test ?? []);

let dir: string;

function promtool(...args: string[]): { status: number | null; output: string } {
  const r = spawnSync('promtool', args, { cwd: dir, encoding: 'utf8' });
  if (r.error) throw r.error;
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

beforeAll(() => {
  ensurePackages(
    [{ provides: 'promtool', pkg: 'prometheus', why: 'promtool test rules of the alerts' }],
    (l) => process.stderr.write(`prometheus-rules: ${l}\n`),
  );
  // promtool reads rule files (groups: at the top), not PrometheusRules: the
  // spec goes to rules.yaml beside a copy of the tests, which name it.
  dir = mkdtempSync(path.join(os.tmpdir(), 'kubegc-rules-'));
  writeFileSync(path.join(dir, 'rules.yaml'), dump(rule.spec));
  copyFileSync(TEST_FILE, path.join(dir, 'rules.test.yaml'));
}, 600_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the PrometheusRule holds alerts, and its tests read the file this test writes', () => {
  expect(rule.kind).toBe('PrometheusRule');
  expect(alertNames.length).toBeGreaterThan(0);
  expect(new Set(alertNames).size).toBe(alertNames.length);
  expect(ruleTests.rule_files).toEqual(['rules.yaml']);
  // `kubectl apply -k` must not see the tests: kustomize reads only listed files.
  const kustomization = load(readFileSync(path.join(COMPONENT, 'kustomization.yaml'), 'utf8')) as {
    resources: string[];
  };
  expect(kustomization.resources).not.toContainEqual(expect.stringContaining('test'));
});

test('promtool check rules accepts the rules', () => {
  const r = promtool('check', 'rules', 'rules.yaml');
  expect(r).toMatchObject({ status: 0 });
  expect(r.output).toContain(
    `SUCCESS: ${rule.spec.groups.flatMap((g) => g.rules).length} rules found`,
  );
});

test('promtool test rules: every case passes', () => {
  const r = promtool('test', 'rules', 'rules.test.yaml');
  expect(r).toMatchObject({ status: 0 });
  expect(r.output).toContain('SUCCESS');
});

test.each(alertNames)('%s has a severity, a summary, a description and a runbook', (name) => {
  const a = alerts.find((r) => r.alert === name) as Rule;
  expect(['warning', 'critical']).toContain(a.labels?.severity);
  expect(a.annotations?.summary).toEqual(expect.stringMatching(/\S/));
  expect(a.annotations?.description).toEqual(expect.stringMatching(/\S/));
  expect(a.annotations?.runbook_url).toBe(`${RUNBOOK_URL}${name}.md`);
  expect(existsSync(path.join(RUNBOOKS, `${name}.md`))).toBe(true);
  expect(readFileSync(path.join(RUNBOOKS, 'README.md'), 'utf8')).toContain(`](${name}.md)`);
});

test.each(alertNames)('%s is tested firing and not firing', (name) => {
  const mine = cases.filter((c) => c.alertname === name);
  expect(mine.some((c) => (c.exp_alerts ?? []).length > 0)).toBe(true);
  expect(mine.some((c) => (c.exp_alerts ?? []).length === 0)).toBe(true);
});

test('every runbook and every test case is of an alert in the file', () => {
  const runbooks = readdirSync(RUNBOOKS)
    .filter((f) => f.endsWith('.md') && f !== 'README.md')
    .map((f) => f.slice(0, -'.md'.length));
  expect(runbooks.filter((n) => !alertNames.includes(n))).toEqual([]);
  expect(cases.map((c) => c.alertname).filter((n) => !alertNames.includes(n))).toEqual([]);
});
