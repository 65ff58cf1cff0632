// The fixture an e2e test file starts from, as upstream's test/e2e/framework
// gives each test its clients and namespace:
//
//   const { cluster, c, namespace } = await e2e();
//
// at the top of the file. Top-level await, so that the file's tests see plain
// values rather than variables a beforeAll fills in (and a fixture that needs
// the cluster, such as in-process-gc.ts, is built the same way right below).
// What a fixture starts it stops after the file with afterFile().
import type { Cluster } from '../../cluster/controlplane.ts';
import { clients, e2eCluster, testNamespace, type Clients } from './cluster.ts';

export interface ClusterFixture {
  /** The shared control plane of the e2e run (test/e2e/global-setup.ts). */
  cluster: Cluster;
  /** Its admin clients (system:masters). */
  c: Clients;
  /** Creates a namespace of the calling test's own, `prefix-<pid>-<time>-<n>`. */
  namespace(prefix: string): Promise<string>;
  /** Every namespace namespace() made (this file's own). */
  namespaces: ReadonlySet<string>;
}

/**
 * The cluster fixture of one test file (the control plane is checked ready
 * first). The namespaces it makes are left to the end of the run, unless
 * `deleteNamespaces`: then they are deleted after the file, after every
 * cleanup registered later (say, of an object that would hold their deletion).
 */
export async function e2e(opts: { deleteNamespaces?: boolean } = {}): Promise<ClusterFixture> {
  const cluster = await e2eCluster();
  const c = clients(cluster);
  // Registered now, at the file's top level: afterFile() may then be called from a test too.
  registerCleanups();
  const made = new Set<string>();
  if (opts.deleteNamespaces)
    afterFile(async () => {
      for (const name of made) await c.core.deleteNamespace({ name }).catch(() => undefined);
    });
  return {
    cluster,
    c,
    async namespace(prefix) {
      const ns = await testNamespace(c.core, prefix);
      made.add(ns);
      return ns;
    },
    namespaces: made,
  };
}

// Jest gives each test file a module registry of its own, so these are per file.
const cleanups: (() => Promise<void> | void)[] = [];
let registered = false;

function registerCleanups(): void {
  if (registered) return;
  registered = true;
  afterAll(async () => {
    let first: unknown;
    for (const f of cleanups.splice(0).reverse()) {
      try {
        await f();
      } catch (err) {
        first ??= err;
      }
    }
    if (first !== undefined) throw first;
  });
}

/**
 * Runs `fn` after the file's tests. Cleanups run last registered first (what
 * was started last is stopped first, as the stack of fixtures was built), and
 * each runs even when one before it failed; the first failure is reported.
 * A test may register one too, once e2e() has run.
 */
export function afterFile(fn: () => Promise<void> | void): void {
  registerCleanups();
  cleanups.push(fn);
}
