// Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time per function
// (or per area: kubegc source file, npm package, Node.js internals), so a
// profile can be quoted in a report without a viewer. Idle time is left out.
//   node bench/profile-summary.ts FILE.cpuprofile [--top 25] [--by function|area] [--last SECONDS]
// --last keeps only the final SECONDS of the profile: for a kubegc started with
// --cpu-prof and stopped right after a cascade, that is the cascade.
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function functionLabel(n: ProfileNode): string {
  const f = n.callFrame;
  const where = f.url ? `${path.basename(f.url)}:${f.lineNumber + 1}` : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
}

/** kubegc's own files by path, npm packages by name, Node.js internals as one, V8 pseudo-frames as they are. */
function areaLabel(n: ProfileNode): string {
  const { url, functionName } = n.callFrame;
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  if (url.startsWith('node:')) return 'Node.js internals (http, tls, streams, ...)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return `npm ${pkg}`;
  const src = /\/(src\/.*|bench\/.*)$/.exec(url)?.[1];
  return src ?? url;
}

const SKIP = new Set(['(idle)']);

export function selfTimes(
  p: Profile,
  by: 'function' | 'area' = 'function',
  lastSeconds = Infinity,
): Map<string, number> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const label = by === 'area' ? areaLabel : functionLabel;
  const total = p.timeDeltas.reduce((a, b) => a + b, 0);
  const from = total - lastSeconds * 1e6;
  const totals = new Map<string, number>();
  let t = 0;
  p.samples.forEach((id, i) => {
    const dt = p.timeDeltas[i] ?? 0;
    t += dt;
    const n = byId.get(id);
    if (!n || t < from) return;
    const key = label(n);
    // Profiler.stop itself (in-process profiling) is not the workload.
    if (SKIP.has(key) || functionLabel(n).startsWith('post node:inspector')) return;
    totals.set(key, (totals.get(key) ?? 0) + dt);
  });
  return totals;
}

if (import.meta.main) {
  const file = process.argv[2];
  const arg = (name: string): string | undefined => {
    const i = process.argv.indexOf(name);
    return i === -1 ? undefined : process.argv[i + 1];
  };
  if (!file)
    throw new Error(
      'usage: profile-summary.ts FILE.cpuprofile [--top N] [--by function|area] [--last S]',
    );
  const top = Number(arg('--top') ?? 25);
  const by = arg('--by') === 'area' ? 'area' : 'function';
  const last = Number(arg('--last') ?? Infinity);
  const totals = selfTimes(JSON.parse(readFileSync(file, 'utf8')) as Profile, by, last);
  const all = [...totals.values()].reduce((a, b) => a + b, 0);
  console.log(`busy (not idle): ${(all / 1000).toFixed(0)} ms`);
  const rows = [...totals.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [name, us] of rows)
    console.log(
      `${((100 * us) / all).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(7)} ms  ${name}`,
    );
}
