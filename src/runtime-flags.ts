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
