// The two lanes of the GC's work (docs/how-it-decides.md, "Lanes"): `user`,
// work caused by a change kubegc observed (an owner deleted, a deletion
// switched to Foreground, an orphan finalizer, a reference removed), and
// `housekeeping`, work that only verifies what was already there (owners
// never seen, leaked dependents found at start-up, re-verification). User
// work is never queued behind housekeeping, neither in the work queues nor
// in the client's rate limiter.
//
// The lane reaches the client through AsyncLocalStorage rather than a
// request option: it is a property of the work item, not of any one call,
// and an item's requests are issued many calls deep (gathering, classifying
// owners, the writes, Event POSTs fired and forgotten). Threading an option
// through every one of those functions would make each forgotten call
// silently take the default lane; the store follows every await, timer and
// promise the item starts. A request outside any item (informers, discovery)
// carries no lane and is served as `user`: nothing it does is deferrable.
import { AsyncLocalStorage } from 'node:async_hooks';

export type Lane = 'user' | 'housekeeping';

/** Highest priority first: the order workers take lanes in. */
export const LANES: readonly Lane[] = ['user', 'housekeeping'];

/** The lane of the two that is served first: a key asked for in both waits in this one. */
export function higherLane(a: Lane, b: Lane): Lane {
  return a === 'user' || b === 'user' ? 'user' : 'housekeeping';
}

const laneStore = new AsyncLocalStorage<Lane>();

/** Runs `fn` with every request it (and what it starts) issues in `lane`. */
export function inLane<T>(lane: Lane, fn: () => T): T {
  return laneStore.run(lane, fn);
}

/** The lane of the work item the caller runs for, if any. */
export function currentLane(): Lane | undefined {
  return laneStore.getStore();
}
