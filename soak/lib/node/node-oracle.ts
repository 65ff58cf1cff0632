// The node soak's oracle (issue 33): judges what happened on the node from
// the API server's pods (polled) and containerd's own event stream, never
// from kubegc's state or logs. Pure (unit-tested); node-soak.ts feeds it.
//
// Times are local milliseconds: the pod snapshots, the runtime events (taken
// when `ctr events` printed them) and the log-directory scan all run in the
// soak's process on the same machine. A removal is only judged against pods
// seen in the snapshots on both sides of it; anything inside a gap of the
// event stream (containerd restarting) is not judged.
import { ImageTable, type SoakImage } from './images.ts';

export interface PodView {
  uid: string;
  namespace: string;
  name: string;
  phase: string;
  deleting: boolean;
  /** Every image the pod names, as written: containers, init containers, image volumes. */
  images: string[];
  /** containerd IDs of containers the API reports running. */
  running: string[];
  /** Failed with reason Evicted. */
  evicted?: boolean;
}

export interface PodSnapshot {
  t: number;
  pods: PodView[];
}

export type RuntimeEvent =
  | { t: number; kind: 'image-delete'; name: string }
  | {
      t: number;
      kind: 'container-create';
      id: string;
      /** From the container's labels (undefined when they could not be read). */
      podUid?: string;
      containerName?: string;
      sandbox?: boolean;
    }
  | { t: number; kind: 'task-exit'; id: string }
  | { t: number; kind: 'container-delete'; id: string };

export interface NodeSample {
  t: number;
  diskPressure: boolean;
  evicted: string[];
  /** The soak's own statfs says a disk signal is within the reclaim margin of its threshold. */
  pressure: boolean;
  /** Unused filler images present then (what a GC could have freed). */
  fillersPresent: number;
}

export interface LogDirGone {
  t: number;
  podUid: string;
  dir: string;
}

export interface EndState {
  /** Names (tags, digests, IDs) containerd lists at the end. */
  imageNames: string[];
  /** Containers at the end: id, pod, name, running. */
  containers: { id: string; podUid?: string; name?: string; sandbox?: boolean; running: boolean }[];
  /** Pods in the API at the end. */
  pods: PodView[];
  t: number;
}

export interface Inputs {
  table: ImageTable;
  /** Keys of images pinned by a --pinned-images pattern (meant to pin them). */
  pinned: Set<string>;
  sandboxImage: string;
  snapshots: PodSnapshot[];
  events: RuntimeEvent[];
  /** [from, to] intervals the event stream was down. */
  gaps: [number, number][];
  samples: NodeSample[];
  logDirsGone: LogDirGone[];
  end?: EndState;
  /** For N5: images unused for longer than this (plus slack) must be gone at the end; 0: no maximum age. */
  maxAgeMs: number;
  slackMs: number;
  /** Per image key, when the workload last had a pod naming it (for N5). */
  lastNamed: Map<string, number>;
}

export type Invariant = 'N1' | 'N2' | 'N3' | 'N4' | 'N5';

export interface Violation {
  invariant: Invariant;
  t: number;
  what: string;
}

const TERMINAL = new Set(['Succeeded', 'Failed']);

function around(snaps: PodSnapshot[], t: number): [PodSnapshot, PodSnapshot] | undefined {
  let before: PodSnapshot | undefined;
  for (const s of snaps) {
    if (s.t <= t) before = s;
    else return before ? [before, s] : undefined;
  }
  return undefined;
}

/** Pods present, not being deleted and with the same phase class in both snapshots. */
function steadyPods(pair: [PodSnapshot, PodSnapshot]): Map<string, [PodView, PodView]> {
  const after = new Map(pair[1].pods.map((p) => [p.uid, p]));
  const out = new Map<string, [PodView, PodView]>();
  for (const p of pair[0].pods) {
    const q = after.get(p.uid);
    if (q && !p.deleting && !q.deleting) out.set(p.uid, [p, q]);
  }
  return out;
}

const inGap = (gaps: [number, number][], t: number): boolean =>
  gaps.some(([a, b]) => t >= a && t <= b);

/** N1: no image removed while a live pod names it, while it is pinned, or the sandbox image. */
function n1(i: Inputs, out: Violation[]): void {
  for (const e of i.events) {
    if (e.kind !== 'image-delete') continue;
    if (e.name === i.sandboxImage) {
      out.push({ invariant: 'N1', t: e.t, what: `the sandbox image ${e.name} was removed` });
      continue;
    }
    const img = i.table.resolve(e.name);
    if (!img) continue;
    if (i.pinned.has(img.key)) {
      out.push({
        invariant: 'N1',
        t: e.t,
        what: `pinned image ${img.key} (${e.name}) was removed`,
      });
      continue;
    }
    const pair = around(i.snapshots, e.t);
    if (!pair) continue;
    for (const [p, q] of steadyPods(pair).values()) {
      if (TERMINAL.has(p.phase) || TERMINAL.has(q.phase)) continue;
      const named = p.images.find((s) => i.table.resolve(s)?.key === img.key);
      if (named)
        out.push({
          invariant: 'N1',
          t: e.t,
          what: `image ${img.key} (${e.name}) removed while pod ${p.namespace}/${p.name} (${p.phase}) names it as ${named}`,
        });
    }
  }
}

interface ContainerLife {
  id: string;
  created: number;
  podUid?: string;
  name?: string;
  sandbox?: boolean;
  deleted?: number;
  exited?: number;
}

function lives(events: RuntimeEvent[]): Map<string, ContainerLife> {
  const m = new Map<string, ContainerLife>();
  for (const e of events) {
    if (e.kind === 'container-create')
      m.set(e.id, {
        id: e.id,
        created: e.t,
        podUid: e.podUid,
        name: e.containerName,
        sandbox: e.sandbox,
      });
    else if (e.kind === 'task-exit') {
      const c = m.get(e.id);
      if (c) c.exited = e.t;
    } else if (e.kind === 'container-delete') {
      const c = m.get(e.id);
      if (c) c.deleted = e.t;
    }
  }
  return m;
}

/** Under pressure reclaim at `t` (the soak's statfs said so within the last sample or two). */
function pressureAt(samples: NodeSample[], t: number): boolean {
  const near = samples.filter((s) => Math.abs(s.t - t) <= 15_000);
  return near.some((s) => s.pressure);
}

/**
 * Whether the pod may have been terminated when a removal between the two
 * snapshots happened. A phase never leaves Succeeded or Failed, so a pod
 * terminated in the snapshot after the removal became so somewhere between
 * the two (about a second apart): a GC that read the pod in that second may
 * have seen it terminated, and the oracle cannot say it did not. (A pod that
 * never terminates, a restarting Deployment's, is judged on both sides.)
 */
function terminalBy([before, after]: [PodView, PodView]): boolean {
  return TERMINAL.has(before.phase) || TERMINAL.has(after.phase);
}

/**
 * N2: no container, sandbox or log directory of a pod that exists is removed,
 * except an older one of the same container (or sandbox) of that pod (the
 * kubelet's own per-container limit), or under pressure one of a terminated
 * pod. N3: no container the API reports running is removed.
 */
function n2n3(i: Inputs, out: Violation[]): void {
  const all = lives(i.events);
  for (const c of all.values()) {
    if (c.deleted === undefined || !c.podUid || inGap(i.gaps, c.deleted)) continue;
    const t = c.deleted;
    const pair = around(i.snapshots, t);
    if (!pair) continue;
    const steady = steadyPods(pair).get(c.podUid);
    if (!steady) continue;
    const [p] = steady;
    const what = c.sandbox ? 'sandbox' : `container ${c.name ?? '?'}`;
    if (p.running.includes(c.id) && steady[1].running.includes(c.id)) {
      out.push({
        invariant: 'N3',
        t,
        what: `running ${what} ${c.id.slice(0, 12)} of pod ${p.namespace}/${p.name} was removed`,
      });
      continue;
    }
    const newer = [...all.values()].some(
      (o) =>
        o.id !== c.id &&
        o.podUid === c.podUid &&
        Boolean(o.sandbox) === Boolean(c.sandbox) &&
        (c.sandbox || o.name === c.name) &&
        o.created > c.created &&
        o.created <= t,
    );
    if (newer) continue;
    if (pressureAt(i.samples, t) && terminalBy(steady)) continue;
    out.push({
      invariant: 'N2',
      t,
      what: `the last ${what} ${c.id.slice(0, 12)} of pod ${p.namespace}/${p.name} (${p.phase}, then ${steady[1].phase}) was removed while the pod exists`,
    });
  }
  for (const g of i.logDirsGone) {
    const pair = around(i.snapshots, g.t);
    if (!pair) continue;
    const steady = steadyPods(pair).get(g.podUid);
    if (!steady) continue;
    if (pressureAt(i.samples, g.t) && terminalBy(steady)) continue;
    out.push({
      invariant: 'N2',
      t: g.t,
      what: `log directory ${g.dir} of pod ${steady[0].namespace}/${steady[0].name} (${steady[0].phase}) was removed while the pod exists`,
    });
  }
}

/**
 * N4: no DiskPressure and no eviction while unused images a GC could free were present.
 * One violation per episode (consecutive samples showing it), naming its length.
 */
function n4(i: Inputs, out: Violation[]): void {
  let episode: { start: NodeSample; last: NodeSample; evicted: Set<string> } | undefined;
  const close = (): void => {
    if (!episode) return;
    const { start, last, evicted } = episode;
    out.push({
      invariant: 'N4',
      t: start.t,
      what: `${start.diskPressure || last.diskPressure ? 'the Node reported DiskPressure' : 'pods were evicted'} for ${Math.round((last.t - start.t) / 1000)} s${evicted.size ? `, evicting ${[...evicted].join(', ')}` : ''}, with ${start.fillersPresent} unused filler images present`,
    });
    episode = undefined;
  };
  for (const s of i.samples) {
    const bad = (s.diskPressure || s.evicted.length > 0) && s.fillersPresent > 0;
    if (!bad) {
      close();
      continue;
    }
    episode ??= { start: s, last: s, evicted: new Set() };
    episode.last = s;
    for (const e of s.evicted) episode.evicted.add(e);
  }
  close();
}

/** N5: at the end, containers of pods gone from the API are gone; images unused past the maximum age are gone. */
function n5(i: Inputs, out: Violation[]): void {
  const end = i.end;
  if (!end) return;
  const podUids = new Set(end.pods.map((p) => p.uid));
  const lastSeen = new Map<string, number>();
  for (const s of i.snapshots) for (const p of s.pods) lastSeen.set(p.uid, s.t);
  for (const c of end.containers) {
    if (!c.podUid || podUids.has(c.podUid) || c.running) continue;
    const gone = lastSeen.get(c.podUid);
    if (gone === undefined || end.t - gone < i.slackMs) continue;
    out.push({
      invariant: 'N5',
      t: end.t,
      what: `${c.sandbox ? 'sandbox' : `container ${c.name ?? '?'}`} ${c.id.slice(0, 12)} of pod ${c.podUid} (gone from the API ${Math.round((end.t - gone) / 1000)} s before) is still there`,
    });
  }
  if (i.maxAgeMs <= 0) return;
  const present = new Set<SoakImage>();
  for (const n of end.imageNames) {
    const img = i.table.resolve(n);
    if (img) present.add(img);
  }
  const named = new Set(end.pods.flatMap((p) => p.images.map((s) => i.table.resolve(s)?.key)));
  for (const img of present) {
    if (i.pinned.has(img.key) || named.has(img.key)) continue;
    const last = i.lastNamed.get(img.key);
    if (last === undefined) continue;
    if (end.t - last > i.maxAgeMs + i.slackMs)
      out.push({
        invariant: 'N5',
        t: end.t,
        what: `image ${img.key} unused for ${Math.round((end.t - last) / 1000)} s (maximum age ${i.maxAgeMs / 1000} s) is still there`,
      });
  }
}

export function judge(i: Inputs): Violation[] {
  const out: Violation[] = [];
  n1(i, out);
  n2n3(i, out);
  n4(i, out);
  n5(i, out);
  return out.sort((a, b) => a.t - b.t);
}
