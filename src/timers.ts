// setTimeout's limit, shared by the node GC's scheduling and the flags that
// kubegc waits on with one timer.

/**
 * The longest delay setTimeout and setInterval wait: 2^31−1 ms (24.8 days).
 * Given more, Node.js fires after 1 ms (TimeoutOverflowWarning), so a longer
 * period run as one timer becomes a busy loop.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
