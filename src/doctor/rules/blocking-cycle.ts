// blocking-cycle: objects that exist and block on each other's deletion
// in a ring (every reference blockOwnerDeletion): a foreground deletion of
// any of them never finishes without a garbage collector breaking it.
import { compareObjects, describeObject, type BlockingCycle, type ObjectRef } from '../findings.ts';
import type { SnapshotIndex } from '../index.ts';
import { isoSeconds } from '../snapshot.ts';

export function blockingCyclesOf(ix: SnapshotIndex): BlockingCycle[] {
  return blockingCycles(ix.blockingEdges, ix.s.objects.created, ix.ref, ix.nowS);
}

/**
 * Strongly connected components of the blocking references between objects
 * that exist (Tarjan's, iterative: an ownership chain can be long). Each
 * component of two or more objects, or one object that blocks on itself,
 * is a cycle a foreground deletion can never finish without a garbage
 * collector breaking it.
 */
function blockingCycles(
  edges: Map<number, number[]>,
  created: { get(i: number): number },
  ref: (i: number) => ObjectRef,
  nowS: number,
): BlockingCycle[] {
  const index = new Map<number, number>();
  const low = new Map<number, number>();
  const onStack = new Set<number>();
  const stack: number[] = [];
  const components: number[][] = [];
  let counter = 0;
  for (const start of edges.keys()) {
    if (index.has(start)) continue;
    const work: { v: number; next: number }[] = [{ v: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length) {
      const top = work[work.length - 1] as { v: number; next: number };
      const out = edges.get(top.v) ?? [];
      if (top.next < out.length) {
        const w = out[top.next++] as number;
        if (!index.has(w)) {
          index.set(w, counter);
          low.set(w, counter++);
          stack.push(w);
          onStack.add(w);
          work.push({ v: w, next: 0 });
        } else if (onStack.has(w)) {
          low.set(top.v, Math.min(low.get(top.v) as number, index.get(w) as number));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent)
        low.set(parent.v, Math.min(low.get(parent.v) as number, low.get(top.v) as number));
      if (low.get(top.v) === index.get(top.v)) {
        const comp: number[] = [];
        let w: number;
        do {
          w = stack.pop() as number;
          onStack.delete(w);
          comp.push(w);
        } while (w !== top.v);
        if (comp.length > 1 || (edges.get(top.v) ?? []).includes(top.v)) components.push(comp);
      }
    }
  }
  return components.map((comp) => {
    const members = new Set(comp);
    const refs = comp.map((i) => ({ i, r: ref(i) }));
    refs.sort((a, b) => compareObjects(a.r, b.r));
    const rep = (refs[0] as { i: number }).i;
    // The shortest cycle through the representative, by breadth-first search.
    const prev = new Map<number, number>();
    const queue = [rep];
    let closing = -1;
    for (let q = 0; q < queue.length && closing === -1; q++) {
      const v = queue[q] as number;
      for (const w of edges.get(v) ?? []) {
        if (!members.has(w)) continue;
        if (w === rep) {
          closing = v;
          break;
        }
        if (!prev.has(w)) {
          prev.set(w, v);
          queue.push(w);
        }
      }
    }
    const cycle: number[] = [];
    for (let v = closing; v !== rep && v !== -1; v = prev.get(v) ?? -1) cycle.unshift(v);
    cycle.unshift(rep);
    const youngest = Math.max(...comp.map((i) => created.get(i)));
    const chain = cycle.map(ref);
    return {
      kind: 'blocking-cycle' as const,
      object: chain[0] as ObjectRef,
      since: isoSeconds(youngest),
      ageSeconds: Math.max(0, nowS - youngest),
      sinceBasis: 'creationTimestamp' as const,
      reason: 'blocking-cycle',
      detail: `${[...chain, chain[0] as ObjectRef].map(describeObject).join(' → ')}: every reference has blockOwnerDeletion, so a foreground deletion of any of them waits on itself until a garbage collector unblocks a reference`,
      chain,
      members: comp.length,
    };
  });
}
