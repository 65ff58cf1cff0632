// dist/, as the `kubegc` bin and the image run it (scripts/build.ts): the
// bundle works, and starting the controller reads a handful of module files
// instead of one per source file and dependency (a fixed cost of every start).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, copyFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '../../cluster/controlplane.ts';
import { RUNTIME_FLAGS } from '../../src/runtime-flags.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kubegc-build-'));
  copyFileSync(path.join(REPO_ROOT, 'package.json'), path.join(dir, 'package.json'));
  symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  execFileSync(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', 'scripts/build.ts', path.join(dir, 'dist')],
    { cwd: REPO_ROOT, stdio: 'pipe' },
  );
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (args: string[], nodeFlags: string[] = []): string =>
  execFileSync(
    process.execPath,
    [...RUNTIME_FLAGS, ...nodeFlags, path.join(dir, 'dist', 'cli.js'), ...args],
    {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    },
  );

test('the built kubegc runs: --version, and each subcommand loads (its --help)', () => {
  expect(run(['--version']).trim()).toMatch(/^\d+\.\d+\.\d+/);
  for (const command of ['controller', 'doctor', 'explain', 'node'])
    expect(run([command, '--help'])).toContain(`kubegc ${command}`);
});

test('loading the controller reads a few bundled files, not one per module', () => {
  // A module hook that counts the files loaded (Node's built-ins apart).
  const hook = path.join(dir, 'count-loads.mjs');
  writeFileSync(
    hook,
    [
      "import { registerHooks } from 'node:module';",
      'const files = new Set();',
      "registerHooks({ load(url, ctx, next) { if (url.startsWith('file:')) files.add(url); return next(url, ctx); } });",
      "process.on('exit', () => process.stderr.write(`loaded ${files.size} files\\n`));",
    ].join('\n'),
  );
  const r = spawnSync(
    process.execPath,
    [...RUNTIME_FLAGS, '--import', hook, path.join(dir, 'dist', 'cli.js'), 'controller', '--help'],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
  );
  expect(r.status).toBe(0);
  const loaded = Number(/loaded (\d+) files/.exec(r.stderr)?.[1]);
  // The hook, the entry and its chunks: 10 (built file by file, 133 with the
  // dependencies' own modules).
  expect(loaded).toBeGreaterThan(1);
  expect(loaded).toBeLessThanOrEqual(15);
});
