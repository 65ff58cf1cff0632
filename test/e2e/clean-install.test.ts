// The README's first command, as a newcomer runs it: `npm ci` in a fresh copy
// of this tree, on the oldest kind of Node.js the README states (the machine's
// own `node`, not the one npm ci installs), must succeed without one warning.
// An EBADENGINE or a deprecation is how a stated prerequisite stops being true.
//
// `--offline`: every package comes from npm's cache, which the CI's own
// `npm ci` has just filled, so the test sends no packet off this machine (the
// packages are the same; what npm checks and warns about is the same).
import { execFile } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import semver from 'semver';
import { REPO_ROOT } from '../../cluster/controlplane.ts';

const execFileAsync = promisify(execFile);

/** The first `node` on PATH outside node_modules: the Node.js the reader brought. */
function machineNode(): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '' || dir.split(path.sep).includes('node_modules')) continue;
    const candidate = path.join(dir, 'node');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error('no node on PATH outside node_modules: the README says to bring one');
}

/** The Node.js version the README states ("Node.js ≥ X with npm ≥ Y"). */
function readmeNodeFloor(): string {
  const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const match = /Node\.js ≥ (\d+\.\d+\.\d+) with npm ≥ \d+/.exec(readme);
  if (!match?.[1]) throw new Error('README.md no longer states "Node.js ≥ X.Y.Z with npm ≥ N"');
  return match[1];
}

const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
};

test('the README states what package.json engines says', () => {
  expect(`>=${readmeNodeFloor()}`).toBe(pkg.engines.node);
});

test('npm ci in a fresh copy, on the machine Node.js, prints no warning', async () => {
  const node = machineNode();
  const { stdout: version } = await execFileAsync(node, ['--version']);
  // Only meaningful on a Node.js the README admits (any older is the reader's problem).
  expect(semver.satisfies(version.trim(), pkg.engines.node)).toBe(true);

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-clean-install-'));
  try {
    const { stdout: files } = await execFileAsync(
      'git',
      ['ls-files', '--cached', '--others', '--exclude-standard', '-z'],
      { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 },
    );
    for (const file of files.split('\0').filter((f) => f !== '')) {
      const from = path.join(REPO_ROOT, file);
      const stat = await fs.lstat(from).catch(() => undefined);
      if (!stat?.isFile()) continue; // deleted in the working tree, or a symlink
      await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      await fs.copyFile(from, path.join(dir, file));
    }
    // The machine's PATH with its node first, as in the reader's shell: no
    // node_modules/.bin of this run, no npm_* variables of the npm test around us.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)),
    ) as NodeJS.ProcessEnv;
    env.PATH = [
      path.dirname(node),
      ...(process.env.PATH ?? '')
        .split(path.delimiter)
        .filter((d) => !d.split(path.sep).includes('node_modules')),
    ].join(path.delimiter);
    const npm = path.join(path.dirname(node), 'npm');
    let out: { stdout: string; stderr: string };
    try {
      out = await execFileAsync(npm, ['ci', '--offline', '--no-audit', '--no-fund'], {
        cwd: dir,
        env,
        maxBuffer: 64 * 1024 * 1024,
      });
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      throw new Error(`npm ci failed (exit ${e.code}):\n${e.stdout}\n${e.stderr}`);
    }
    const warnings = `${out.stdout}\n${out.stderr}`
      .split('\n')
      .filter((line) => /^npm warn/i.test(line));
    expect(warnings).toEqual([]);
    // And it installed what the README promises next: the kubegc bin.
    await fs.access(path.join(dir, 'node_modules', '.bin', 'kubegc'));
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}, 600_000);
