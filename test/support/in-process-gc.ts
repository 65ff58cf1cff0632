// The collector run in the test's own process, so that a test can act at an
// exact point between kubegc's read and its write: its client's `intercept`
// hook runs right before each request goes on the wire, and there the test
// changes an object the way a concurrent controller or user would.
//
//   const { cluster, c } = await e2e();
//   const g = await inProcessGc(cluster, { userAgent: 'kubegc-e2e-races' });
//   test('…', async () => { g.intercept = async (r) => { … }; … });
//
// KUBEGC_E2E_DEBUG_LOG=<file>: the collector's debug log and every request it
// sends, appended to that file, for a failing run.
import { appendFileSync } from 'node:fs';
import type * as k8s from '@kubernetes/client-node';
import type { Cluster } from '../../cluster/controlplane.ts';
import { KubeClient, type ClientOptions } from '../../src/api/client.ts';
import { type InterceptedRequest } from '../../src/api/request.ts';
import {
  GarbageCollector,
  type GarbageCollectorMetrics,
  type GarbageCollectorOptions,
} from '../../src/gc/garbage-collector.ts';
import { createLogger, silentLogger, type Level, type Logger } from '../../src/log.ts';
import { kubegcKubeConfig, waitFor, type Clients } from './cluster.ts';
import { afterFile } from './e2e.ts';
import { configMap, ownerRef, type Ref } from './objects.ts';

export type Intercept = (r: InterceptedRequest) => Promise<void> | void;

/**
 * A logger at `level` on stderr ('silent': none), or, with
 * KUBEGC_E2E_DEBUG_LOG set, everything at debug level appended to that file,
 * each line after `prefix`.
 */
export function e2eLogger(level: Level | 'silent', prefix = ''): Logger {
  const file = process.env.KUBEGC_E2E_DEBUG_LOG;
  if (file) return createLogger('debug', (l) => appendFileSync(file, `${prefix}${l}`));
  return level === 'silent' ? silentLogger : createLogger(level);
}

export interface InProcessGcOptions {
  /** The client's User-Agent (each file its own, to tell its requests apart in the audit log). */
  userAgent: string;
  /** Default: kubegc's service account (deploy/'s RBAC and the guardrails). */
  kubeConfig?: k8s.KubeConfig;
  /** The rest of the client's options (rate limits, onRequest). */
  client?: Partial<Omit<ClientOptions, 'userAgent' | 'intercept'>>;
  /**
   * The collector's options. discoveryPeriodMs defaults to an hour: discovery
   * runs when a test says so (gc.runDiscovery()), not in the middle of a race.
   */
  gc?: Partial<GarbageCollectorOptions>;
  metrics?: GarbageCollectorMetrics;
  /** Default: e2eLogger('warn'). */
  log?: Logger;
  /** 'workers' (default): gc.start(); 'sync': gc.sync() only (a standby's work, no decisions yet). */
  run?: 'workers' | 'sync';
  /** The intercept to begin with (inProcessGc clears it after each test like any other). */
  intercept?: Intercept;
  /** Runs on the collector before it syncs (to watch what its start-up does). */
  beforeStart?: (gc: GarbageCollector) => void;
}

export interface InProcessGc {
  client: KubeClient;
  gc: GarbageCollector;
  /** Runs right before each of the collector's requests goes on the wire; may change the world, delay or throw. */
  intercept: Intercept | undefined;
  /** Waits until the collector's graph has observed every one of these objects (as objects, not virtual owners). */
  observed(...objects: { uid: string }[]): Promise<void>;
  /** Waits until nothing is ready or in flight in the delete queue, nor waits for bulk verification (whatever the collector decides now is decided). */
  decided(what?: string): Promise<void>;
  /** Stops the collector (its writes drained), then closes its client. */
  stop(): Promise<void>;
}

/** Starts a collector in this process; the caller stops it. */
export async function startInProcessGc(
  cluster: Cluster,
  opts: InProcessGcOptions,
): Promise<InProcessGc> {
  const debugFile = process.env.KUBEGC_E2E_DEBUG_LOG;
  let intercept = opts.intercept;
  const client = await KubeClient.create(opts.kubeConfig ?? (await kubegcKubeConfig(cluster)), {
    ...opts.client,
    userAgent: opts.userAgent,
    intercept: (r) => {
      if (debugFile)
        appendFileSync(debugFile, `REQ ${r.method} ${r.path} ${JSON.stringify(r.body ?? '')}\n`);
      return intercept?.(r);
    },
  });
  const gc = new GarbageCollector(
    client,
    opts.log ?? e2eLogger('warn'),
    { discoveryPeriodMs: 3_600_000, ...opts.gc },
    opts.metrics,
  );
  let stopped: Promise<void> | undefined;
  const handle: InProcessGc = {
    client,
    gc,
    get intercept() {
      return intercept;
    },
    set intercept(f) {
      intercept = f;
    },
    async observed(...objects) {
      await waitFor('the graph to observe the objects', () =>
        Promise.resolve(objects.every((o) => gc.graph.get(o.uid)?.virtual === false)),
      );
    },
    async decided(what = 'kubegc to finish deciding') {
      await waitFor(
        what,
        () =>
          Promise.resolve(
            gc.bulkVerifier.idle &&
              gc.deleteQueue.depth === 0 &&
              gc.deleteQueue.processingCount === 0,
          ),
        { intervalMs: 20 },
      );
    },
    stop: () =>
      (stopped ??= (async () => {
        try {
          await gc.stop();
        } finally {
          client.close();
        }
      })()),
  };
  opts.beforeStart?.(gc);
  try {
    if (opts.run === 'sync') await gc.sync();
    else await gc.start();
  } catch (err) {
    await handle.stop().catch(() => undefined);
    throw err;
  }
  return handle;
}

/**
 * A collector for the whole test file: started now, its intercept cleared
 * after each test (a test's hook must not reach into the next test), stopped
 * after the file.
 */
export async function inProcessGc(
  cluster: Cluster,
  opts: InProcessGcOptions,
): Promise<InProcessGc> {
  const g = await startInProcessGc(cluster, opts);
  afterEach(() => {
    g.intercept = undefined;
  });
  afterFile(() => g.stop());
  return g;
}

/** The finalizer that holds Z of heldChain() in deletion (a test's own: kubegc never removes it). */
export const HOLD_FINALIZER = 'e2e.kubegc.io/hold';

/**
 * ConfigMaps A -> X -> Y -> Z in `ns`, every reference blocking; Y deleted in
 * the foreground and held there by Z (HOLD_FINALIZER), as the collector `g`
 * sees them. When A is then deleted in the foreground, X is an object with a
 * waiting owner and a dependent that is deleting its dependents: kubegc breaks
 * the cycle (unblocks X's references, then DELETEs X Foreground). The test
 * releases Z (releaseConfigMap) when it is done.
 */
export async function heldChain(
  c: Clients,
  g: InProcessGc,
  ns: string,
): Promise<{ a: Ref; x: Ref; y: Ref; z: Ref }> {
  const a = await configMap(c, ns, 'a');
  const x = await configMap(c, ns, 'x', [ownerRef(a, { blockOwnerDeletion: true })]);
  const y = await configMap(c, ns, 'y', [ownerRef(x, { blockOwnerDeletion: true })]);
  const zObj = await c.core.createNamespacedConfigMap({
    namespace: ns,
    body: {
      metadata: {
        name: 'z',
        finalizers: [HOLD_FINALIZER],
        ownerReferences: [ownerRef(y, { blockOwnerDeletion: true })],
      },
    },
  });
  const z: Ref = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    name: 'z',
    uid: zObj.metadata?.uid ?? '',
    namespace: ns,
  };
  await g.observed(a, x, y, z);
  await c.core.deleteNamespacedConfigMap({
    name: 'y',
    namespace: ns,
    body: { propagationPolicy: 'Foreground' },
  });
  await waitFor('Y deleting its dependents and Z held in deletion', () =>
    Promise.resolve(
      g.gc.graph.get(y.uid)?.deletingDependents === true && g.gc.graph.get(z.uid)?.beingDeleted,
    ),
  );
  return { a, x, y, z };
}
