// Summarises a V8 heap snapshot (.heapsnapshot): retained shallow size per
// object type and constructor, the top entries, divided by an object count if
// given, so "where do the bytes per object go" can be quoted in a report.
//   node bench/heap-summary.ts FILE.heapsnapshot [--per N] [--top 25]
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: (string[] | string)[] } };
  nodes: number[];
  strings: string[];
}

export function sizesByKind(s: Snapshot): Map<string, { count: number; bytes: number }> {
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0] as string[];
  const width = fields.length;
  const [fType, fName, fSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + (fType ?? 0)] ?? 0] ?? '?';
    const name = s.strings[s.nodes[i + (fName ?? 1)] ?? 0] ?? '?';
    // Strings are grouped by type only: their names are their contents.
    const key = type === 'object' || type === 'closure' ? `${type} ${name}` : type;
    const e = out.get(key) ?? { count: 0, bytes: 0 };
    e.count++;
    e.bytes += s.nodes[i + (fSize ?? 3)] ?? 0;
    out.set(key, e);
  }
  return out;
}

if (import.meta.main) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: heap-summary.ts FILE.heapsnapshot [--per N] [--top N]');
  const arg = (name: string): number => Number(process.argv[process.argv.indexOf(name) + 1]);
  const per = process.argv.includes('--per') ? arg('--per') : 1;
  const top = process.argv.includes('--top') ? arg('--top') : 25;
  const sizes = sizesByKind(JSON.parse(readFileSync(file, 'utf8')) as Snapshot);
  const rows = [...sizes.entries()].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top);
  console.log(`${'bytes/obj'.padStart(10)} ${'count/obj'.padStart(10)}  kind`);
  for (const [kind, { count, bytes }] of rows)
    console.log(
      `${(bytes / per).toFixed(1).padStart(10)} ${(count / per).toFixed(2).padStart(10)}  ${kind}`,
    );
}
