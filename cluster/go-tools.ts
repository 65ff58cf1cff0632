// The Go tools of the tests, each built from one pinned release by
// cluster/build-go-tool.sh into ~/.cache/kubegc/<tool>/<version>/
// (KUBEGC_CACHE_DIR), where later calls find it and the script returns at once:
// helm (the chart's tests, the in-cluster e2e and `npm run cluster`) and krew
// (the kubectl plugin's install test). Runs directly under Node's type
// stripping, so it uses only erasable TypeScript syntax.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BUILD_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'build-go-tool.sh');

export class GoToolBuildError extends Error {}

/** A tool, and the binary its build leaves in the directory the script prints. */
const BINARIES = { helm: 'helm', krew: 'kubectl-krew' } as const;
export type GoTool = keyof typeof BINARIES;

/**
 * PATH for the build: Go is a stated prerequisite, but machines (CI among them)
 * may keep it outside PATH, where .ci/run looks for it too.
 */
export function buildPath(current = process.env.PATH ?? ''): string {
  const extra = ['/usr/local/go/bin', path.join(os.homedir(), 'go', 'bin')];
  const parts = current.split(path.delimiter).filter((p) => p !== '');
  return [...parts, ...extra.filter((p) => !parts.includes(p))].join(path.delimiter);
}

const pending = new Map<GoTool, Promise<string>>();

/**
 * The path of the tool's binary, built first when the cache lacks it (helm: a
 * few minutes on 2 cores, once; krew: under a minute). The build's progress
 * goes to our stderr. One build per tool and process however many callers ask.
 */
export function goToolBinary(tool: GoTool): Promise<string> {
  let p = pending.get(tool);
  if (!p) {
    p = build(tool).catch((e: unknown) => {
      // A failed build is not cached: the next caller tries again.
      pending.delete(tool);
      throw e;
    });
    pending.set(tool, p);
  }
  return p;
}

/** The helm client. */
export const helmBinary = (): Promise<string> => goToolBinary('helm');
/** krew, as `kubectl-krew`: with its directory on PATH, `kubectl krew` runs it. */
export const krewBinary = (): Promise<string> => goToolBinary('krew');

function build(tool: GoTool): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [BUILD_SCRIPT, tool], {
      env: { ...process.env, PATH: buildPath() },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      // build-go-tool.sh prints the directory that holds the binary as its last line.
      const dir = out.trim().split('\n').at(-1) ?? '';
      const bin = path.join(dir, BINARIES[tool]);
      if (code !== 0) {
        reject(
          new GoToolBuildError(
            `building ${tool} failed (cluster/build-go-tool.sh ${tool} exit ${code}); its output is above`,
          ),
        );
      } else if (dir === '' || !existsSync(bin)) {
        reject(
          new GoToolBuildError(
            `cluster/build-go-tool.sh ${tool} printed "${dir}", which holds no ${BINARIES[tool]}`,
          ),
        );
      } else {
        resolve(bin);
      }
    });
  });
}
