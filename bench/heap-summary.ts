// Summarises a V8 heap snapshot (.heapsnapshot): retained shallow size per
// object type and constructor, the top entries, divided by an object count if
// given, so "where do the bytes per object go" can be quoted in a report.
//   node bench/heap-summary.ts FILE.heapsnapshot [--per N] [--top 25] [--maps]
// --maps also says whose hidden classes ("object shape") are not shared: a
// map used by one object only is named by the property that holds that object
// (e.g. DirectedNodeData.out: graphology's adjacency keyed by neighbour UID).
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: (string[] | string)[];
      edge_fields: string[];
      edge_types: (string[] | string)[];
    };
  };
  nodes: number[];
  edges: number[];
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

/** Hidden classes used by exactly one object, counted by the property that holds that object. */
export function unsharedMapsByHolder(s: Snapshot): Map<string, { maps: number; bytes: number }> {
  const { node_fields: nf, edge_fields: ef } = s.snapshot.meta;
  const edgeTypes = s.snapshot.meta.edge_types[0] as string[];
  const [W, EW] = [nf.length, ef.length];
  const [fName, fSize, fEdges] = ['name', 'self_size', 'edge_count'].map((f) => nf.indexOf(f));
  const [eType, eName, eTo] = ['type', 'name_or_index', 'to_node'].map((f) => ef.indexOf(f));
  const at = (a: number[], i: number): number => a[i] ?? 0;
  const users = new Map<number, number>(); // map node -> objects using it
  const mapOf = new Map<number, number>(); // object node -> its map
  const holders: number[] = []; // (holder, held, name string index) triples
  let e = 0;
  for (let i = 0; i < s.nodes.length; i += W) {
    for (let k = at(s.nodes, i + (fEdges ?? 4)); k > 0; k--, e += EW) {
      const type = edgeTypes[at(s.edges, e + (eType ?? 0))];
      const to = at(s.edges, e + (eTo ?? 2));
      const name = at(s.edges, e + (eName ?? 1));
      if (type === 'internal' && s.strings[name] === 'map') {
        users.set(to, (users.get(to) ?? 0) + 1);
        mapOf.set(i, to);
      } else if (type === 'property') holders.push(i, to, name);
    }
  }
  const out = new Map<string, { maps: number; bytes: number }>();
  for (let j = 0; j < holders.length; j += 3) {
    const [holder, held, name] = [at(holders, j), at(holders, j + 1), at(holders, j + 2)];
    const map = mapOf.get(held);
    if (map === undefined || users.get(map) !== 1) continue;
    users.set(map, 0); // count each map once, under its first holder
    const key = `${s.strings[at(s.nodes, holder + (fName ?? 1))] ?? '?'}.${s.strings[name] ?? '?'}`;
    const entry = out.get(key) ?? { maps: 0, bytes: 0 };
    entry.maps++;
    entry.bytes += at(s.nodes, map + (fSize ?? 3));
    out.set(key, entry);
  }
  return out;
}

if (import.meta.main) {
  const file = process.argv[2];
  if (!file)
    throw new Error('usage: heap-summary.ts FILE.heapsnapshot [--per N] [--top N] [--maps]');
  const arg = (name: string): number => Number(process.argv[process.argv.indexOf(name) + 1]);
  const per = process.argv.includes('--per') ? arg('--per') : 1;
  const top = process.argv.includes('--top') ? arg('--top') : 25;
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const rows = [...sizesByKind(snapshot).entries()].sort((a, b) => b[1].bytes - a[1].bytes);
  console.log(`${'bytes/obj'.padStart(10)} ${'count/obj'.padStart(10)}  kind`);
  for (const [kind, { count, bytes }] of rows.slice(0, top))
    console.log(
      `${(bytes / per).toFixed(1).padStart(10)} ${(count / per).toFixed(2).padStart(10)}  ${kind}`,
    );
  if (process.argv.includes('--maps')) {
    const maps = [...unsharedMapsByHolder(snapshot).entries()].sort(
      (a, b) => b[1].maps - a[1].maps,
    );
    console.log(
      `\n${'maps/obj'.padStart(10)} ${'bytes/obj'.padStart(10)}  unshared hidden classes, by holder`,
    );
    for (const [holder, { maps: n, bytes }] of maps.slice(0, top))
      console.log(
        `${(n / per).toFixed(2).padStart(10)} ${(bytes / per).toFixed(1).padStart(10)}  ${holder}`,
      );
  }
}
