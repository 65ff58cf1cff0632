// Runs `kubegc` as a child process from the TypeScript sources (Node's type
// stripping: no build step), collecting its JSON log lines for assertions.
import { spawn, type ChildProcess } from 'node:child_process';
import { controllerArgs, kubegcArgv } from '../../cluster/kubegc-command.ts';
import type { Cluster } from '../../cluster/controlplane.ts';
import { serviceAccountKubeconfig } from './service-account.ts';
import { afterFile } from './e2e.ts';

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface KubegcProcess {
  child: ChildProcess;
  lines: LogLine[];
  /** Output that was not a JSON log line (stack traces, usage errors). */
  raw: string[];
  /** Resolves with the first log line matching, or rejects after the timeout. */
  waitForLog(what: string, match: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /**
   * Resolves once `check` holds over all lines logged so far. A log line reaches the test
   * through a pipe, after the API change it reports, so a test that has seen an object go
   * must still wait (with a deadline) for the line saying who deleted it.
   */
  waitForLines(
    what: string,
    check: (lines: LogLine[]) => boolean,
    timeoutMs?: number,
  ): Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
  kill(): Promise<void>;
}

export function runKubegc(args: string[], env: NodeJS.ProcessEnv = process.env): KubegcProcess {
  const child = spawn(process.execPath, kubegcArgv(args), {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  const raw: string[] = [];
  const waiters: { match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  const onText = (buf: Buffer | string, state: { rest: string }): void => {
    state.rest += buf.toString();
    let nl: number;
    while ((nl = state.rest.indexOf('\n')) !== -1) {
      const text = state.rest.slice(0, nl);
      state.rest = state.rest.slice(nl + 1);
      let line: LogLine | undefined;
      try {
        const parsed = JSON.parse(text) as unknown;
        if (parsed && typeof parsed === 'object' && 'msg' in parsed) line = parsed as LogLine;
      } catch {
        /* not JSON */
      }
      if (!line) {
        raw.push(text);
        continue;
      }
      lines.push(line);
      for (let i = waiters.length - 1; i >= 0; i--) {
        const w = waiters[i];
        if (w?.match(line)) {
          waiters.splice(i, 1);
          w.resolve(line);
        }
      }
    }
  };
  const out = { rest: '' };
  const err = { rest: '' };
  child.stdout?.on('data', (b: Buffer) => onText(b, out));
  child.stderr?.on('data', (b: Buffer) => onText(b, err));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // 'close', not 'exit': it fires after stdout and stderr are drained, so every line is in.
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  const proc: KubegcProcess = {
    child,
    lines,
    raw,
    exited,
    waitForLog(what, match, timeoutMs = 60_000) {
      const seen = lines.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => {
          reject(
            new Error(
              `timed out waiting for kubegc to log ${what}; last lines:\n${lines
                .slice(-10)
                .map((l) => JSON.stringify(l))
                .join('\n')}\n${raw.slice(-10).join('\n')}`,
            ),
          );
        }, timeoutMs);
        waiters.push({
          match,
          resolve: (l) => {
            clearTimeout(t);
            resolve(l);
          },
        });
        void exited.then(({ code, signal }) => {
          clearTimeout(t);
          reject(
            new Error(
              `kubegc exited (${code ?? signal}) before logging ${what}:\n${raw.slice(-20).join('\n')}`,
            ),
          );
        });
      });
    },
    async waitForLines(what, check, timeoutMs = 15_000) {
      if (check(lines)) return;
      await proc.waitForLog(what, () => check(lines), timeoutMs);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
  return proc;
}

export interface StartOptions {
  /**
   * The credentials kubegc runs with. Default: its real service account
   * (deploy/'s RBAC, the guardrails component; test/support/service-account.ts).
   * A test that passes anything else (`cluster.kubeconfig`, the admin) says why.
   */
  kubeconfig?: string;
}

/** Starts `kubegc controller` on the cluster and waits until its workers run. */
export async function startController(
  cluster: Cluster,
  extra: string[] = [],
  opts: StartOptions = {},
): Promise<KubegcProcess> {
  const kubeconfig = opts.kubeconfig ?? (await serviceAccountKubeconfig(cluster));
  // Ephemeral ports: several kubegc processes may run at once (leader election tests).
  const proc = runKubegc(controllerArgs(kubeconfig, ['--discovery-period', '5s', ...extra]));
  await proc.waitForLog(
    '"garbage collector started"',
    (l) => l.msg === 'garbage collector started',
  );
  return proc;
}

/** startController for the whole test file: stopped after it. */
export async function kubegcController(
  cluster: Cluster,
  extra: string[] = [],
  opts: StartOptions = {},
): Promise<KubegcProcess> {
  const proc = await startController(cluster, extra, opts);
  afterFile(() => proc.stop());
  return proc;
}

/** Where a started kubegc serves /metrics (and /debug/graph) and its health probes. */
export function addresses(proc: KubegcProcess): {
  metrics: string;
  health: string;
  scheme: 'https' | 'http';
} {
  const l = proc.lines.find((x) => x.msg === 'kubegc controller starting');
  if (!l) throw new Error('kubegc has not logged its start line yet');
  return {
    metrics: String(l.metricsAddress),
    health: String(l.healthAddress),
    scheme: l.metricsScheme === 'http' ? 'http' : 'https',
  };
}
