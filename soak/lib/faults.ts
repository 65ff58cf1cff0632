// The faults the soak injects, each logged with its start and end:
//   apiserver-restart   kube-apiserver stopped and started (watches break; sometimes after a compaction)
//   etcd-compaction     etcd compacted at its current revision (old resourceVersions answer 410)
//   gc-kill             SIGKILL of a GC process (the writer, mostly), restarted after a moment
//   leader-stop         the kubegc leader SIGSTOPped for longer than its lease, then resumed
//   squeeze-429         a FlowSchema + PriorityLevelConfiguration that rejects most of the GC user's requests
//   crd-version-flip    the CRD's higher version no longer served (the preferred version flips), then again
//   conversion-webhook  the CRD's conversion set to a webhook on a closed 127.0.0.1 port, then restored
// and, through the TCP proxy between each GC process and the API server (lib/netproxy.ts):
//   net-cut-list        every GC process restarted while its proxy cuts each connection once it
//                       has carried N bytes from the server (start-up LISTs / watch-lists cut mid-stream)
//   net-cut-watch       the long-lived connections (the watches' HTTP/2 sessions) closed
//   net-reset           every connection of the target(s) destroyed with a TCP RST
//   net-delay           latency added to everything forwarded, both ways, for a while
//   net-blackhole       nothing forwarded, both ways, nothing closed, for longer than the HTTP/2
//                       ping timeout; then what was held is delivered, or every connection closed
import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs/promises';
import path from 'node:path';
import { restartApiServer, type Cluster } from '../../cluster/controlplane.ts';
import { FLOWCONTROL_GROUP, FLOWCONTROL_VERSION, squeezeObjects } from '../../test/support/apf.ts';
import type { Contender } from './contenders.ts';
import { waitUntil, type Kube } from './kube.ts';
import { planNetFault, type NetFaultKind, type TcpProxy } from './netproxy.ts';
import type { Prng } from './prng.ts';
import { CRD_GROUP, CRD_NAME } from './resources.ts';
import type { FaultKind, PlannedFault } from './schedule.ts';

export interface FaultRecord {
  kind: FaultKind;
  start: number;
  end: number;
  detail: string;
  error?: string;
  /** PIDs this fault stopped or killed (their exits are explained by it). */
  pids: number[];
  /** Network faults: the connections cut, reset or closed. */
  cuts?: number;
  /** net-delay: the latency added each way, and the processes whose proxies added it. */
  delay?: { ms: number; processes: string[] };
}

export interface FaultEnv {
  cluster: Cluster;
  /** An admin client (system:masters: exempt from API Priority and Fairness). */
  admin: Kube;
  contender: Contender;
  leaseMs: number;
  log: (line: string) => void;
  /** Makes the GC busy (a cascade), so a squeeze meets real traffic. */
  load?: () => Promise<string>;
  /** The TCP proxy of each GC process (by process label), for the network faults. */
  proxies?: Map<string, TcpProxy>;
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const kib = (n: number): string => `${Math.round(n / 1024)} KiB`;

/** A network fault, on the proxies of the processes its plan picks. */
async function netFault(
  kind: NetFaultKind,
  f: PlannedFault,
  env: FaultEnv,
  prng: Prng,
  rec: FaultRecord,
): Promise<string> {
  const proxies = env.proxies ?? new Map<string, TcpProxy>();
  const writer = await env.contender.writer();
  const plan = planNetFault(kind, prng, [...proxies.keys()], writer?.process, f.holdMs);
  const targets = plan.targets.flatMap((l) => {
    const p = proxies.get(l);
    return p ? [p] : [];
  });
  if (targets.length === 0) return 'no proxy to act on';
  const names = targets.map((p) => p.name).join(', ');
  // The processes behind the target proxies (their exits may follow from this fault).
  const behind = env.contender.live().filter((l) => plan.targets.includes(l.process));
  switch (kind) {
    case 'net-cut-list': {
      const bytes = plan.bytes ?? 65_536;
      const windowMs = plan.windowMs ?? 10_000;
      const window = Promise.all(targets.map((p) => p.cutAfter(bytes, windowMs)));
      // Restarted, every process lists (watch-lists) everything through the armed proxies.
      for (const l of behind) rec.pids.push(l.pid);
      await Promise.all(behind.map((l) => env.contender.kill(l, 1_000)));
      const cuts = await window;
      rec.cuts = cuts.reduce((a, b) => a + b, 0);
      const per = targets.map((p, i) => `${p.name} ${cuts[i] ?? 0}`).join(', ');
      return `SIGKILL ${behind.map((l) => `${l.process} (pid ${l.pid})`).join(', ')}, restarted after 1 s; for ${(windowMs / 1000).toFixed(1)} s each connection cut once it carried ${kib(bytes)} from the server: ${cuts.reduce((a, b) => a + b, 0)} cuts (${per})`;
    }
    case 'net-cut-watch': {
      const minAge = plan.minAgeMs ?? 5_000;
      const n = targets.map((p) => p.cut((c) => c.ageMs >= minAge));
      rec.cuts = n.reduce((a, b) => a + b, 0);
      return `closed the connections older than ${(minAge / 1000).toFixed(1)} s of ${names}: ${n.join(', ')}`;
    }
    case 'net-reset': {
      const n = targets.map((p) => p.reset());
      rec.cuts = n.reduce((a, b) => a + b, 0);
      return `reset (RST) every connection of ${names}: ${n.join(', ')}`;
    }
    case 'net-delay': {
      const delay = plan.delayMs ?? 500;
      const windowMs = plan.windowMs ?? 10_000;
      for (const l of behind) rec.pids.push(l.pid);
      for (const p of targets) p.delay = delay;
      rec.delay = { ms: delay, processes: plan.targets.filter((l) => proxies.has(l)) };
      try {
        await pause(windowMs);
      } finally {
        for (const p of targets) p.delay = 0;
      }
      return `${delay} ms added each way on ${names} for ${(windowMs / 1000).toFixed(1)} s`;
    }
    case 'net-blackhole': {
      const windowMs = plan.windowMs ?? 25_000;
      const end = plan.end ?? 'close';
      for (const l of behind) rec.pids.push(l.pid);
      const held = targets.map((p) => p.conns.size);
      for (const p of targets) p.blackhole();
      let n: number[] = [];
      try {
        await pause(windowMs);
      } finally {
        n = targets.map((p) => p.release(end));
      }
      if (end === 'close') rec.cuts = n.reduce((a, b) => a + b, 0);
      const next = await env.contender.writer();
      return `black hole on ${names} (${held.join(', ')} connections held) for ${(windowMs / 1000).toFixed(1)} s, then ${end === 'resume' ? `resumed (${n.join(', ')} connections delivered)` : `closed (${n.join(', ')} connections)`}; writer before ${writer?.process ?? 'unknown'}, after ${next?.process ?? 'unknown'}`;
    }
  }
}

/** POST to etcd's gRPC gateway on 127.0.0.1. */
function etcdPost(port: number, urlPath: string, body: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, method: 'POST', timeout: 5000 },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => {
          if ((res.statusCode ?? 0) >= 300)
            return reject(new Error(`etcd ${urlPath}: ${res.statusCode} ${text}`));
          try {
            resolve(JSON.parse(text) as Record<string, unknown>);
          } catch (err) {
            reject(err as Error);
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('etcd request timeout')));
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

export async function etcdClientPort(cluster: Cluster): Promise<number> {
  const state = JSON.parse(await fs.readFile(path.join(cluster.dir, 'state.json'), 'utf8')) as {
    ports: { etcdClient: number };
  };
  return state.ports.etcdClient;
}

/** etcd's current revision (the header of a range request for one key). */
export async function etcdRevision(port: number): Promise<number> {
  const res = await etcdPost(port, '/v3/kv/range', { key: Buffer.from('\0').toString('base64') });
  const header = res.header as { revision?: string | number } | undefined;
  const rev = Number(header?.revision);
  if (!Number.isFinite(rev) || rev <= 0)
    throw new Error(`etcd gave no revision: ${JSON.stringify(res)}`);
  return rev;
}

async function compact(cluster: Cluster): Promise<number> {
  const port = await etcdClientPort(cluster);
  const rev = await etcdRevision(port);
  await etcdPost(port, '/v3/kv/compaction', { revision: String(rev), physical: true });
  return rev;
}

/** A 127.0.0.1 port nothing listens on (bound and released at once). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() =>
        addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port')),
      );
    });
  });
}

interface Crd {
  metadata: { resourceVersion: string };
  spec: {
    versions: { name: string; served: boolean; storage: boolean }[];
    conversion?: unknown;
  };
  status?: { conditions?: { type: string; status: string }[] };
}

const CRD_PATH = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${CRD_NAME}`;

/** Read-modify-write of the CRD, retried on conflict. */
async function updateCrd(admin: Kube, change: (crd: Crd) => void): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const crd = await admin.request<Crd>('GET', CRD_PATH);
    change(crd);
    const res = await admin.raw('PUT', CRD_PATH, { body: crd });
    if (res.status >= 200 && res.status < 300) break;
    if (res.status !== 409 || attempt >= 5)
      throw new Error(`updating the CRD: ${res.status} ${res.text}`);
  }
  await waitUntil(
    'the CRD to be Established again',
    async () => {
      const crd = await admin.request<Crd>('GET', CRD_PATH);
      return (
        crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ??
        false
      );
    },
    30_000,
  );
}

function setServed(version: string, served: boolean): (crd: Crd) => void {
  return (crd) => {
    for (const v of crd.spec.versions) if (v.name === version) v.served = served;
  };
}

const SQUEEZE = 'soak-squeeze';
const FLOWCONTROL = `/apis/${FLOWCONTROL_GROUP}/${FLOWCONTROL_VERSION}`;

async function squeeze(admin: Kube, user: string): Promise<void> {
  const { priorityLevel, flowSchema } = squeezeObjects({
    name: SQUEEZE,
    nominalConcurrencyShares: 1,
    subjects: [{ kind: 'User', user: { name: user } }],
    // The GC's own traffic; its Lease (coordination.k8s.io) is left alone.
    resourceRules: [
      {
        verbs: ['*'],
        apiGroups: ['', 'apps', 'batch', CRD_GROUP],
        resources: ['*'],
        namespaces: ['*'],
        clusterScope: true,
      },
    ],
  });
  await admin.request('POST', `${FLOWCONTROL}/prioritylevelconfigurations`, {
    body: priorityLevel,
  });
  await admin.request('POST', `${FLOWCONTROL}/flowschemas`, { body: flowSchema });
}

async function unsqueeze(admin: Kube): Promise<void> {
  for (const p of [
    `${FLOWCONTROL}/flowschemas/${SQUEEZE}`,
    `${FLOWCONTROL}/prioritylevelconfigurations/${SQUEEZE}`,
  ]) {
    const res = await admin.raw('DELETE', p);
    if (res.status !== 200 && res.status !== 404)
      throw new Error(`DELETE ${p}: ${res.status} ${res.text}`);
  }
}

/** Retries `fn` while the API server is away (a fault's own undo must not be lost). */
async function persist<T>(what: string, fn: () => Promise<T>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what}: ${(err as Error).message}`);
      await pause(1000);
    }
  }
}

export async function injectFault(
  f: PlannedFault,
  env: FaultEnv,
  prng: Prng,
): Promise<FaultRecord> {
  const rec: FaultRecord = { kind: f.kind, start: Date.now(), end: 0, detail: '', pids: [] };
  env.log(`fault ${f.kind}: start`);
  try {
    switch (f.kind) {
      case 'apiserver-restart': {
        let detail = '';
        if (prng.chance(0.5))
          detail = `compacted etcd at revision ${await compact(env.cluster)}, then `;
        const t0 = Date.now();
        await restartApiServer(env.cluster);
        rec.detail = `${detail}restarted kube-apiserver (ready again after ${((Date.now() - t0) / 1000).toFixed(1)} s)`;
        break;
      }
      case 'etcd-compaction':
        rec.detail = `compacted etcd at revision ${await compact(env.cluster)}`;
        break;
      case 'gc-kill': {
        const live = env.contender.live();
        const target = prng.chance(0.75) ? await env.contender.writer() : prng.pick(live);
        if (!target) {
          rec.detail = 'no live GC process to kill';
          break;
        }
        rec.pids.push(target.pid);
        await env.contender.kill(target, f.holdMs);
        rec.detail = `SIGKILL ${target.process} (pid ${target.pid}${target.identity ? `, ${target.identity}` : ''}), restarted after ${f.holdMs} ms`;
        break;
      }
      case 'leader-stop': {
        const leader = await env.contender.writer();
        if (!leader) {
          rec.detail = 'no leader found to stop';
          break;
        }
        rec.pids.push(leader.pid);
        process.kill(leader.pid, 'SIGSTOP');
        const stopped = Date.now();
        try {
          // Stopped for longer than the lease: a standby must take over meanwhile.
          await pause(f.holdMs);
          await waitUntil(
            'another replica to take the lease',
            async () => {
              const w = await env.contender.writer();
              return w !== undefined && w.pid !== leader.pid;
            },
            60_000,
            500,
          ).catch((err: unknown) => {
            rec.error = (err as Error).message;
          });
        } finally {
          process.kill(leader.pid, 'SIGCONT');
        }
        const next = await env.contender.writer();
        rec.detail = `SIGSTOP ${leader.process} (pid ${leader.pid}) for ${((Date.now() - stopped) / 1000).toFixed(1)} s (lease ${env.leaseMs / 1000} s); lease then held by ${next ? `${next.process} (pid ${next.pid})` : 'nobody known'}`;
        break;
      }
      case 'squeeze-429': {
        await squeeze(env.admin, env.contender.gcUser);
        const t0 = Date.now();
        let load = '';
        try {
          // API Priority and Fairness picks the new configuration up within a moment.
          await pause(1000);
          if (env.load)
            load = await env
              .load()
              .catch((err: unknown) => `load failed: ${(err as Error).message}`);
          const left = f.holdMs - (Date.now() - t0);
          if (left > 0) await pause(left);
        } finally {
          await persist('removing the squeeze', () => unsqueeze(env.admin));
        }
        rec.detail = `FlowSchema + PriorityLevelConfiguration (1 share, Reject) on user ${env.contender.gcUser} for ${((Date.now() - t0) / 1000).toFixed(1)} s${load ? `; ${load}` : ''}`;
        break;
      }
      case 'crd-version-flip':
        await updateCrd(env.admin, setServed('v2', false));
        try {
          await pause(f.holdMs);
        } finally {
          await persist('serving v2 again', () => updateCrd(env.admin, setServed('v2', true)));
        }
        rec.detail = `v2 of ${CRD_NAME} not served (preferred version v1) for ${(f.holdMs / 1000).toFixed(1)} s`;
        break;
      case 'conversion-webhook': {
        const port = await closedPort();
        await updateCrd(env.admin, (crd) => {
          crd.spec.conversion = {
            strategy: 'Webhook',
            webhook: {
              clientConfig: { url: `https://127.0.0.1:${port}/convert` },
              conversionReviewVersions: ['v1'],
            },
          };
        });
        try {
          await pause(f.holdMs);
        } finally {
          await persist('restoring the conversion', () =>
            updateCrd(env.admin, (crd) => {
              crd.spec.conversion = { strategy: 'None' };
            }),
          );
        }
        rec.detail = `conversion webhook https://127.0.0.1:${port}/convert (closed) for ${(f.holdMs / 1000).toFixed(1)} s`;
        break;
      }
      case 'net-cut-list':
      case 'net-cut-watch':
      case 'net-reset':
      case 'net-delay':
      case 'net-blackhole':
        rec.detail = await netFault(f.kind, f, env, prng, rec);
        break;
    }
  } catch (err) {
    rec.error = (err as Error).message;
  }
  rec.end = Date.now();
  env.log(
    `fault ${f.kind}: end after ${((rec.end - rec.start) / 1000).toFixed(1)} s: ${rec.detail}${rec.error ? ` (error: ${rec.error})` : ''}`,
  );
  return rec;
}
