// The node soak's report (markdown): per contender, N1–N5 violations beside
// what ran; the kubelet alone is the reference.
import type { NodeSoakResult } from './node-soak.ts';

const INVARIANTS = {
  N1: 'no image removed while a pod bound to the node that is not terminated names it (any spelling, image volumes included), while a pin matches it, or the sandbox image',
  N2: 'no container, sandbox or log directory of a pod that exists is removed (an older one of the same container excepted), outside pressure reclaim; under pressure only those of terminated pods',
  N3: 'no running container is removed',
  N4: 'no DiskPressure and no eviction while unused images were there to free',
  N5: 'at the end, containers of pods gone from the API are gone, and images unused past the maximum age',
} as const;

export function renderNode(r: NodeSoakResult): string {
  const lines: string[] = [
    '# Node soak: kubegc node beside the kubelet, and the kubelet alone',
    '',
    `Seed ${r.seed}, ${Math.round(r.durationMs / 60_000)} min of workload and faults per contender (\`npm run soak -- --node --duration ${Math.round(r.durationMs / 60_000)}m --seed ${r.seed}\`). The oracle reads only the API server's pods and containerd's event stream (soak/lib/node/node-oracle.ts).`,
    '',
    '| invariant | meaning | ' + r.results.map((x) => x.contender).join(' | ') + ' |',
    '| --- | --- | ' + r.results.map(() => '---').join(' | ') + ' |',
  ];
  for (const [k, meaning] of Object.entries(INVARIANTS))
    lines.push(
      `| ${k} | ${meaning} | ${r.results.map((x) => (x.error ? 'run failed' : String(x.counts[k] ?? 0))).join(' | ')} |`,
    );
  lines.push(
    `| | images removed (tags) | ${r.results.map((x) => x.imagesRemoved).join(' | ')} |`,
    `| | containers and sandboxes removed | ${r.results.map((x) => x.containersRemoved).join(' | ')} |`,
    `| | event stream down (s) | ${r.results.map((x) => (x.gapsMs / 1000).toFixed(1)).join(' | ')} |`,
    `| | image volumes | ${r.results.map((x) => x.imageVolumes).join(' | ')} |`,
    '',
  );
  for (const x of r.results) {
    lines.push(`## ${x.contender}`, '', x.config, '');
    if (x.error) lines.push('The run failed:', '', '```', x.error, '```', '');
    lines.push(
      `Workload: ${
        Object.entries(x.ops)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none'
      }.`,
      '',
      `Faults: ${
        Object.entries(x.faults)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none'
      }.`,
      '',
    );
    if (x.violations.length) {
      lines.push('Violations:', '');
      for (const v of x.violations.slice(0, 30))
        lines.push(`- ${v.invariant} at ${new Date(v.t).toISOString()}: ${v.what}`);
      if (x.violations.length > 30) lines.push(`- … ${x.violations.length - 30} more`);
      lines.push('');
    }
  }
  return lines.join('\n');
}
