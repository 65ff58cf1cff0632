// The kubelet's container and sandbox GC decisions
// (pkg/kubelet/kuberuntime/kuberuntime_gc.go) as pure functions. The CRI calls
// and log clean-up live in container-gc.ts.
import type { ContainerState, SandboxState } from './cri/client.ts';

export interface ContainerGcPolicy {
  /** Dead containers created less than this long ago are kept (--minimum-container-ttl-duration). */
  minAgeMs: number;
  /** Dead containers kept per (pod, container name) (--maximum-dead-containers-per-container; <0: no limit). */
  maxPerPodContainer: number;
  /** Dead containers kept on the node (--maximum-dead-containers; <0: no limit). */
  maxContainers: number;
}

export const DEFAULT_CONTAINER_GC_POLICY: ContainerGcPolicy = {
  minAgeMs: 0,
  maxPerPodContainer: 1,
  maxContainers: -1,
};

/**
 * A container that was created but never started is left alone this long,
 * whatever --minimum-container-ttl-duration says: unlike the kubelet's own GC,
 * kubegc runs beside the kubelet and must not remove a container between its
 * CreateContainer and StartContainer.
 */
export const CREATED_CONTAINER_GRACE_MS = 60_000;

export const POD_UID_LABEL = 'io.kubernetes.pod.uid';
export const POD_NAME_LABEL = 'io.kubernetes.pod.name';
export const POD_NAMESPACE_LABEL = 'io.kubernetes.pod.namespace';
export const CONTAINER_NAME_LABEL = 'io.kubernetes.container.name';

export interface GcContainer {
  id: string;
  sandboxId: string;
  state: ContainerState;
  createdAtNs: bigint;
  labels: Record<string, string>;
}

export interface GcSandbox {
  id: string;
  uid: string;
  state: SandboxState;
  createdAtNs: bigint;
}

/**
 * Why all of a pod's dead containers and inactive sandboxes may go: deleted
 * from the API (and not running), evicted (the kubelet's ShouldPodContentBeRemoved),
 * or, under disk pressure only, terminated (ShouldPodRuntimeBeRemoved, which the
 * kubelet's eviction manager applies through DeleteAllUnusedContainers).
 */
export type PodRemovalReason = 'pod-deleted' | 'pod-evicted' | 'pod-terminated';

export type ContainerRemovalReason =
  'unidentified' | PodRemovalReason | 'max-per-pod-container' | 'max-containers';

export interface ContainerRemoval {
  container: GcContainer;
  reason: ContainerRemovalReason;
}

/** The eviction unit of a container: its pod UID and container name, from the kubelet's labels. */
export function evictionUnitOf(c: GcContainer): { podUid: string; name: string } | undefined {
  const podUid = c.labels[POD_UID_LABEL];
  const name = c.labels[CONTAINER_NAME_LABEL];
  return podUid && name ? { podUid, name } : undefined;
}

const newestFirst = (a: { createdAtNs: bigint }, b: { createdAtNs: bigint }): number =>
  a.createdAtNs > b.createdAtNs ? -1 : a.createdAtNs < b.createdAtNs ? 1 : 0;

/** Not running, and created at least MinAge ago (never-started ones get a fixed grace). */
export function isEvictable(c: GcContainer, nowNs: bigint, policy: ContainerGcPolicy): boolean {
  if (c.state === 'running') return false;
  const minAgeMs =
    c.state === 'created' ? Math.max(policy.minAgeMs, CREATED_CONTAINER_GRACE_MS) : policy.minAgeMs;
  return c.createdAtNs <= nowNs - BigInt(Math.floor(minAgeMs)) * 1_000_000n;
}

/**
 * Whether a container planned for removal may still go, by its status read
 * just before the removal: exited, or still never started if it was listed
 * so (CREATED_CONTAINER_GRACE_MS has passed). Anything else was started since
 * the listing or is still unknown after StopContainer; removing it would kill
 * a running container (containerd's RemoveContainer forces) and take its logs.
 */
export function stillRemovable(listed: ContainerState, now: ContainerState): boolean {
  return now === 'exited' || (listed === 'created' && now === 'created');
}

/**
 * Which dead containers to remove, in the kubelet's order: unidentified ones;
 * every one of a pod deleted from the API; then per unit the newest
 * MaxPerPodContainer are kept; then, if more than MaxContainers remain, every
 * unit is cut to max(1, MaxContainers ÷ units) and finally the oldest go
 * until MaxContainers is met.
 */
export function planContainerRemovals(input: {
  containers: GcContainer[];
  nowNs: bigint;
  policy: ContainerGcPolicy;
  /** Pods whose every dead container goes, and why (empty without API access). */
  removablePods: ReadonlyMap<string, PodRemovalReason>;
}): ContainerRemoval[] {
  const { policy } = input;
  const removals: ContainerRemoval[] = [];
  const units = new Map<string, GcContainer[]>();
  for (const c of input.containers) {
    if (!isEvictable(c, input.nowNs, policy)) continue;
    const unit = evictionUnitOf(c);
    if (!unit) {
      removals.push({ container: c, reason: 'unidentified' });
      continue;
    }
    const key = `${unit.podUid}/${unit.name}`;
    const list = units.get(key) ?? [];
    list.push(c);
    units.set(key, list);
  }
  for (const list of units.values()) list.sort(newestFirst);

  // Pods deleted from the API, evicted, or (under pressure) terminated: everything goes.
  for (const [key, list] of units) {
    const reason = input.removablePods.get(key.slice(0, key.indexOf('/')));
    if (!reason) continue;
    for (const c of list) removals.push({ container: c, reason });
    units.delete(key);
  }

  const keepNewest = (perUnit: number, reason: ContainerRemovalReason): void => {
    for (const [key, list] of units) {
      if (list.length <= perUnit) continue;
      for (const c of list.slice(perUnit)) removals.push({ container: c, reason });
      units.set(key, list.slice(0, perUnit));
    }
  };
  if (policy.maxPerPodContainer >= 0)
    keepNewest(policy.maxPerPodContainer, 'max-per-pod-container');

  const total = (): number => [...units.values()].reduce((n, l) => n + l.length, 0);
  if (policy.maxContainers >= 0 && total() > policy.maxContainers) {
    // An equal share per unit first (at least one each), as the kubelet does.
    keepNewest(Math.max(1, Math.floor(policy.maxContainers / units.size)), 'max-containers');
    const remaining = total();
    if (remaining > policy.maxContainers) {
      const oldestLast = [...units.values()].flat().sort(newestFirst);
      for (const c of oldestLast.slice(oldestLast.length - (remaining - policy.maxContainers)))
        removals.push({ container: c, reason: 'max-containers' });
    }
  }
  return removals;
}

/**
 * Pods whose content may go because the API no longer has them: seen on the
 * node, absent from a complete API list, and not running any more (no READY
 * sandbox, no running container). The last condition is what the kubelet's
 * "deleted and terminated" means, and it keeps a running static pod whose
 * mirror pod is missing from being taken for a deleted one.
 */
export function podsDeletedFromApi(input: {
  seenUids: Iterable<string>;
  apiUids: ReadonlySet<string>;
  activeUids: ReadonlySet<string>;
}): Set<string> {
  const deleted = new Set<string>();
  for (const uid of input.seenUids)
    if (uid && !input.apiUids.has(uid) && !input.activeUids.has(uid)) deleted.add(uid);
  return deleted;
}

/**
 * Whether an API list of this node's pods misses every pod whose sandbox is
 * READY here (by the kubelet's pod UID label; mirror pods count for their
 * static pods): such a list is another node's or none (a wrong node name),
 * and nothing on this node may count as deleted on its strength. A pod that
 * runs here was created in the API before its sandbox, and the runtime is
 * read before the API, so a right list names it; only pods force-deleted
 * while still running are missed, and then the pass merely waits.
 */
export function listMissesReadyPods(input: {
  sandboxes: readonly { state: SandboxState; labels: Record<string, string> }[];
  apiUids: ReadonlySet<string>;
}): { missed: boolean; ready: number } {
  const ready = new Set<string>();
  for (const s of input.sandboxes) {
    const uid = s.labels[POD_UID_LABEL];
    if (s.state === 'ready' && uid) ready.add(uid);
  }
  for (const uid of ready) if (input.apiUids.has(uid)) return { missed: false, ready: ready.size };
  return { missed: ready.size > 0, ready: ready.size };
}

/**
 * The pods whose content goes this pass: deleted from the API (podsDeletedFromApi),
 * evicted, and with `pressure` every terminated pod, none of them running.
 */
export function removablePods(input: {
  deleted: ReadonlySet<string>;
  /** The API's pods bound here (empty when unknown). */
  pods: readonly { uid: string; mirrorOf?: string; phase: string; evicted: boolean }[];
  activeUids: ReadonlySet<string>;
  pressure: boolean;
}): Map<string, PodRemovalReason> {
  const out = new Map<string, PodRemovalReason>();
  for (const uid of input.deleted) out.set(uid, 'pod-deleted');
  for (const p of input.pods) {
    const reason: PodRemovalReason | undefined = p.evicted
      ? 'pod-evicted'
      : input.pressure && (p.phase === 'Succeeded' || p.phase === 'Failed')
        ? 'pod-terminated'
        : undefined;
    if (!reason) continue;
    for (const uid of [p.uid, p.mirrorOf])
      if (uid && !input.activeUids.has(uid) && !out.has(uid)) out.set(uid, reason);
  }
  return out;
}

export type SandboxRemovalReason = PodRemovalReason | 'superseded';

export interface SandboxRemoval {
  sandbox: GcSandbox;
  reason: SandboxRemovalReason;
}

/**
 * Inactive sandboxes to remove. A sandbox is active while READY or while any
 * container (of those that remain) references it. Of a deleted pod every
 * inactive sandbox goes; of any other pod the newest sandbox stays, and older
 * inactive ones go.
 */
export function planSandboxRemovals(input: {
  sandboxes: GcSandbox[];
  /** Containers that remain after the container pass. */
  containers: { sandboxId: string }[];
  removablePods: ReadonlyMap<string, PodRemovalReason>;
}): SandboxRemoval[] {
  const referenced = new Set(input.containers.map((c) => c.sandboxId));
  const byPod = new Map<string, GcSandbox[]>();
  for (const s of input.sandboxes) {
    const list = byPod.get(s.uid) ?? [];
    list.push(s);
    byPod.set(s.uid, list);
  }
  const removals: SandboxRemoval[] = [];
  for (const [uid, list] of byPod) {
    const whole = input.removablePods.get(uid);
    // The kubelet's removeOldestNSandboxes: of the newest-first list, look at
    // the last N (all for removable pods, all but the newest otherwise).
    const sorted = [...list].sort(newestFirst);
    for (const s of sorted.slice(whole ? 0 : 1)) {
      if (s.state === 'ready' || referenced.has(s.id)) continue;
      removals.push({ sandbox: s, reason: whole ?? 'superseded' });
    }
  }
  return removals;
}

/** Pod UID of a `/var/log/pods` entry: `<namespace>_<name>_<uid>` (the last part). */
export function podUidOfLogDirectory(name: string): string {
  const parts = name.split('_');
  return parts[parts.length - 1] ?? name;
}

const EXT4_MAX_FILENAME = 255;

/**
 * The kubelet's legacy symlink in /var/log/containers:
 * `<pod>_<namespace>_<container>-<containerID>.log`, cut to 255 bytes.
 */
export function legacyLogSymlinkName(
  podName: string,
  podNamespace: string,
  containerName: string,
  containerId: string,
): string {
  const base = `${podName}_${podNamespace}_${containerName}-${containerId}`;
  return `${base.slice(0, EXT4_MAX_FILENAME - '.log'.length)}.log`;
}

/** The container ID at the end of a legacy symlink name, or undefined if malformed. */
export function containerIdOfLogSymlink(name: string): string | undefined {
  if (!name.endsWith('.log')) return undefined;
  const id = name.slice(name.lastIndexOf('-') + 1, -'.log'.length);
  return /^[0-9a-f]{64}$/.test(id) ? id : undefined;
}
