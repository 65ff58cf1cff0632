// A short node soak in CI (issue 33): about 3 minutes of the node soak's
// seeded workload (soak/lib/node/: images named in every spelling, pins, Jobs,
// Deployments rolling, a CronJob, init-container waits, restart loops, fills
// past the thresholds) with kubegc node beside the real kubelet and
// containerd, and one each of four faults (kubegc killed and restarted from
// its state file, containerd restarted, the API blackholed, a `--once` run
// under a node name that does not exist). Its own control plane and node in
// .cluster-soak-node-ci, taken down at the end. Fails on any N1–N5 violation;
// the full run is `npm run soak -- --node` (soak/README.md).
import { renderNode } from '../../soak/lib/node/node-report.ts';
import { runNodeSoak } from '../../soak/lib/node/node-soak.ts';

test(
  'node soak: kubegc node keeps N1–N5 beside the kubelet through a seeded workload and four faults',
  async () => {
    const lines: string[] = [];
    const result = await runNodeSoak({
      durationMs: 180_000,
      seed: 1,
      contenders: ['kubegc'],
      dir: '.cluster-soak-node-ci',
      maxAgeS: 60,
      faults: ['kubegc-restart', 'wrong-node-name', 'containerd-restart', 'api-blackhole'],
      log: (l) => lines.push(l),
    });
    const r = result.results[0];
    if (!r) throw new Error('the node soak returned no result');
    const report = renderNode(result);
    process.stderr.write(`\nCI node soak (seed 1, 3 min, kubegc):\n${report}\n`);
    if (r.error || r.violations.length) throw new Error(`${report}\n\nlog:\n${lines.join('\n')}`);
    // The run exercised what it claims.
    expect(Object.keys(r.faults).sort()).toEqual([
      'api-blackhole',
      'containerd-restart',
      'kubegc-restart',
      'wrong-node-name',
    ]);
    for (const op of ['job', 'deployment', 'deleted jobs'])
      expect(r.ops[op] ?? 0).toBeGreaterThan(0);
    expect(r.containersRemoved).toBeGreaterThan(0);
    expect(r.imagesRemoved).toBeGreaterThan(0);
  },
  15 * 60_000,
);
