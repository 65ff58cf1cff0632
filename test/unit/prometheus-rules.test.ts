// The alerts of deploy/components/prometheus-operator: each PrometheusRule's
// spec (the controller's, prometheusrule.yaml, and the node GC's,
// prometheusrule-node.yaml) passes `promtool check rules`, the unit tests
// beside it (tests/rules.test.yaml, tests/rules-node.test.yaml) pass `promtool
// test rules`, and every alert has a severity, a summary, a description, a
// runbook under docs/runbooks/ and tests of its own, firing and not. promtool
// is Debian's prometheus package, installed when missing as the e2e tests'
// prometheus is (cluster/packages.ts).
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
  metadata: { name: string };
  spec: { groups: { name: string; rules: Rule[] }[] };
}

interface RuleTests {
  rule_files: string[];
  tests: {
    name?: string;
    alert_rule_test?: { eval_time: string; alertname: string; exp_alerts?: unknown[] }[];
  }[];
}

/**
 * One PrometheusRule of the component and its promtool tests, which read its
 * spec from `rules` (the file this test writes beside a copy of them).
 */
interface RuleSet {
  resource: string;
  tests: string;
  rules: string;
}

const RULE_SETS: readonly RuleSet[] = [
  { resource: 'prometheusrule.yaml', tests: 'tests/rules.test.yaml', rules: 'rules.yaml' },
  {
    resource: 'prometheusrule-node.yaml',
    tests: 'tests/rules-node.test.yaml',
    rules: 'rules-node.yaml',
  },
];

const loaded = RULE_SETS.map((set) => {
  const rule = load(readFileSync(path.join(COMPONENT, set.resource), 'utf8')) as PrometheusRule;
  const ruleTests = load(readFileSync(path.join(COMPONENT, set.tests), 'utf8')) as RuleTests;
  const all = rule.spec.groups.flatMap((g) => g.rules);
  return {
    ...set,
    rule,
    ruleTests,
    count: all.length,
    alertNames: all.flatMap((r) => (r.alert === undefined ? [] : [r.alert])),
    cases: ruleTests.tests.flatMap((t) => t.alert_rule_test ?? []),
  };
});
const alerts = loaded.flatMap((l) =>
  l.rule.spec.groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined),
);
const alertNames = loaded.flatMap((l) => l.alertNames);
const cases = loaded.flatMap((l) => l.cases);

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
  // promtool reads rule files (groups: at the top), not PrometheusRules: each
  // spec goes to the file its tests name, beside a copy of them.
  dir = mkdtempSync(path.join(os.tmpdir(), 'kubegc-rules-'));
  for (const l of loaded) {
    writeFileSync(path.join(dir, l.rules), dump(l.rule.spec));
    copyFileSync(path.join(COMPONENT, l.tests), path.join(dir, path.basename(l.tests)));
  }
}, 600_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('each PrometheusRule holds alerts of its own, and its tests read the file this test writes', () => {
  for (const l of loaded) {
    expect(l.rule.kind).toBe('PrometheusRule');
    expect(l.alertNames.length).toBeGreaterThan(0);
    expect(l.ruleTests.rule_files).toEqual([l.rules]);
  }
  expect(new Set(loaded.map((l) => l.rule.metadata.name)).size).toBe(loaded.length);
  expect(new Set(alertNames).size).toBe(alertNames.length);
  // `kubectl apply -k` must not see the tests, and must see every rule:
  // kustomize reads only listed files.
  const kustomization = load(readFileSync(path.join(COMPONENT, 'kustomization.yaml'), 'utf8')) as {
    resources: string[];
  };
  expect(kustomization.resources).not.toContainEqual(expect.stringContaining('test'));
  expect(kustomization.resources).toEqual(
    expect.arrayContaining(RULE_SETS.map((set) => set.resource)),
  );
});

test.each(loaded)('promtool check rules accepts $resource', (l) => {
  const r = promtool('check', 'rules', l.rules);
  expect(r).toMatchObject({ status: 0 });
  expect(r.output).toContain(`SUCCESS: ${l.count} rules found`);
});

test.each(loaded)('promtool test rules $tests: every case passes', (l) => {
  const r = promtool('test', 'rules', path.basename(l.tests));
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

test('every runbook is of an alert in the files, and every test case of an alert in its own', () => {
  const runbooks = readdirSync(RUNBOOKS)
    .filter((f) => f.endsWith('.md') && f !== 'README.md')
    .map((f) => f.slice(0, -'.md'.length));
  expect(runbooks.filter((n) => !alertNames.includes(n))).toEqual([]);
  // A case naming another file's alert would pass unseen: promtool finds no such alert, so none fires.
  for (const l of loaded)
    expect([
      l.tests,
      l.cases.map((c) => c.alertname).filter((n) => !l.alertNames.includes(n)),
    ]).toEqual([l.tests, []]);
});
