// Debian packages the tests, the demo's node and the image build need. A
// missing one is installed with apt-get when we are root (as the containerd
// helper always did); otherwise the run stops at once, naming the package and
// the command that installs it. So `npm test` on a fresh machine sets itself
// up, and CI needs nothing beyond `npm ci` and `npm test`.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export interface Requirement {
  /** A command on PATH, or an absolute path, whose presence means the package is there. */
  provides: string;
  /** The Debian package that provides it. */
  pkg: string;
  /** What needs it (for the error message). */
  why: string;
}

export const TEST_PACKAGES: Requirement[] = [
  { provides: 'prometheus', pkg: 'prometheus', why: 'scrapes kubegc in the e2e tests' },
  { provides: 'containerd', pkg: 'containerd', why: 'the node-GC e2e tests (CRI)' },
  { provides: 'ctr', pkg: 'containerd', why: 'imports test images into containerd' },
  { provides: 'runc', pkg: 'runc', why: 'runs the node-GC tests’ containers' },
];

function present(provides: string): boolean {
  if (provides.startsWith('/')) return existsSync(provides);
  return spawnSync('sh', ['-c', `command -v ${provides}`], { stdio: 'ignore' }).status === 0;
}

/** The requirements not met on this machine. */
export function missingPackages(reqs: readonly Requirement[]): Requirement[] {
  return reqs.filter((r) => !present(r.provides));
}

/**
 * Installs what is missing with apt-get (root only), or throws an error that
 * names every missing package and the command to install them.
 */
export function ensurePackages(
  reqs: readonly Requirement[],
  log: (line: string) => void = () => undefined,
): void {
  const missing = missingPackages(reqs);
  if (missing.length === 0) return;
  const pkgs = [...new Set(missing.map((r) => r.pkg))];
  const detail = missing.map((r) => `${r.provides} (${r.pkg}: ${r.why})`).join(', ');
  const command = `apt-get install -y ${pkgs.join(' ')}`;
  if (process.getuid?.() !== 0 || !present('apt-get'))
    throw new Error(`missing ${detail}; install with: sudo ${command}`);
  log(`installing ${pkgs.join(', ')} with apt-get (missing: ${detail})`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Test files run in parallel and may install at the same moment: wait for
  // the other apt-get's lock instead of failing on it.
  const lock = ['-o', 'DPkg::Lock::Timeout=600'];
  try {
    execFileSync('apt-get', [...lock, 'update', '-qq'], {
      env,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    execFileSync('apt-get', [...lock, 'install', '-y', '-qq', ...pkgs], {
      env,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  } catch (err) {
    // Another process may have installed them meanwhile (its lock was what failed us).
    if (missingPackages(missing).length > 0)
      throw new Error(`${command} failed: ${(err as Error).message}`);
  }
  const still = missingPackages(missing);
  if (still.length > 0)
    throw new Error(`after ${command}, still missing: ${still.map((r) => r.provides).join(', ')}`);
}
