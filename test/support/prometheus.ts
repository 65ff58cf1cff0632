// A real Prometheus (Debian's package) for the e2e tests: started on a free
// loopback port with a scrape config of the test's, queried over its HTTP API,
// and failing the waiting test at once if it cannot start or exits.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface Prometheus {
  /** Its working directory (config, data, files a scrape config may name). */
  dir: string;
  /** The first sample of an instant query, or undefined when there is none. */
  query(q: string): Promise<number | undefined>;
  /** How many series an instant query returns, and its error (a bad query, or no answer). */
  series(q: string): Promise<{ series: number; error?: string }>;
  /** Rejects when Prometheus fails to start or exits: race waits against it. */
  down: Promise<never>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() =>
        addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port')),
      );
    });
  });
}

/** `config(dir)` returns the whole prometheus.yml; it may write files into `dir` first. */
export async function startPrometheus(
  config: (dir: string) => Promise<string> | string,
): Promise<Prometheus> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-prom-'));
  const port = await freePort();
  const file = path.join(dir, 'prometheus.yml');
  await fs.writeFile(file, await config(dir));
  const proc = spawn(
    'prometheus',
    [
      `--config.file=${file}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  );
  let stopping = false;
  const down = new Promise<never>((_, reject) => {
    proc.on('error', (err) => reject(new Error(`prometheus did not start: ${err.message}`)));
    proc.on('exit', (code) => {
      if (!stopping) reject(new Error(`prometheus exited with code ${code}`));
    });
  });
  down.catch(() => undefined);
  return {
    dir,
    down,
    async query(q) {
      const res = await fetch(
        `http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`,
      );
      const body = (await res.json()) as { data?: { result?: { value: [number, string] }[] } };
      const v = body.data?.result?.[0]?.value[1];
      return v === undefined ? undefined : Number(v);
    },
    async series(q) {
      try {
        const res = await fetch(
          `http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`,
        );
        const body = (await res.json()) as {
          status?: string;
          error?: string;
          data?: { resultType?: string; result?: unknown };
        };
        if (body.status !== 'success')
          return { series: 0, error: body.error ?? `HTTP ${res.status}` };
        const result = body.data?.result;
        // A vector or matrix is a list of series; a scalar or string is one value.
        if (Array.isArray(result)) return { series: result.length };
        return { series: result === undefined ? 0 : 1 };
      } catch (err) {
        return { series: 0, error: err instanceof Error ? err.message : String(err) };
      }
    },
    async stop() {
      stopping = true;
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await exited;
      }
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}
