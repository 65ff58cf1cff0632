// The Node.js flags kubegc runs with, wherever it runs: the Dockerfile's
// ENTRYPOINT, the `kubegc` bin's shebang (src/cli.ts), the e2e tests, the demo
// and the benchmarks. A unit test keeps the first two in step with this list.
//
// V8 lets the young generation grow to 32 MB semi-spaces while informers parse
// LIST pages, and that memory stays resident. kubegc's heap is nearly all
// long-lived graph, which a large nursery does not help: with 4 MB semi-spaces
// RSS after syncing 10,000 objects fell ~35 MB and neither the cascade nor the
// in-process graph benchmark got slower (bench/RESULTS.md).
export const RUNTIME_FLAGS: readonly string[] = ['--max-semi-space-size=4'];

/**
 * For a kubegc started without RUNTIME_FLAGS (`node dist/cli.js`, a wrapper
 * script, NODE_OPTIONS of its own): V8 fixes the semi-space maximum when it
 * creates the heap, and `--max-semi-space-size` set later has no effect
 * (measured: the young generation still grew to 128 MB). What can still be
 * changed is how it grows: with a growth factor of 1 it stays at its initial
 * size (1 MB semi-spaces), which keeps nearly all the RSS the flag saves, for
 * a few per cent more scavenges while informers decode their lists. Returns
 * the flag it set, or undefined when the command line already bounds the
 * young generation (or the caller chose its own growth).
 */
export function boundYoungGenerationLate(
  execArgv: readonly string[],
  nodeOptions: string | undefined,
  setFlags: (flags: string) => void,
): string | undefined {
  const young = /^--(max-semi-space-size|semi-space-growth-factor|max-heap-size)\b/;
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)];
  if (given.some((a) => young.test(a))) return undefined;
  const flag = '--semi-space-growth-factor=1';
  setFlags(flag);
  return flag;
}
