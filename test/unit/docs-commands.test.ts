// Every command of the README and docs/ is proven: run by
// test/e2e/docs-commands.test.ts, or named with the file that runs it
// (test/support/docs-commands.ts). This file fails when a command is added to
// the docs without either, and when an entry no longer matches the docs or
// the file it names.
import { REPO_ROOT } from '../../cluster/controlplane.ts';
import {
  docCommands,
  docFiles,
  extractCommands,
  PROVEN_ELSEWHERE,
  provenProblems,
  RUN_BY_E2E,
  stripComment,
} from '../support/docs-commands.ts';

describe('extraction', () => {
  test('sh and bash blocks only; continuations joined; comments dropped; VAR=$(...) kept', () => {
    const md = [
      '# Title',
      '```sh',
      'a --x 1 \\',
      '  --y 2   # why',
      '# only a comment',
      '',
      'V=$(b c)   # kept',
      '```',
      '```yaml',
      'not: a command',
      '```',
      '1. step',
      '   ```bash',
      '   d -p \'{"k":"#not-a-comment"}\' \\',
      '     "e#f"',
      '   ```',
      '```promql',
      'rate(x[5m])',
      '```',
    ].join('\n');
    expect(extractCommands(md, 'x.md')).toEqual([
      { file: 'x.md', line: 3, text: 'a --x 1 --y 2' },
      { file: 'x.md', line: 7, text: 'V=$(b c)' },
      { file: 'x.md', line: 14, text: `d -p '{"k":"#not-a-comment"}' "e#f"` },
    ]);
  });

  test('a # starts a comment only where the shell would', () => {
    expect(stripComment('echo $# a#b "c # d" # e')).toBe('echo $# a#b "c # d" ');
    expect(stripComment('# all')).toBe('');
  });

  test('the docs: README.md, docs/*.md, docs/runbooks/*.md, with their commands', () => {
    const files = docFiles(REPO_ROOT);
    expect(files).toContain('README.md');
    expect(files).toContain('docs/doctor.md');
    expect(files).toContain('docs/runbooks/KubegcDeletionBlocked.md');
    const commands = docCommands(REPO_ROOT);
    // Joined over the backslash, its comment gone.
    expect(commands.map((c) => c.text)).toContain(
      'helm install kubegc oci://registry.example.com/charts/kubegc --version 0.1.0 -n kubegc-system --create-namespace --set image.repository=registry.example.com/kubegc',
    );
    expect(commands.map((c) => c.text)).toContain('HELM=$(bash cluster/build-helm.sh)/helm');
    for (const c of commands) {
      expect(c.text).not.toMatch(/\\$/);
      expect(c.text).not.toMatch(/\s#\s/);
    }
  });
});

describe('every command in the docs is proven', () => {
  const commands = docCommands(REPO_ROOT);

  test('run by the e2e test or named with the file that proves it; no entry stale', () => {
    expect(provenProblems(REPO_ROOT, commands)).toEqual([]);
    // How many: the report of issue 23 counts them.
    const distinct = new Set(commands.map((c) => c.text));
    expect(distinct.size).toBe(RUN_BY_E2E.length + PROVEN_ELSEWHERE.length);
  });

  test('the check fails on a command in neither list, and on stale entries', () => {
    const added = [...commands, { file: 'docs/x.md', line: 1, text: 'kubegc frobnicate' }];
    expect(provenProblems(REPO_ROOT, added)).toEqual([
      'docs/x.md:1: `kubegc frobnicate` is neither run by test/e2e/docs-commands.test.ts nor in PROVEN_ELSEWHERE',
    ]);
    const removed = commands.filter((c) => c.text !== 'npm test' && c.text !== 'kubegc doctor');
    expect(provenProblems(REPO_ROOT, removed)).toEqual([
      'RUN_BY_E2E: `kubegc doctor` is no longer in the docs',
      'PROVEN_ELSEWHERE: `npm test` is no longer in the docs',
    ]);
  });

  test('a table entry whose file no longer holds the words of its command is stale', () => {
    const stale = PROVEN_ELSEWHERE.map((e) =>
      e.command === 'npm test'
        ? {
            ...e,
            proofs: [
              { file: 'README.md', words: ['npm test'] },
              { file: 'no/such/file', words: ['npm'] },
              { file: '.ci/run', words: ['jest --ci'] },
            ],
          }
        : e,
    );
    expect(provenProblems(REPO_ROOT, commands, RUN_BY_E2E, stale)).toEqual([
      'PROVEN_ELSEWHERE: `npm test`: no/such/file does not exist',
      'PROVEN_ELSEWHERE: `npm test`: "jest --ci" is not a word of the command',
      'PROVEN_ELSEWHERE: `npm test`: .ci/run does not contain "jest --ci"',
    ]);
    expect(
      provenProblems(REPO_ROOT, commands, [...RUN_BY_E2E, 'npm test'], PROVEN_ELSEWHERE),
    ).toContainEqual(
      // The line moves as the README does; the file and the complaint do not.
      expect.stringMatching(
        /^README\.md:\d+: `npm test` is in both RUN_BY_E2E and PROVEN_ELSEWHERE$/,
      ),
    );
  });
});
