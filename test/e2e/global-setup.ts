// Starts (or reuses) one real control plane for the whole e2e run. Tests read
// its location from the environment; each test works in its own namespace.
import path from 'node:path';
import { REPO_ROOT, up } from '../../cluster/controlplane.ts';
import { ensurePackages, TEST_PACKAGES } from '../../cluster/packages.ts';
import { applyKubegcServiceAccount, SA_OVERLAY } from '../support/service-account.ts';

export default async function globalSetup(): Promise<void> {
  // Prometheus, containerd, runc...: installed now when missing, or the run stops here naming them.
  ensurePackages(TEST_PACKAGES, (l) => process.stderr.write(`\ne2e setup: ${l}`));
  const dir = process.env.KUBEGC_E2E_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster-e2e');
  const started = Date.now();
  const cluster = await up({
    dir,
    audit: true,
    log: (l) => process.stderr.write(`\ne2e cluster: ${l}`),
  });
  process.stderr.write(
    `\ne2e cluster: ${cluster.reused ? 'reused' : 'started'} ${cluster.server} in ${((Date.now() - started) / 1000).toFixed(1)}s\n`,
  );
  // kubegc runs as its real service account, under the guardrails (test/support/service-account.ts).
  await applyKubegcServiceAccount(cluster, (l) => process.stderr.write(`\ne2e setup: ${l}`));
  process.stderr.write(`e2e cluster: applied ${path.relative(REPO_ROOT, SA_OVERLAY)}\n`);
  process.env.KUBEGC_E2E_CLUSTER_DIR = dir;
  process.env.KUBEGC_E2E_KUBECONFIG = cluster.kubeconfig;
}
