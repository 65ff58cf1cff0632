// Decoding metadata-only LISTs and watch-lists: the protobuf decoder
// (src/api/protobuf-meta.ts) against what the informer does today
// (JSON.parse, then trimMeta of each item), on the same N realistic objects
// (pods of Deployments: labels, an owner reference, managedFields from two
// managers), encoded by the test encoder in the API server's wire format.
//
//   node --expose-gc --disable-warning=ExperimentalWarning bench/protobuf-decode.ts [--items 50000] [--runs 7]
//
// For each way: the best and the median wall time of --runs (after two
// warm-up runs), objects/s, bytes allocated per object while decoding (V8's used heap
// across the run, plus what each GC inside it freed, from v8.GCProfiler),
// and bytes per object still held by the result (heap after a full GC, the
// result alive, minus the heap with it gone).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import {
  FrameReader,
  decodePartialObjectMetadataList,
  decodeWatchFrame,
} from '../src/api/protobuf-meta.ts';
import {
  Rng,
  encodeList,
  encodePartial,
  frames,
  listJson,
  metaJson,
  realisticMeta,
  watchEvent,
} from '../src/api/protobuf-meta.testing.ts';
import { trimMeta, type ObjectMeta, type RawMeta } from '../src/api/resources.ts';

if (typeof globalThis.gc !== 'function') {
  // Allocation and retention need a full GC on demand.
  const r = spawnSync(
    process.execPath,
    [
      '--expose-gc',
      '--disable-warning=ExperimentalWarning',
      fileURLToPath(import.meta.url),
      ...process.argv.slice(2),
    ],
    { stdio: 'inherit' },
  );
  process.exit(r.status ?? 1);
}
const gc = globalThis.gc as () => void;

const argv = process.argv.slice(2);
const opt = (name: string, fallback: number): number => {
  const i = argv.indexOf(name);
  const v = i === -1 ? fallback : Number(argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const N = opt('--items', 50_000);
const RUNS = opt('--runs', 7);

const rng = new Rng(2026);
const models = Array.from({ length: N }, (_, i) => realisticMeta(i, rng));
const list = { resourceVersion: String(100000 + N), items: models };

// Buffers, as HTTP bodies and socket chunks are.
const pbList = Buffer.from(encodeList(list));
const jsonListText = JSON.stringify(listJson(list));
const jsonListBytes = Buffer.from(jsonListText);
const pbWatch = Buffer.from(
  frames([
    ...models.map((m) => watchEvent('ADDED', encodePartial(m))),
    watchEvent(
      'BOOKMARK',
      encodePartial({
        ...realisticMeta(0, rng),
        resourceVersion: list.resourceVersion,
        annotations: [['k8s.io/initial-events-end', 'true']],
      }),
    ),
  ]),
);
const jsonWatchText =
  models
    .map((m) =>
      JSON.stringify({
        type: 'ADDED',
        object: {
          kind: 'PartialObjectMetadata',
          apiVersion: 'meta.k8s.io/v1',
          metadata: metaJson(m),
        },
      }),
    )
    .join('\n') + '\n';
const jsonWatchBytes = Buffer.from(jsonWatchText);

/** The informer's JSON LIST path: one JSON.parse, trimMeta per item. */
function jsonList(text: string): ObjectMeta[] {
  const page = JSON.parse(text) as { items?: { metadata?: RawMeta }[] };
  const out: ObjectMeta[] = [];
  for (const item of page.items ?? []) {
    const m = trimMeta(item.metadata);
    if (m) out.push(m);
  }
  return out;
}

/** The informer's JSON watch path: a JSON.parse per line, trimMeta of each ADDED object. */
function jsonWatch(text: string): ObjectMeta[] {
  const out: ObjectMeta[] = [];
  let start = 0;
  for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
    const ev = JSON.parse(text.slice(start, nl)) as { object?: { metadata?: RawMeta } };
    const m = trimMeta(ev.object?.metadata);
    if (m) out.push(m);
    start = nl + 1;
  }
  return out;
}

function pbWatchDecode(bytes: Uint8Array, chunk: number): ObjectMeta[] {
  const out: ObjectMeta[] = [];
  const r = new FrameReader();
  for (let i = 0; i < bytes.length; i += chunk)
    for (const f of r.push(bytes.subarray(i, i + chunk))) {
      const e = decodeWatchFrame(f);
      if (e.meta) out.push(e.meta);
    }
  r.end();
  return out;
}

interface Way {
  name: string;
  inputBytes: number;
  run: () => ObjectMeta[];
}

// 64 KiB: what a socket read typically hands over, so frames straddle chunks.
const CHUNK = 64 * 1024;
const ways: Way[] = [
  {
    name: 'LIST protobuf',
    inputBytes: pbList.length,
    run: () => decodePartialObjectMetadataList(pbList).items,
  },
  {
    name: 'LIST JSON.parse+trimMeta',
    inputBytes: jsonListBytes.length,
    run: () => jsonList(jsonListText),
  },
  {
    name: 'LIST JSON from bytes',
    inputBytes: jsonListBytes.length,
    run: () => jsonList(jsonListBytes.toString('utf8')),
  },
  {
    name: 'WATCH protobuf frames',
    inputBytes: pbWatch.length,
    run: () => pbWatchDecode(pbWatch, CHUNK),
  },
  {
    name: 'WATCH JSON lines',
    inputBytes: jsonWatchBytes.length,
    run: () => jsonWatch(jsonWatchText),
  },
];

// Same answers, or the comparison means nothing.
const reference = JSON.stringify(jsonList(jsonListText));
for (const w of ways)
  if (JSON.stringify(w.run()) !== reference) throw new Error(`${w.name}: a different result`);

function allocated(run: () => unknown): number {
  gc();
  const profiler = new v8.GCProfiler();
  const before = v8.getHeapStatistics().used_heap_size;
  profiler.start();
  const result = run();
  const after = v8.getHeapStatistics().used_heap_size;
  const stats = profiler.stop();
  void result;
  let freed = 0;
  for (const s of stats?.statistics ?? [])
    freed += s.beforeGC.heapStatistics.usedHeapSize - s.afterGC.heapStatistics.usedHeapSize;
  return after - before + freed;
}

function retained(run: () => unknown): number {
  gc();
  gc();
  const base = v8.getHeapStatistics().used_heap_size;
  let result: unknown = run();
  gc();
  gc();
  const held = v8.getHeapStatistics().used_heap_size;
  if (!result) throw new Error('no result');
  result = undefined;
  return held - base;
}

const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

console.log(
  `${N} objects; node ${process.version}; protobuf list ${(pbList.length / N).toFixed(0)} B/object, JSON ${(jsonListBytes.length / N).toFixed(0)} B/object`,
);
// Rounds interleave the ways, so a busy machine slows them alike; the best
// run is the least disturbed one, the median the typical one.
for (const w of ways) {
  w.run();
  w.run();
}
const times = ways.map((): number[] => []);
for (let round = 0; round < RUNS; round++)
  ways.forEach((w, i) => {
    gc();
    const t0 = performance.now();
    w.run();
    times[i]?.push(performance.now() - t0);
  });
console.log(
  [
    'way',
    'input MB',
    'best ms',
    'median ms',
    'objects/s best',
    'objects/s med',
    'alloc B/obj',
    'retained B/obj',
  ]
    .map((h, i) => (i === 0 ? h.padEnd(26) : h.padStart(15)))
    .join(''),
);
ways.forEach((w, i) => {
  const t = times[i] ?? [];
  const best = Math.min(...t);
  const med = median(t);
  const perSec = (ms: number) => Math.round(N / (ms / 1000)).toLocaleString('en-US');
  const cols = [
    (w.inputBytes / 1e6).toFixed(1),
    best.toFixed(1),
    med.toFixed(1),
    perSec(best),
    perSec(med),
    Math.round(allocated(w.run) / N).toLocaleString('en-US'),
    Math.round(retained(w.run) / N).toLocaleString('en-US'),
  ];
  console.log(w.name.padEnd(26) + cols.map((c) => c.padStart(15)).join(''));
});
