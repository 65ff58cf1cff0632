// The garbage collectors under test, as supervised processes:
//   kubegc: 2-3 replicas of `kubegc controller` with --leader-elect, as its real service
//           account (deploy/'s RBAC and the guardrails component, test/e2e/sa-overlay);
//   kcm:    one kube-controller-manager running only its garbage collector, as user `kcm-gc`.
// A process that exits is recorded and started again (as a kubelet would);
// the soak attributes each exit to the fault that explains it, if any.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import fs from 'node:fs/promises';
import { controllerArgs, kubegcArgv } from '../../cluster/kubegc-command.ts';
import {
  CONTROLLERS_GC_ONLY,
  logFile,
  startExtraControllerManager,
  type Cluster,
  type ManagedProcess,
} from '../../cluster/controlplane.ts';
import { KUBEGC_SERVICE_ACCOUNT, KUBEGC_USER } from '../../test/support/service-account.ts';
import type { Kube } from './kube.ts';
import { waitUntil } from './kube.ts';
import type { ContenderName } from './schedule.ts';

export interface LogLine {
  msg?: string;
  [field: string]: unknown;
}

/** One lifetime of one GC process. */
export interface Lifetime {
  process: string;
  pid: number;
  startedAt: number;
  /** kubegc: the replica's leader-election identity. */
  identity?: string;
  exit?: { at: number; code: number | null; signal: string | null; lastLines: string[] };
}

export interface LeaseRef {
  namespace: string;
  name: string;
}

/** Where deploy/'s Role lets kubegc's service account keep its Lease. */
export const LEASE: LeaseRef = { namespace: KUBEGC_SERVICE_ACCOUNT.namespace, name: 'kubegc' };

export interface LeaderElectionTiming {
  leaseMs: number;
  renewMs: number;
  retryMs: number;
}

/** kubegc's --min-watch-timeout in the soak (kcm's reflectors have a fixed 5 min and no flag). */
export const SOAK_MIN_WATCH_TIMEOUT_MS = 20_000;

export const DEFAULT_TIMING: LeaderElectionTiming = {
  leaseMs: 8_000,
  renewMs: 6_000,
  retryMs: 1_000,
};

/** Reads a log file from an offset: what a process wrote in its lifetime. */
async function readFrom(file: string, offset: number): Promise<string> {
  const handle = await fs.open(file, 'r').catch(() => undefined);
  if (!handle) return '';
  try {
    const { size } = await handle.stat();
    if (size <= offset) return '';
    const buf = Buffer.alloc(size - offset);
    await handle.read(buf, 0, buf.length, offset);
    return buf.toString('utf8');
  } finally {
    await handle.close();
  }
}

function jsonLines(text: string): LogLine[] {
  const out: LogLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as LogLine);
    } catch {
      /* a partial last line */
    }
  }
  return out;
}

async function fileSize(file: string): Promise<number> {
  return (await fs.stat(file).catch(() => undefined))?.size ?? 0;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resident set size (VmRSS) of a process, in bytes; undefined if it is gone. */
export async function rssBytes(pid: number): Promise<number | undefined> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  const m = status ? /^VmRSS:\s+(\d+)\s+kB/m.exec(status) : null;
  return m?.[1] ? Number(m[1]) * 1024 : undefined;
}

export interface Contender {
  readonly name: ContenderName;
  readonly gcUser: string;
  readonly lifetimes: Lifetime[];
  /** Live GC processes. */
  live(): Lifetime[];
  /** Resolves when the GC collects (kubegc: a leader started its workers; kcm: its monitors synced). */
  ready(timeoutMs: number): Promise<void>;
  /** The process that writes now (kubegc: the Lease holder), if known. */
  writer(): Promise<Lifetime | undefined>;
  /** SIGKILL a process; it is started again after `restartAfterMs`. */
  kill(l: Lifetime, restartAfterMs: number): Promise<void>;
  /** Stops everything (SIGTERM, then SIGKILL) and no longer restarts. */
  stop(): Promise<void>;
}

interface Replica {
  label: string;
  file: string;
  child?: ChildProcess;
  current?: Lifetime;
  offset: number;
  restartAfterMs: number;
}

/** The process labels of `count` kubegc replicas. */
export function kubegcLabels(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `kubegc-r${i}`);
}

/** The process label of the kcm contender. */
export const KCM_LABEL = 'kcm-gc';
/** The user kube-controller-manager's GC runs as in the soak. */
export const KCM_USER = 'kcm-gc';

export class KubegcReplicas implements Contender {
  readonly name = 'kubegc' as const;
  readonly gcUser = KUBEGC_USER;
  readonly lifetimes: Lifetime[] = [];
  private readonly replicas: Replica[] = [];
  private stopping = false;
  private readonly kubeconfig: string | ((label: string) => string);
  private readonly admin: Kube;
  private readonly timing: LeaderElectionTiming;
  private readonly log: (line: string) => void;
  private readonly restarts = new Set<NodeJS.Timeout>();

  /** `kubeconfig`: one for all, or one per replica label (`kubegc-r0`, ...: each through its own proxy). */
  constructor(
    cluster: Cluster,
    kubeconfig: string | ((label: string) => string),
    admin: Kube,
    count: number,
    timing: LeaderElectionTiming,
    log: (line: string) => void,
  ) {
    this.kubeconfig = kubeconfig;
    this.admin = admin;
    this.timing = timing;
    this.log = log;
    for (const label of kubegcLabels(count)) {
      this.replicas.push({
        label,
        file: logFile(cluster.dir, label),
        offset: 0,
        restartAfterMs: 1000,
      });
    }
  }

  async start(): Promise<void> {
    for (const r of this.replicas) await this.spawn(r);
  }

  private async spawn(r: Replica): Promise<void> {
    if (this.stopping) return;
    r.offset = await fileSize(r.file);
    const fd = openSync(r.file, 'a');
    const s = (ms: number): string => `${ms / 1000}s`;
    const child = spawn(
      process.execPath,
      kubegcArgv(
        controllerArgs(
          typeof this.kubeconfig === 'string' ? this.kubeconfig : this.kubeconfig(r.label),
          [
            '--leader-elect',
            '--leader-elect-resource-namespace',
            LEASE.namespace,
            '--leader-elect-resource-name',
            LEASE.name,
            '--leader-elect-lease-duration',
            s(this.timing.leaseMs),
            '--leader-elect-renew-deadline',
            s(this.timing.renewMs),
            '--leader-elect-retry-period',
            s(this.timing.retryMs),
            // Short watch timeouts: normal stream ends (and the reconnects
            // after them) every 20-40 s per resource instead of 5-10 min.
            '--min-watch-timeout',
            s(SOAK_MIN_WATCH_TIMEOUT_MS),
          ],
        ),
      ),
      { stdio: ['ignore', fd, fd] },
    );
    closeSync(fd);
    if (child.pid === undefined) throw new Error(`${r.label} did not start`);
    const life: Lifetime = { process: r.label, pid: child.pid, startedAt: Date.now() };
    r.child = child;
    r.current = life;
    this.lifetimes.push(life);
    child.on('exit', (code, signal) => {
      void (async () => {
        const lines = (await readFrom(r.file, r.offset)).trimEnd().split('\n').slice(-5);
        life.exit = { at: Date.now(), code, signal, lastLines: lines };
        if (r.current === life) r.current = undefined;
        if (this.stopping) return;
        this.log(`${r.label} (pid ${life.pid}) exited: ${signal ?? `code ${code}`}; restarting`);
        const t = setTimeout(() => {
          this.restarts.delete(t);
          void this.spawn(r);
        }, r.restartAfterMs);
        this.restarts.add(t);
        r.restartAfterMs = 1000;
      })();
    });
  }

  live(): Lifetime[] {
    return this.replicas.flatMap((r) => (r.current && !r.current.exit ? [r.current] : []));
  }

  private async linesOf(l: Lifetime): Promise<LogLine[]> {
    const r = this.replicas.find((x) => x.current === l || x.label === l.process);
    if (!r) return [];
    return jsonLines(await readFrom(r.file, r.current === l ? r.offset : 0));
  }

  private async identityOf(l: Lifetime): Promise<string | undefined> {
    if (l.identity) return l.identity;
    for (const line of await this.linesOf(l)) {
      if (typeof line.identity === 'string') {
        l.identity = line.identity;
        break;
      }
    }
    return l.identity;
  }

  async ready(timeoutMs: number): Promise<void> {
    await waitUntil(
      'a kubegc replica to lead and start its workers',
      async () => {
        for (const l of this.live())
          if ((await this.linesOf(l)).some((x) => x.msg === 'garbage collector started'))
            return true;
        return false;
      },
      timeoutMs,
      500,
    );
  }

  async holder(): Promise<string | undefined> {
    const lease = await this.admin
      .request<{ spec?: { holderIdentity?: string } }>(
        'GET',
        `/apis/coordination.k8s.io/v1/namespaces/${LEASE.namespace}/leases/${LEASE.name}`,
      )
      .catch(() => undefined);
    return lease?.spec?.holderIdentity || undefined;
  }

  async writer(): Promise<Lifetime | undefined> {
    const holder = await this.holder();
    if (!holder) return undefined;
    for (const l of this.live()) if ((await this.identityOf(l)) === holder) return l;
    return undefined;
  }

  async kill(l: Lifetime, restartAfterMs: number): Promise<void> {
    const r = this.replicas.find((x) => x.current === l);
    if (!r?.child) return;
    r.restartAfterMs = restartAfterMs;
    const exited = new Promise<void>((res) => r.child?.once('exit', () => res()));
    r.child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.restarts) clearTimeout(t);
    await Promise.all(
      this.replicas.map(async (r) => {
        const child = r.child;
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((res) => child.once('exit', () => res()));
        child.kill('SIGCONT');
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(t);
      }),
    );
  }
}

const KCM_SYNCED = 'all resource monitors have synced';

export class KcmGc implements Contender {
  readonly name = 'kcm' as const;
  readonly gcUser = KCM_USER;
  readonly lifetimes: Lifetime[] = [];
  private readonly cluster: Cluster;
  private readonly kubeconfig: string;
  private readonly log: (line: string) => void;
  private proc?: ManagedProcess;
  private current?: Lifetime;
  private offset = 0;
  private stopping = false;
  private watcher?: NodeJS.Timeout;
  private restarting = false;
  private readonly label = KCM_LABEL;

  constructor(cluster: Cluster, kubeconfig: string, log: (line: string) => void) {
    this.cluster = cluster;
    this.kubeconfig = kubeconfig;
    this.log = log;
  }

  async start(): Promise<void> {
    await this.spawn();
    // Not our child in the Node sense (the control plane module starts it detached): poll for its exit.
    this.watcher = setInterval(() => void this.check(), 1000);
  }

  private async spawn(): Promise<void> {
    const file = logFile(this.cluster.dir, this.label);
    this.offset = await fileSize(file);
    // pflag keeps the last --kubeconfig: the GC runs as its own user.
    this.proc = await startExtraControllerManager(this.cluster, this.label, CONTROLLERS_GC_ONLY, [
      `--kubeconfig=${this.kubeconfig}`,
    ]);
    this.current = { process: this.label, pid: this.proc.pid, startedAt: Date.now() };
    this.lifetimes.push(this.current);
  }

  private async check(): Promise<void> {
    const l = this.current;
    if (!l || l.exit || alive(l.pid) || this.restarting) return;
    const lines = (await readFrom(logFile(this.cluster.dir, this.label), this.offset))
      .trimEnd()
      .split('\n')
      .slice(-5);
    l.exit = { at: Date.now(), code: null, signal: null, lastLines: lines };
    if (this.stopping) return;
    this.log(`${this.label} (pid ${l.pid}) exited; restarting`);
    await this.spawn();
  }

  live(): Lifetime[] {
    return this.current && !this.current.exit && alive(this.current.pid) ? [this.current] : [];
  }

  async ready(timeoutMs: number): Promise<void> {
    const file = logFile(this.cluster.dir, this.label);
    await waitUntil(
      'kube-controller-manager’s garbage collector to sync',
      async () => (await readFrom(file, this.offset)).includes(KCM_SYNCED),
      timeoutMs,
      500,
    );
  }

  async writer(): Promise<Lifetime | undefined> {
    return this.live()[0];
  }

  async kill(l: Lifetime, restartAfterMs: number): Promise<void> {
    if (l !== this.current || l.exit) return;
    this.restarting = true;
    try {
      process.kill(l.pid, 'SIGKILL');
      await waitUntil('the killed kcm GC to exit', () => !alive(l.pid), 10_000, 100);
      l.exit = { at: Date.now(), code: null, signal: 'SIGKILL', lastLines: [] };
      // The time a supervisor would take to start it again.
      await new Promise((r) => setTimeout(r, restartAfterMs));
      if (!this.stopping) await this.spawn();
    } finally {
      this.restarting = false;
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.watcher) clearInterval(this.watcher);
    await this.proc?.stop();
  }
}
