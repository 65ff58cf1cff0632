import { down } from '../../cluster/controlplane.ts';

/** Stops the e2e control plane unless KUBEGC_E2E_KEEP=1 (handy when iterating on one test). */
export default async function globalTeardown(): Promise<void> {
  const dir = process.env.KUBEGC_E2E_CLUSTER_DIR;
  if (!dir || process.env.KUBEGC_E2E_KEEP === '1') return;
  await down(dir);
}
