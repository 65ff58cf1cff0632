// One soak: for each contender, a fresh control plane with an audit log, the
// GC under test, the seeded workload and faults on the planned schedule, and
// the oracle over the soak's own watch history and the audit log.
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  REPO_ROOT,
  down,
  grantClusterAdmin,
  up,
  userKubeconfig,
  type Cluster,
} from '../../cluster/controlplane.ts';
import {
  applyKubegcServiceAccount,
  KUBEGC_SERVICE_ACCOUNT,
  KUBEGC_USER,
  mintServiceAccountKubeconfig,
} from '../../test/support/service-account.ts';
import { crdManifest } from '../../test/support/crd.ts';
import { auditTimeMs, readAuditLog, WRITE_VERBS, type AuditEvent } from './audit.ts';
import {
  DEFAULT_TIMING,
  KCM_LABEL,
  KCM_USER,
  KcmGc,
  kubegcLabels,
  KubegcReplicas,
  LEASE,
  rssBytes,
  type Contender,
  type LeaderElectionTiming,
  type Lifetime,
} from './contenders.ts';
import { AggregatedOwners, grantAggregatedGet } from './aggregated.ts';
import { etcdClientPort, etcdRevision, injectFault, type FaultRecord } from './faults.ts';
import { History, Recorder, RevisionClock, type RecorderStats } from './history.ts';
import { Kube, waitUntil, type KubeObject } from './kube.ts';
import { TcpProxy } from './netproxy.ts';
import {
  checkI1,
  checkI2,
  checkI3,
  checkI5,
  collections,
  gcFinalizersLeft,
  oneReadDeletes,
  resolveDeletes,
  uncollected,
  type Collection,
  type DeleteCall,
  type ProcessExit,
  type ReadCall,
  type RssSample,
  type Violation,
} from './oracle.ts';
import { Prng } from './prng.ts';
import { CRD_GROUP, RESOURCES, SOAK_LABEL } from './resources.ts';
import { ensureGadgetCrd } from './shapes.ts';
import { DenyingWebhook } from './webhook.ts';
import { planSchedule, type ContenderName, type FaultKind, type Schedule } from './schedule.ts';
import { kubegcIdentityFromUserAgent, leaseTenures, writesOutsideTenure } from './tenure.ts';
import { Workload } from './workload.ts';

export const SOAK_NAMESPACES = ['soak-a', 'soak-b', 'soak-c'];
/** After the workload stops, every object whose owners are gone must be gone within this (I2). */
export const QUIESCENCE_MS = 60_000;

export interface SoakOptions {
  durationMs: number;
  seed: number;
  contenders: ContenderName[];
  /** The control plane directory; a fresh control plane per contender. */
  dir: string;
  /** kubegc replicas (2-3). */
  replicas?: number;
  /** Exactly these faults (default: every kind, cycled). */
  faults?: FaultKind[];
  quietMs?: number;
  /** One fault per slot of this length inside a work phase (default 30 s). */
  faultSlotMs?: number;
  actors?: number;
  /** The workload's request rate limit. */
  qps?: number;
  maxObjects?: number;
  timing?: LeaderElectionTiming;
  keepCluster?: boolean;
  /** Write the history, the clock and the resolved deletes here (`-<contender>.json` appended). */
  dumpFile?: string;
  log?: (line: string) => void;
}

export interface ContenderResult {
  contender: ContenderName;
  gcUser: string;
  seed: number;
  durationMs: number;
  startedAt: number;
  endedAt: number;
  replicas: number;
  schedule: Schedule;
  ops: Record<string, number>;
  scenarios: Record<string, number>;
  workloadErrors: Record<string, number>;
  workloadErrorSamples: Record<string, string>;
  faults: FaultRecord[];
  /** 429 answers to the GC user's writes (the audit log records writes only). */
  throttledWrites: number;
  gcDeletes: {
    total: number;
    byResource: Record<string, number>;
    byPolicy: Record<string, number>;
    failed: Record<string, number>;
  };
  gcPatches: number;
  resolution: Record<string, number>;
  violations: Violation[];
  /** GC DELETEs one read old (oracle.ts oneReadDeletes): not violations, listed. */
  excused: { object: string; auditID: string; reason: string }[];
  collections: { count: number; medianMs: number | undefined; slowest: Collection | undefined };
  rss: RssSample[];
  lifetimes: Lifetime[];
  exits: ProcessExit[];
  watch: RecorderStats;
  objectsSeen: number;
  /** ms from the workload's stop until nothing was left to collect (undefined: not within the limit). */
  quiescenceMs: number | undefined;
  auditEvents: number;
}

export interface SoakResult {
  results: ContenderResult[];
  /** Any I1–I4 violation by kubegc. */
  failed: boolean;
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const tally = (m: Map<string, number>): Record<string, number> => Object.fromEntries([...m].sort());

// Widgets are stored in v1 and served in v1 and v2 (v2 preferred unless a fault takes it away).
const CRD = crdManifest({ group: CRD_GROUP, plural: 'widgets', kind: 'Widget' }, ['v1', 'v2']);

async function setUp(admin: Kube): Promise<void> {
  for (const ns of [...SOAK_NAMESPACES, LEASE.namespace]) {
    const res = await admin.raw('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
    if (res.status !== 201 && res.status !== 409)
      throw new Error(`namespace ${ns}: ${res.status} ${res.text}`);
  }
  const res = await admin.raw('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
    body: CRD,
  });
  if (res.status !== 201 && res.status !== 409) throw new Error(`CRD: ${res.status} ${res.text}`);
  await waitUntil(
    'the widgets CRD to be served',
    async () =>
      (await admin.raw('GET', `/apis/${CRD_GROUP}/v2/namespaces/soak-a/widgets`)).status === 200,
    60_000,
  );
  // The Gadgets' CRD, which the workload deletes and creates again (shapes.ts).
  await ensureGadgetCrd(admin, 60_000);
}

/** A get, or a list of one name (the API server names it from `fieldSelector=metadata.name=`). */
function toReadCall(e: AuditEvent): ReadCall | undefined {
  const o = e.objectRef;
  if ((e.verb !== 'get' && e.verb !== 'list') || !o?.resource || o.subresource || !o.name)
    return undefined;
  return {
    user: e.user.username,
    resource: o.resource,
    group: o.apiGroup ?? '',
    namespace: o.namespace ?? '',
    name: o.name,
    code: e.responseStatus?.code ?? 0,
    received: auditTimeMs(e.requestReceivedTimestamp),
    completed: auditTimeMs(e.stageTimestamp),
  };
}

function toDeleteCall(e: AuditEvent): DeleteCall | undefined {
  const o = e.objectRef;
  if (e.verb !== 'delete' || !o?.resource || o.subresource || !o.name) return undefined;
  const body = (e.requestObject ?? {}) as {
    preconditions?: { uid?: string };
    propagationPolicy?: string;
    orphanDependents?: boolean;
  };
  return {
    auditID: e.auditID,
    user: e.user.username,
    userAgent: e.userAgent,
    resource: o.resource,
    group: o.apiGroup ?? '',
    namespace: o.namespace ?? '',
    name: o.name,
    uid: body.preconditions?.uid || undefined,
    policy:
      body.propagationPolicy ??
      (body.orphanDependents === undefined
        ? undefined
        : body.orphanDependents
          ? 'Orphan'
          : 'Background'),
    code: e.responseStatus?.code ?? 0,
    received: auditTimeMs(e.requestReceivedTimestamp),
    completed: auditTimeMs(e.stageTimestamp),
  };
}

/** Which injected fault explains a process exit, if any. */
function causeOf(
  exit: { at: number; pid: number },
  faults: FaultRecord[],
  leaseMs: number,
): string | undefined {
  // The fault that killed or stopped this very process (a stopped leader exits once
  // resumed, when it finds its lease gone), else an apiserver restart around the exit.
  const own = faults.find(
    (f) =>
      f.pids.includes(exit.pid) &&
      exit.at >= f.start &&
      (f.kind === 'gc-kill' || f.kind === 'leader-stop' || f.kind === 'net-cut-list'),
  );
  if (own) return own.kind;
  // A replica cut off from the API server (black hole, delay) loses its lease and exits
  // (after draining its requests, which may wait for the request timeout, 30 s).
  const net = faults.find(
    (f) =>
      f.pids.includes(exit.pid) &&
      (f.kind === 'net-blackhole' || f.kind === 'net-delay') &&
      exit.at >= f.start &&
      exit.at <= f.end + leaseMs + 40_000,
  );
  if (net) return net.kind;
  return faults.find(
    (f) =>
      f.kind === 'apiserver-restart' && exit.at >= f.start && exit.at <= f.end + leaseMs + 10_000,
  )?.kind;
}

async function runContender(
  name: ContenderName,
  o: SoakOptions,
  log: (l: string) => void,
): Promise<ContenderResult> {
  const dir = path.resolve(REPO_ROOT, o.dir);
  const timing = o.timing ?? DEFAULT_TIMING;
  const replicas = name === 'kubegc' ? (o.replicas ?? 3) : 1;
  const quietMs = o.quietMs ?? 30_000;
  const schedule = planSchedule({
    durationMs: o.durationMs,
    seed: o.seed,
    contender: name,
    faults: o.faults?.filter((k) => name === 'kubegc' || k !== 'leader-stop'),
    quietMs,
    faultSlotMs: o.faultSlotMs,
    leaseDurationMs: timing.leaseMs,
  });
  log(`${name}: a fresh control plane in ${dir}`);
  await down(dir);
  // down() removes the PKI and the data but not users/ (userKubeconfig reuses what it finds
  // there) nor logs/ (the audit log would mix runs): start clean, keeping the
  // previous contender's logs in logs-previous/ (with `--contender both`, kubegc's
  // logs would otherwise be gone by the end of the run).
  await rm(path.join(dir, 'users'), { recursive: true, force: true });
  await rm(path.join(dir, 'logs-previous'), { recursive: true, force: true });
  await rename(path.join(dir, 'logs'), path.join(dir, 'logs-previous')).catch(
    (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    },
  );
  // The GC users' reads are logged too: the oracle times each read of an owner (oneReadDeletes).
  const cluster: Cluster = await up({
    dir,
    audit: true,
    auditReadsOf: [KUBEGC_USER, KCM_USER],
    log: (l) => log(`control plane: ${l}`),
  });
  if (!cluster.auditLog) throw new Error('the control plane has no audit log');
  const cleanups: (() => Promise<void> | void)[] = [];
  try {
    const workloadUser = 'soak-workload';
    const workKc = await userKubeconfig(cluster, workloadUser);
    await grantClusterAdmin(cluster, workloadUser);
    // kubegc as its real service account, under deploy/'s RBAC and the guardrails;
    // kube-controller-manager's GC as a cluster-admin user of its own.
    let gcUser: string;
    let gcKc: string;
    if (name === 'kubegc') {
      await applyKubegcServiceAccount(cluster, (l) => log(`service account: ${l}`));
      gcUser = KUBEGC_USER;
      // Valid through the run, the quiet phase and the checks.
      const seconds = Math.ceil(o.durationMs / 1000) + 2 * 3600;
      gcKc = await mintServiceAccountKubeconfig(cluster, KUBEGC_SERVICE_ACCOUNT, seconds);
    } else {
      gcUser = KCM_USER;
      gcKc = await userKubeconfig(cluster, gcUser);
      await grantClusterAdmin(cluster, gcUser);
    }
    // Each GC process talks to the API server through a TCP proxy of its own on 127.0.0.1
    // (the network faults); its kubeconfig names the proxy (https://127.0.0.1:<port>, which the
    // API server's certificate covers: IP SAN 127.0.0.1).
    const apiPort = Number(new URL(cluster.server).port);
    const proxies = new Map<string, TcpProxy>();
    const proxied = new Map<string, string>();
    const gcConfig = JSON.parse(await readFile(gcKc, 'utf8')) as {
      clusters: { cluster: { server: string } }[];
    };
    for (const label of name === 'kubegc' ? kubegcLabels(replicas) : [KCM_LABEL]) {
      const proxy = new TcpProxy(label, { host: '127.0.0.1', port: apiPort });
      await proxy.listen();
      proxies.set(label, proxy);
      cleanups.push(() => proxy.close());
      for (const c of gcConfig.clusters) c.cluster.server = proxy.url;
      const file = path.join(path.dirname(gcKc), `${label}.via-proxy.kubeconfig`);
      await writeFile(file, JSON.stringify(gcConfig, null, 2), { mode: 0o600 });
      proxied.set(label, file);
      log(`${name}: ${label} through the proxy 127.0.0.1:${proxy.port} → 127.0.0.1:${apiPort}`);
    }
    const kubeconfigOf = (label: string): string => proxied.get(label) ?? gcKc;
    const admin = Kube.fromKubeconfig(cluster.kubeconfig, {
      qps: 0,
      burst: 1,
      userAgent: 'kubegc-soak/admin',
    });
    const work = Kube.fromKubeconfig(workKc, {
      qps: o.qps ?? 15,
      burst: 20,
      userAgent: 'kubegc-soak/workload',
    });
    const watcher = Kube.fromKubeconfig(workKc, {
      qps: 0,
      burst: 1,
      userAgent: 'kubegc-soak/history',
    });
    cleanups.push(
      () => admin.close(),
      () => work.close(),
      () => watcher.close(),
    );
    await setUp(admin);
    // Some of the GC's writes refused (404 naming the object, 409, 429, 500), seeded.
    const webhook = new DenyingWebhook(new Prng(o.seed, `webhook/${name}`), [gcUser]);
    await webhook.start(admin);
    cleanups.push(() => webhook.stop(admin));

    // The soak's namespaces, and the cluster-scoped objects the workload made (its label: the
    // cluster's own ClusterRoles are none of its business).
    const history = new History(
      (obj: KubeObject) =>
        SOAK_NAMESPACES.includes(obj.metadata.namespace ?? '') ||
        (obj.metadata.namespace === undefined && obj.metadata.labels?.[SOAK_LABEL] === 'true'),
    );
    const clock = new RevisionClock();
    const recorder = new Recorder(watcher, RESOURCES, history, clock, (l) => log(`history: ${l}`));
    recorder.start();
    let recorderStopped = false;
    cleanups.push(async () => {
      if (!recorderStopped) await recorder.stop().catch(() => undefined);
    });
    await waitUntil('the soak’s watches to list', () => recorder.ready, 60_000);

    // The clock: etcd's revision every 500 ms, with the times around each read.
    const etcdPort = await etcdClientPort(cluster);
    let probing = true;
    const prober = (async () => {
      while (probing) {
        const sent = Date.now();
        const rev = await etcdRevision(etcdPort).catch(() => undefined);
        if (rev !== undefined) clock.probe(sent, Date.now(), rev);
        await pause(500);
      }
    })();
    cleanups.push(async () => {
      probing = false;
      await prober;
    });

    // Owners served by an aggregated API of the soak's own, which refuses field selectors: kubegc
    // then reads them by GET, which deploy/'s ClusterRole does not grant (docs/security.md says
    // to grant it for such a resource; kcm-gc is cluster-admin). Their history is written by the
    // soak itself, in etcd revisions (aggregated.ts), bookmarked every 2 s.
    if (name === 'kubegc') await grantAggregatedGet(admin, KUBEGC_SERVICE_ACCOUNT);
    const aggregated = await AggregatedOwners.start({
      cluster,
      history,
      clock,
      revision: () => etcdRevision(etcdPort),
      log: (l) => log(`${name}: aggregated API: ${l}`),
    });
    cleanups.push(() => aggregated.close());
    let bookmarking = true;
    const bookmarker = (async () => {
      while (bookmarking) {
        await aggregated.bookmark().catch(() => undefined);
        await pause(2000);
      }
    })();
    const stopBookmarks = async (): Promise<void> => {
      bookmarking = false;
      await bookmarker;
    };
    cleanups.push(stopBookmarks);

    const contender: Contender =
      name === 'kubegc'
        ? new KubegcReplicas(cluster, kubeconfigOf, admin, replicas, timing, (l) =>
            log(`${name}: ${l}`),
          )
        : new KcmGc(cluster, kubeconfigOf(KCM_LABEL), (l) => log(`${name}: ${l}`));
    await (contender as KubegcReplicas | KcmGc).start();
    let contenderStopped = false;
    cleanups.push(async () => {
      if (!contenderStopped) await contender.stop();
    });
    await contender.ready(180_000);
    log(
      `${name}: ready (${contender.live().length} process${contender.live().length > 1 ? 'es' : ''})`,
    );

    const prng = new Prng(o.seed, 'workload'); // the same choices for every contender
    const workload = new Workload({
      kube: work,
      history,
      clock,
      prng,
      namespaces: SOAK_NAMESPACES,
      actors: o.actors ?? 3,
      maxObjects: o.maxObjects ?? 400,
      log,
      aggregated,
    });
    const faults: FaultRecord[] = [];
    const rss: RssSample[] = [];
    const startedAt = Date.now();
    let stoppedAt = 0;
    let quiescentAt: number | undefined;
    let quiescenceWatch: Promise<void> | undefined;
    const faultPrng = new Prng(o.seed, `faults/${name}`);
    const lastWork = Math.max(
      ...schedule.phases.filter((p) => p.kind === 'work').map((p) => p.index),
    );

    for (const phase of schedule.phases) {
      if (phase.kind === 'work') {
        const start = Date.now();
        log(
          `${name}: work phase ${phase.index + 1} (${Math.round(phase.durationMs / 1000)} s, ${history.live().length} live objects)`,
        );
        const planned = schedule.faults.filter((f) => f.phase === phase.index);
        const faultRun = (async () => {
          for (const f of planned) {
            const wait = start + f.offsetMs - Date.now();
            if (wait > 0) await pause(wait); // the planned instant
            faults.push(
              await injectFault(
                f,
                {
                  cluster,
                  admin,
                  contender,
                  leaseMs: timing.leaseMs,
                  proxies,
                  log: (l) => log(`${name}: ${l}`),
                  load: () =>
                    workload.burst(faultPrng.fork(`burst-${faults.length}`), 'soak-b', 40),
                },
                faultPrng.fork(`${faults.length}`),
              ),
            );
          }
        })();
        await Promise.all([workload.run(start + phase.durationMs, phase.index), faultRun]);
        if (phase.index === lastWork) {
          // A flap cut short (a fault) must not leave the Gadgets' kind away for good: their
          // dependents would wait for it (upstream's too).
          await ensureGadgetCrd(admin).catch((err: unknown) =>
            log(`${name}: the Gadget CRD is not back: ${(err as Error).message}`),
          );
          // Likewise the AggWidgets' group, and any AggWidget recorded deleted whose delete failed.
          await aggregated
            .ensureBack()
            .catch((err: unknown) =>
              log(`${name}: the aggregated API is not back: ${(err as Error).message}`),
            );
          stoppedAt = Date.now();
          log(
            `${name}: workload stopped; waiting for quiescence (at most ${QUIESCENCE_MS / 1000} s)`,
          );
          quiescenceWatch = (async () => {
            while (Date.now() < stoppedAt + QUIESCENCE_MS) {
              if (uncollected(history).length === 0 && gcFinalizersLeft(history).length === 0) {
                quiescentAt = Date.now();
                return;
              }
              await pause(500);
            }
          })();
        }
      } else {
        log(`${name}: quiet phase ${phase.index + 1} (${Math.round(phase.durationMs / 1000)} s)`);
        await pause(phase.durationMs); // the planned quiet period
        for (const l of contender.live()) {
          const bytes = await rssBytes(l.pid);
          if (bytes !== undefined)
            rss.push({
              process: l.process,
              pid: l.pid,
              quiet: phase.index,
              at: Date.now(),
              rssBytes: bytes,
            });
        }
        log(
          `${name}: RSS ${rss
            .filter((s) => s.quiet === phase.index)
            .map((s) => `${s.process} ${(s.rssBytes / 1048576).toFixed(0)} MiB`)
            .join(', ')}`,
        );
      }
    }
    await quiescenceWatch;
    const checkedAt = Date.now();
    const stopAt = Date.now();
    recorderStopped = true;
    await recorder.stop();
    contenderStopped = true;
    await contender.stop();
    // Nothing writes AggWidgets any more: their recorded states hold through the GC's last write.
    await stopBookmarks();
    await aggregated.bookmark();
    probing = false;
    await prober;
    const endedAt = Date.now();

    // The oracle.
    const events = await readAuditLog(cluster.auditLog);
    const calls = events
      .map(toDeleteCall)
      .filter((c): c is DeleteCall => c !== undefined && SOAK_NAMESPACES.includes(c.namespace));
    const gcUsers = new Set([gcUser]);
    const resolved = resolveDeletes(history, clock, calls);
    const reads = events
      .map(toReadCall)
      .filter((c): c is ReadCall => c !== undefined && SOAK_NAMESPACES.includes(c.namespace));
    const excused = oneReadDeletes(history, clock, resolved, reads, gcUsers, {
      delays: faults.flatMap((f) =>
        f.delay
          ? [{ start: f.start, end: f.end, ms: f.delay.ms, processes: f.delay.processes }]
          : [],
      ),
      processOf: (ua) => {
        const id = kubegcIdentityFromUserAgent(ua);
        return id === undefined
          ? undefined
          : contender.lifetimes.find((l) => l.identity === id)?.process;
      },
    });
    if (o.dumpFile) {
      const file = `${o.dumpFile}-${name}.json`;
      await writeFile(
        file,
        JSON.stringify({
          history,
          clock,
          calls,
          resolved: resolved.map((d) => ({
            auditID: d.call.auditID,
            user: d.call.user,
            uid: d.rec?.uid,
            lo: d.lo,
            hi: d.hi,
            status: d.status,
            effect: d.effect?.rev,
            start: d.rec ? history.deletionStart(d.rec) : undefined,
          })),
        }),
      );
      log(`${name}: wrote ${file}`);
    }
    const violations: Violation[] = [
      ...checkI1(history, resolved, gcUsers, calls, excused, reads),
      ...checkI2(history, { stoppedAt, checkedAt }),
      ...checkI3(history, resolved, gcUsers, calls, excused),
    ];
    if (name === 'kubegc') {
      const tenures = leaseTenures(events, LEASE);
      for (const v of writesOutsideTenure(
        events,
        tenures,
        (e) => kubegcIdentityFromUserAgent(e.userAgent),
        LEASE,
      ))
        violations.push({
          invariant: 'I4',
          object: v.identity,
          summary: v.reason,
          evidence: [JSON.stringify(v.event)],
        });
    }
    const exits: ProcessExit[] = contender.lifetimes
      .filter((l) => l.exit && l.exit.at < stopAt)
      .map((l) => ({
        process: l.process,
        pid: l.pid,
        at: l.exit?.at ?? 0,
        code: l.exit?.code ?? null,
        signal: l.exit?.signal ?? null,
        cause: causeOf({ at: l.exit?.at ?? 0, pid: l.pid }, faults, timing.leaseMs),
      }));
    violations.push(...checkI5(rss, exits));

    const gcCalls = calls.filter((c) => gcUsers.has(c.user));
    const byResource = new Map<string, number>();
    const byPolicy = new Map<string, number>();
    const failed = new Map<string, number>();
    for (const c of gcCalls) {
      if (c.code >= 200 && c.code < 300) {
        byResource.set(c.resource, (byResource.get(c.resource) ?? 0) + 1);
        byPolicy.set(c.policy ?? '(default)', (byPolicy.get(c.policy ?? '(default)') ?? 0) + 1);
      } else failed.set(String(c.code), (failed.get(String(c.code)) ?? 0) + 1);
    }
    const resolution = new Map<string, number>();
    for (const d of resolved)
      if (gcUsers.has(d.call.user)) resolution.set(d.status, (resolution.get(d.status) ?? 0) + 1);
    const cols = collections(
      history,
      resolved.filter((d) => gcUsers.has(d.call.user)),
    ).sort((a, b) => a.latencyMs - b.latencyMs);
    const isGcWrite = (e: AuditEvent): boolean =>
      e.user.username === gcUser && SOAK_NAMESPACES.includes(e.objectRef?.namespace ?? '');

    return {
      contender: name,
      gcUser,
      seed: o.seed,
      durationMs: o.durationMs,
      startedAt,
      endedAt,
      replicas,
      schedule,
      ops: tally(new Map([...workload.ops, ...webhook.counts, ...aggregated.counts])),
      scenarios: tally(workload.scenarios),
      workloadErrors: tally(workload.errors),
      workloadErrorSamples: Object.fromEntries(workload.errorSamples),
      faults,
      throttledWrites: events.filter(
        (e) =>
          WRITE_VERBS.has(e.verb) && e.user.username === gcUser && e.responseStatus?.code === 429,
      ).length,
      excused: [...excused].map(([auditID, e]) => ({ auditID, ...e })),
      gcDeletes: {
        total: [...byResource.values()].reduce((a, b) => a + b, 0),
        byResource: tally(byResource),
        byPolicy: tally(byPolicy),
        failed: tally(failed),
      },
      gcPatches: events.filter(
        (e) => isGcWrite(e) && e.verb === 'patch' && (e.responseStatus?.code ?? 0) < 300,
      ).length,
      resolution: tally(resolution),
      violations,
      collections: {
        count: cols.length,
        medianMs: cols.length ? cols[Math.floor(cols.length / 2)]?.latencyMs : undefined,
        slowest: cols[cols.length - 1],
      },
      rss,
      lifetimes: contender.lifetimes,
      exits,
      watch: recorder.stats,
      objectsSeen: history.objects.size,
      quiescenceMs: quiescentAt === undefined ? undefined : quiescentAt - stoppedAt,
      auditEvents: events.length,
    };
  } finally {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
    if (!o.keepCluster) await down(dir).catch(() => undefined);
  }
}

/** The soak's entry point (used by `npm run soak` and the CI test). */
export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  const log = o.log ?? ((l: string) => process.stderr.write(`${new Date().toISOString()} ${l}\n`));
  const results: ContenderResult[] = [];
  for (const name of o.contenders) results.push(await runContender(name, o, log));
  const failed = results.some(
    (r) => r.contender === 'kubegc' && r.violations.some((v) => v.invariant !== 'I5'),
  );
  return { results, failed };
}
