// The helm client of the chart's tests, the in-cluster e2e and `npm run cluster`:
// built from one pinned release of helm.sh/helm/v4 by cluster/build-helm.sh
// into ~/.cache/kubegc/helm/<version>/ (KUBEGC_CACHE_DIR), where later calls find
// it and build-helm.sh returns at once. Runs directly under Node's type
// stripping, so it uses only erasable TypeScript syntax.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BUILD_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'build-helm.sh');

export class HelmBuildError extends Error {}

/**
 * PATH for the build: Go is a stated prerequisite, but machines (CI among them)
 * may keep it outside PATH, where .ci/run looks for it too.
 */
export function buildPath(current = process.env.PATH ?? ''): string {
  const extra = ['/usr/local/go/bin', path.join(os.homedir(), 'go', 'bin')];
  const parts = current.split(path.delimiter).filter((p) => p !== '');
  return [...parts, ...extra.filter((p) => !parts.includes(p))].join(path.delimiter);
}

let pending: Promise<string> | undefined;

/**
 * The path of the helm binary, built first when the cache lacks it (a few
 * minutes on 2 cores, once). The build's progress goes to our stderr. One
 * build per process however many callers ask.
 */
export function helmBinary(): Promise<string> {
  pending ??= build().catch((e: unknown) => {
    // A failed build is not cached: the next caller tries again.
    pending = undefined;
    throw e;
  });
  return pending;
}

function build(): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [BUILD_SCRIPT], {
      env: { ...process.env, PATH: buildPath() },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      // build-helm.sh prints the directory that holds `helm` as its last line.
      const dir = out.trim().split('\n').at(-1) ?? '';
      const bin = path.join(dir, 'helm');
      if (code !== 0) {
        reject(
          new HelmBuildError(
            `building helm failed (cluster/build-helm.sh exit ${code}); its output is above`,
          ),
        );
      } else if (dir === '' || !existsSync(bin)) {
        reject(new HelmBuildError(`cluster/build-helm.sh printed "${dir}", which holds no helm`));
      } else {
        resolve(bin);
      }
    });
  });
}
