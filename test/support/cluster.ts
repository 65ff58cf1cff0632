// Helpers for e2e tests: the shared control plane, API clients, a namespace per
// test, and waiting on conditions with a deadline (never fixed sleeps).
import * as k8s from '@kubernetes/client-node';
import { status, type Cluster } from '../../cluster/controlplane.ts';
import { serviceAccountKubeconfig, type ServiceAccountRef } from './service-account.ts';

export async function e2eCluster(): Promise<Cluster> {
  const dir = process.env.KUBEGC_E2E_CLUSTER_DIR;
  if (!dir)
    throw new Error(
      'KUBEGC_E2E_CLUSTER_DIR is not set: run e2e tests through jest (npm run test:e2e)',
    );
  const s = await status(dir);
  if (!s.cluster || !s.ready) throw new Error(`the e2e control plane in ${dir} is not ready`);
  return s.cluster;
}

export function kubeConfig(cluster: Cluster): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cluster.kubeconfig);
  return kc;
}

/**
 * The credentials kubegc runs with in the e2e tests: its real service account
 * (deploy/'s RBAC and the guardrails), or another service account `sa`.
 */
export async function kubegcKubeConfig(
  cluster: Cluster,
  sa?: ServiceAccountRef,
): Promise<k8s.KubeConfig> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(await serviceAccountKubeconfig(cluster, sa));
  return kc;
}

export interface Clients {
  kc: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  apps: k8s.AppsV1Api;
  rbac: k8s.RbacAuthorizationV1Api;
  objects: k8s.KubernetesObjectApi;
}

export function clients(cluster: Cluster): Clients {
  const kc = kubeConfig(cluster);
  return {
    kc,
    core: kc.makeApiClient(k8s.CoreV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    rbac: kc.makeApiClient(k8s.RbacAuthorizationV1Api),
    objects: k8s.KubernetesObjectApi.makeApiClient(kc),
  };
}

let counter = 0;

/** Creates a uniquely named namespace; the returned function deletes it. */
export async function testNamespace(core: k8s.CoreV1Api, prefix: string): Promise<string> {
  const name = `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter++}`.slice(0, 63);
  await core.createNamespace({ body: { metadata: { name } } });
  return name;
}

/** HTTP status of a failed client-node call, or undefined for other errors. */
export function statusOf(err: unknown): number | undefined {
  if (err instanceof k8s.ApiException) return err.code;
  return undefined;
}

/** Resolves to true if the object exists, false on 404; rethrows anything else. */
export async function exists(get: () => Promise<unknown>): Promise<boolean> {
  try {
    await get();
    return true;
  } catch (err) {
    if (statusOf(err) === 404) return false;
    throw err;
  }
}

/**
 * Polls `check` until it returns a truthy value or `timeoutMs` passes, then
 * fails with `what` and the last value seen.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T>,
  { timeoutMs = 60_000, intervalMs = 250 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs / 1000}s waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Asserts that `check` keeps returning true for `durationMs` (for "this must
 * NOT happen" outcomes, where no event marks the end of the wait).
 */
export async function staysTrue(
  what: string,
  check: () => Promise<boolean>,
  durationMs: number,
  intervalMs = 500,
): Promise<void> {
  const until = Date.now() + durationMs;
  do {
    if (!(await check()))
      throw new Error(`expected ${what} to hold for ${durationMs / 1000}s, but it stopped holding`);
    await new Promise((r) => setTimeout(r, intervalMs));
  } while (Date.now() < until);
}

export interface DeletionRecorder {
  /** UID → resourceVersion of its DELETED event (etcd revisions, so comparable across resources). */
  deleted: Map<string, number>;
  stop(): void;
}

/** Watches the given collection paths and records every DELETED event. */
export async function recordDeletions(
  kc: k8s.KubeConfig,
  paths: string[],
): Promise<DeletionRecorder> {
  const deleted = new Map<string, number>();
  const w = new k8s.Watch(kc);
  const aborts = await Promise.all(
    paths.map((p) =>
      w.watch(
        p,
        {},
        (phase, obj: k8s.KubernetesObject) => {
          if (phase === 'DELETED' && obj.metadata?.uid)
            deleted.set(obj.metadata.uid, Number(obj.metadata.resourceVersion));
        },
        () => undefined,
      ),
    ),
  );
  return { deleted, stop: () => aborts.forEach((a) => a.abort()) };
}
