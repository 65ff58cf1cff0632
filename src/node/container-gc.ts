// One container GC pass: list sandboxes, containers, pod log directories and
// (with API access) this node's pods, decide with container-gc-policy.ts,
// then remove dead containers (with their logs), inactive sandboxes, log
// directories of deleted pods and dangling log symlinks.
import type { Logger } from '../log.ts';
import {
  CONTAINER_NAME_LABEL,
  listMissesReadyPods,
  POD_NAME_LABEL,
  POD_NAMESPACE_LABEL,
  POD_UID_LABEL,
  planContainerRemovals,
  planSandboxRemovals,
  podsDeletedFromApi,
  podUidOfLogDirectory,
  removablePods,
  stillRemovable,
  type ContainerGcPolicy,
  type ContainerRemoval,
  type PodRemovalReason,
  type SandboxRemoval,
} from './container-gc-policy.ts';
import type { CriClient, CriContainer, CriSandbox } from './cri/client.ts';
import {
  danglingLogSymlinks,
  listPodLogDirectories,
  removeContainerLogs,
  removePodLogDirectory,
  removeSymlink,
} from './logs.ts';
import type { NodeMetrics } from './metrics.ts';
import { noNodeEvents, type NodeEvents } from './node-events.ts';
import {
  NODE_NAME_FIX,
  podUidsOf,
  PodsUnknownError,
  type NodePod,
  type PodLister,
  type PodsUnknownReason,
} from './pods.ts';
import type { RuntimeConnection } from './runtime.ts';

export interface ContainerGcOptions {
  policy: ContainerGcPolicy;
  podLogsDir: string;
  containerLogsDir: string;
  dryRun: boolean;
  /** This node's pods from the API; undefined without API access. */
  pods?: PodLister;
  /** The node name the pods are listed by (for the messages that doubt it). */
  nodeName?: string;
  now?: () => number;
}

export interface ContainerPassResult {
  containers: { id: string; reason: string }[];
  sandboxes: { id: string; reason: string }[];
  podLogDirectories: string[];
  logSymlinks: string[];
  /** Whether the list of this node's pods was complete (deleted pods were checked). */
  podsKnown: boolean;
  /**
   * Containers planned for removal but kept: their status just before the
   * removal said they were no longer exited (started since the listing).
   */
  kept: { id: string; state: string }[];
  /** Removals that failed (the pass went on). */
  failures: number;
  dryRun: boolean;
}

/** Seconds the kubelet gives a container in unknown state before killing it (its minimum grace). */
const UNKNOWN_CONTAINER_STOP_TIMEOUT_S = 2;

export class ContainerGarbageCollector {
  private readonly runtime: RuntimeConnection;
  private readonly opts: ContainerGcOptions;
  private readonly log: Logger;
  private readonly metrics: NodeMetrics;
  private readonly events: NodeEvents;
  private readonly now: () => number;
  /** Why the last pass did not know this node's pods (undefined: it did). */
  private unknownReason: PodsUnknownReason | undefined;

  constructor(
    runtime: RuntimeConnection,
    opts: ContainerGcOptions,
    log: Logger,
    metrics: NodeMetrics,
    events: NodeEvents = noNodeEvents,
  ) {
    this.runtime = runtime;
    this.opts = opts;
    this.log = log;
    this.metrics = metrics;
    this.events = events;
    this.now = opts.now ?? Date.now;
  }

  /**
   * Pods whose content goes this pass (deleted from the API, evicted, and under
   * pressure terminated), or none when this node's pods cannot be known: the
   * list failed, the API has no Node of this name, or the list names none of
   * the pods whose sandboxes are ready here. Reasons that do not depend on
   * which pods exist (unidentified containers, the per-container and node
   * caps, superseded sandboxes, dangling symlinks) go on, as on a kubelet
   * whose pod sources are not ready.
   */
  private async removablePods(
    sandboxes: CriSandbox[],
    seenUids: Set<string>,
    activeUids: Set<string>,
    pressure: boolean,
  ): Promise<{ known: boolean; removable: Map<string, PodRemovalReason> }> {
    const unknown = { known: false, removable: new Map<string, PodRemovalReason>() };
    if (!this.opts.pods) return unknown;
    let pods: NodePod[];
    try {
      pods = await this.opts.pods.nodePods({ urgent: pressure });
    } catch (err) {
      if (err instanceof PodsUnknownError) this.podsUnknown(err);
      else {
        this.metrics.errors.inc({ gc: 'container', kind: 'api' });
        this.metrics.podsUnknown.inc({ reason: 'list-failed' });
        this.log.warn(
          "cannot list this node's pods; containers of deleted, evicted and terminated pods are kept this pass",
          { error: (err as Error).message },
        );
      }
      return unknown;
    }
    const apiUids = podUidsOf(pods);
    const check = listMissesReadyPods({ sandboxes, apiUids });
    if (check.missed) {
      const node = this.opts.nodeName ?? 'this node';
      this.podsUnknown(
        new PodsUnknownError(
          'ready-pods-unlisted',
          `the API's pods with spec.nodeName=${node} (${pods.length}) include none of the pods whose sandboxes are ready here (${check.ready}), so the list is not this node's and no pod counts as deleted; ${NODE_NAME_FIX}`,
        ),
      );
      return unknown;
    }
    this.unknownReason = undefined;
    const deleted = podsDeletedFromApi({ seenUids, apiUids, activeUids });
    return { known: true, removable: removablePods({ deleted, pods, activeUids, pressure }) };
  }

  /**
   * A node name that names no Node, or another node: an error line every pass
   * (nothing of deleted pods goes until it is fixed), a metric, and a Warning
   * event on the Node when the reason changes (not every minute).
   */
  private podsUnknown(err: PodsUnknownError): void {
    this.metrics.podsUnknown.inc({ reason: err.reason });
    this.log.error(
      "this node's pods are unknown: no container, sandbox or log directory is removed for a pod reason",
      {
        node: this.opts.nodeName,
        reason: err.reason,
        error: err.message,
      },
    );
    if (this.unknownReason !== err.reason) this.events.warning('PodsUnknown', err.message);
    this.unknownReason = err.reason;
  }

  /**
   * One pass. With `pressure` (disk pressure reclaim), every terminated pod's
   * dead containers and sandboxes go too, as the kubelet's eviction manager
   * does with DeleteAllUnusedContainers.
   */
  async run(opts: { pressure?: boolean } = {}): Promise<ContainerPassResult> {
    const client = await this.runtime.get();
    const dryRun = this.opts.dryRun;
    // Order matters: the runtime and the log directory are read before the
    // API, so a pod created in between is in the API list (never mistaken
    // for a deleted one).
    let sandboxes: CriSandbox[];
    let containers: CriContainer[];
    try {
      sandboxes = await client.listSandboxes();
      containers = await client.listContainers();
    } catch (err) {
      throw this.runtime.check(err);
    }
    const logDirs = await listPodLogDirectories(this.opts.podLogsDir);
    const seenUids = new Set<string>([
      ...sandboxes.map((s) => s.uid),
      ...containers.map((c) => c.labels[POD_UID_LABEL] ?? ''),
      ...logDirs.map(podUidOfLogDirectory),
    ]);
    seenUids.delete('');
    const activeUids = new Set<string>([
      ...sandboxes.filter((s) => s.state === 'ready').map((s) => s.uid),
      ...containers.filter((c) => c.state === 'running').map((c) => c.labels[POD_UID_LABEL] ?? ''),
    ]);
    const pods = await this.removablePods(sandboxes, seenUids, activeUids, opts.pressure === true);

    const result: ContainerPassResult = {
      containers: [],
      sandboxes: [],
      podLogDirectories: [],
      logSymlinks: [],
      podsKnown: pods.known,
      kept: [],
      failures: 0,
      dryRun,
    };
    const nowNs = BigInt(this.now()) * 1_000_000n;
    const containerRemovals = planContainerRemovals({
      containers,
      nowNs,
      policy: this.opts.policy,
      removablePods: pods.removable,
    });
    const removed = new Set<string>();
    // Pods with a container found no longer exited: they are not dead, so
    // their log directories stay (their sandboxes stay as those containers').
    const alive = new Set<string>();
    for (const r of containerRemovals) {
      const outcome = await this.removeContainer(client, r, containers, result);
      if (outcome === 'removed') removed.add(r.container.id);
      const podUid = r.container.labels[POD_UID_LABEL];
      if (outcome === 'kept' && podUid) alive.add(podUid);
    }

    const remaining = containers.filter((c) => !removed.has(c.id));
    const sandboxRemovals = planSandboxRemovals({
      sandboxes,
      containers: remaining,
      removablePods: pods.removable,
    });
    for (const r of sandboxRemovals) await this.removeSandbox(client, r, sandboxes, result);

    // Log directories of deleted and evicted pods (which run nothing any
    // more); a terminated pod keeps its logs, as on the kubelet.
    if (pods.known) {
      for (const dir of logDirs) {
        const uid = podUidOfLogDirectory(dir);
        const reason = pods.removable.get(uid);
        if (reason !== 'pod-deleted' && reason !== 'pod-evicted') continue;
        if (alive.has(uid)) continue;
        if (dryRun)
          this.log.info('would remove pod log directory (dry run)', { dir, podUid: uid, reason });
        else {
          try {
            await removePodLogDirectory(this.opts.podLogsDir, dir);
            this.log.info('removed pod log directory', { dir, podUid: uid, reason });
          } catch (err) {
            this.fail('could not remove pod log directory', err, result, { dir });
            continue;
          }
        }
        result.podLogDirectories.push(dir);
      }
    }

    await this.removeDanglingSymlinks(client, result);
    return result;
  }

  private fail(
    msg: string,
    err: unknown,
    result: ContainerPassResult,
    fields: Record<string, unknown>,
  ): void {
    const checked = this.runtime.check(err);
    if (checked !== err) throw checked;
    result.failures++;
    this.metrics.errors.inc({ gc: 'container', kind: 'remove' });
    this.log.error(msg, { ...fields, error: (err as Error).message });
  }

  private async removeContainer(
    client: CriClient,
    r: ContainerRemoval,
    all: CriContainer[],
    result: ContainerPassResult,
  ): Promise<'removed' | 'kept' | 'failed'> {
    const c = all.find((x) => x.id === r.container.id) ?? (r.container as CriContainer);
    const fields = {
      id: c.id,
      reason: r.reason,
      state: c.state,
      podUid: c.labels[POD_UID_LABEL],
      pod: c.labels[POD_NAME_LABEL],
      namespace: c.labels[POD_NAMESPACE_LABEL],
      container: c.labels[CONTAINER_NAME_LABEL] ?? c.name,
      createdAt: new Date(Number(c.createdAtNs / 1_000_000n)).toISOString(),
      image: c.image,
    };
    if (this.opts.dryRun) {
      this.metrics.containersRemoved.inc({ reason: r.reason, dry_run: 'true' });
      this.log.info('would remove container (dry run)', fields);
      result.containers.push({ id: c.id, reason: r.reason });
      return 'removed';
    }
    try {
      // The kubelet kills containers in unknown state first: they might still run.
      if (c.state === 'unknown') await client.stopContainer(c.id, UNKNOWN_CONTAINER_STOP_TIMEOUT_S);
      // The plan is as old as the listing: look again before anything goes.
      // (No status: the runtime no longer has it; the removal is a no-op.)
      const status = await client.containerStatus(c.id);
      if (status && !stillRemovable(c.state, status.state)) {
        this.metrics.containersKept.inc({ state: status.state });
        this.log.info('kept container: no longer exited', { ...fields, stateNow: status.state });
        result.kept.push({ id: c.id, state: status.state });
        return 'kept';
      }
      const logs = await removeContainerLogs(
        c.id,
        status?.labels ?? c.labels,
        status?.logPath ?? '',
        this.opts.containerLogsDir,
      );
      await client.removeContainer(c.id);
      this.metrics.containersRemoved.inc({ reason: r.reason, dry_run: 'false' });
      this.log.info('removed container', { ...fields, ...(logs.length ? { logs } : {}) });
      result.containers.push({ id: c.id, reason: r.reason });
      return 'removed';
    } catch (err) {
      this.fail('could not remove container', err, result, fields);
      return 'failed';
    }
  }

  private async removeSandbox(
    client: CriClient,
    r: SandboxRemoval,
    all: CriSandbox[],
    result: ContainerPassResult,
  ): Promise<boolean> {
    const s = all.find((x) => x.id === r.sandbox.id) ?? (r.sandbox as CriSandbox);
    const fields = {
      id: s.id,
      reason: r.reason,
      state: s.state,
      podUid: s.uid,
      pod: s.name,
      namespace: s.namespace,
      attempt: s.attempt,
      createdAt: new Date(Number(s.createdAtNs / 1_000_000n)).toISOString(),
    };
    if (this.opts.dryRun) {
      this.metrics.sandboxesRemoved.inc({ reason: r.reason, dry_run: 'true' });
      this.log.info('would remove sandbox (dry run)', fields);
      result.sandboxes.push({ id: s.id, reason: r.reason });
      return true;
    }
    try {
      // The kubelet stops before removing: the sandbox may still hold resources.
      await client.stopSandbox(s.id);
      await client.removeSandbox(s.id);
      this.metrics.sandboxesRemoved.inc({ reason: r.reason, dry_run: 'false' });
      this.log.info('removed sandbox', fields);
      result.sandboxes.push({ id: s.id, reason: r.reason });
      return true;
    } catch (err) {
      this.fail('could not remove sandbox', err, result, fields);
      return false;
    }
  }

  /**
   * Symlinks in the container logs directory whose log is gone: removed unless
   * their container still exists and has not exited (a log being rotated is
   * briefly missing).
   */
  private async removeDanglingSymlinks(
    client: CriClient,
    result: ContainerPassResult,
  ): Promise<void> {
    for (const link of await danglingLogSymlinks(this.opts.containerLogsDir)) {
      if (link.containerId) {
        try {
          const status = await client.containerStatus(link.containerId);
          if (status && status.state !== 'exited') continue;
        } catch (err) {
          const checked = this.runtime.check(err);
          if (checked !== err) throw checked;
          // As the kubelet: a status error does not keep the symlink.
        }
      }
      if (this.opts.dryRun) {
        this.log.info('would remove dangling log symlink (dry run)', { path: link.path });
      } else {
        try {
          await removeSymlink(link.path);
          this.log.info('removed dangling log symlink', { path: link.path });
        } catch (err) {
          this.fail('could not remove log symlink', err, result, { path: link.path });
          continue;
        }
      }
      result.logSymlinks.push(link.path);
    }
  }
}
