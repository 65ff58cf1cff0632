// What one adjacency entry costs in V8, by representation: graphology keeps a
// node's in- and out-neighbours as plain objects keyed by neighbour key (UID),
// so each such object gets a hidden class no other object shares (the heap
// snapshot's "object shape": a Map and a DescriptorArray per object). This
// measures that against the alternatives for a one-entry dictionary.
//   node --expose-gc bench/adjacency-cost.ts [--n 50000]
import { randomBytes } from 'node:crypto';

type Make = (key: string, value: object) => unknown;
const representations: Record<string, Make> = {
  'plain object (graphology today)': (k, v) => ({ [k]: v }),
  'plain object, dictionary mode': (k, v) => {
    const o: Record<string, unknown> = { a: 1, b: 1 };
    delete o.a;
    delete o.b;
    o[k] = v;
    return o;
  },
  'Object.create(null)': (k, v) => {
    const o = Object.create(null) as Record<string, unknown>;
    o[k] = v;
    return o;
  },
  Map: (k, v) => new Map([[k, v]]),
};

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const nAt = process.argv.indexOf('--n');
const n = nAt > 0 ? Number(process.argv[nAt + 1]) : 50_000;

for (const [name, make] of Object.entries(representations)) {
  // UID-like flat strings, internalised beforehand so only the containers are counted.
  const keys = Array.from({ length: n }, () => randomBytes(18).toString('base64url'));
  const intern: Record<string, number> = {};
  for (const k of keys) intern[k] = 1;
  const value = {};
  const held: unknown[] = new Array<unknown>(n).fill(null);
  for (let r = 0; r < 3; r++) gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < n; i++) held[i] = make(keys[i] ?? '', value);
  for (let r = 0; r < 3; r++) gc();
  const perEntry = (process.memoryUsage().heapUsed - before) / n;
  console.log(`${perEntry.toFixed(0).padStart(5)} B per entry  ${name}  (${held.length} held)`);
}
