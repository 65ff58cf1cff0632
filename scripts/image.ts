// `npm run image [-- --registry HOST:PORT --registry-ca FILE | --containerd-address PATH | --no-import] [--rebuild-base]`:
// builds kubegc:dev from the Dockerfile with podman, its base made locally
// (cluster/image.ts), and then, as for any cluster, pushes it to a registry:
// by default the local node's (`npm run cluster -- up --node`, https://198.18.0.1:5000,
// trusted through the local control plane's CA) when it serves. Without a
// registry it saves an OCI archive and imports it into the containerd at
// /run/containerd/containerd.sock (or --containerd-address) when that socket
// exists. One line per step, with its duration; every command's output goes
// to ~/.cache/kubegc/image/last-run.log.
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT, paths } from '../cluster/controlplane.ts';
import {
  IMAGE_LOG,
  buildKubegcImage,
  ensureImagePackages,
  importImage,
  podmanRunArgv,
  pushImage,
} from '../cluster/image.ts';
import { REGISTRY_HOST, registryServes } from '../cluster/registry.ts';

const USAGE = `usage: npm run image [-- [--registry HOST:PORT] [--registry-ca FILE] [--containerd-address PATH] [--namespace NS] [--no-import] [--rebuild-base]]

Builds kubegc:dev from the Dockerfile with podman (root; the base node:24-bookworm-slim
is made locally with mmdebstrap), then pushes it to a registry as HOST:PORT/kubegc:dev:
by default the local node's (npm run cluster -- up --node: ${REGISTRY_HOST}) when it
serves. With no registry, saves it as an OCI archive and imports it into containerd
(namespace k8s.io) when the socket exists.

  --registry HOST:PORT       push there (TLS; default ${REGISTRY_HOST} when it serves)
  --registry-ca FILE         the CA that signed the registry's certificate
                             (default: the local control plane's, <cluster dir>/pki/ca.crt)
  --containerd-address PATH  import into this containerd's socket instead of pushing
                             (default /run/containerd/containerd.sock when no registry serves)
  --namespace NS             containerd namespace for the import (default k8s.io, the CRI's)
  --no-import                build and save the archive only
  --rebuild-base             make the base again even when the cached one is current

The cluster directory is .cluster in the repository (env KUBEGC_CLUSTER_DIR).`;

function fail(msg: string, code = 1): never {
  console.error(`image: ${msg}`);
  process.exit(code);
}

function parse(): ReturnType<typeof parseFlags> {
  try {
    return parseFlags();
  } catch (err) {
    fail(`${(err as Error).message}\n${USAGE}`, 2);
  }
}
function parseFlags() {
  return parseArgs({
    args: process.argv.slice(2),
    strict: true,
    allowPositionals: false,
    options: {
      registry: { type: 'string' },
      'registry-ca': { type: 'string' },
      'containerd-address': { type: 'string' },
      namespace: { type: 'string', default: 'k8s.io' },
      'no-import': { type: 'boolean', default: false },
      'rebuild-base': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }).values;
}
const flags = parse();
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}
if (flags['no-import'] && flags['containerd-address'] !== undefined)
  fail('--no-import and --containerd-address do not go together', 2);
if (
  flags.registry !== undefined &&
  (flags['no-import'] || flags['containerd-address'] !== undefined)
)
  fail('--registry goes with neither --no-import nor --containerd-address', 2);
if (flags.registry !== undefined && !/^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(flags.registry))
  fail(`--registry ${flags.registry}: want HOST or HOST:PORT, e.g. ${REGISTRY_HOST}`, 2);

const log = (line: string): void => console.log(`image: ${line}`);
const seconds = (since: number): number => Math.round((Date.now() - since) / 100) / 10;
const address = flags['containerd-address'] ?? '/run/containerd/containerd.sock';
const isSocket = (p: string): boolean => existsSync(p) && statSync(p).isSocket();
const clusterDir = process.env.KUBEGC_CLUSTER_DIR ?? path.join(REPO_ROOT, '.cluster');
const registryCa = flags['registry-ca'] ?? paths(clusterDir).caCrt;

/** Where the image goes: a registry, a containerd, or nowhere but the archive. */
async function destination(): Promise<'push' | 'import' | 'none'> {
  if (flags['no-import']) return 'none';
  if (flags.registry !== undefined) return 'push';
  if (flags['containerd-address'] !== undefined) {
    if (!isSocket(address)) fail(`--containerd-address ${address}: no socket there`, 1);
    return 'import';
  }
  if (existsSync(registryCa) && (await registryServes(registryCa))) return 'push';
  return isSocket(address) ? 'import' : 'none';
}

try {
  const started = Date.now();
  const to = await destination();
  if (to === 'push' && !existsSync(registryCa))
    fail(
      `--registry-ca ${registryCa}: no such file (the CA that signed the registry's certificate)`,
    );
  ensureImagePackages(log, { forImport: to === 'import' });
  const built = await buildKubegcImage({ log, rebuildBase: flags['rebuild-base'] });
  if (to === 'push') {
    const t = Date.now();
    const target = `${flags.registry ?? REGISTRY_HOST}/kubegc:dev`;
    const pushed = await pushImage(built.podmanRef, target, registryCa);
    log(`push: ${pushed.ref}@${pushed.digest} (${seconds(t).toFixed(1)} s)`);
  } else if (to === 'import') {
    const t = Date.now();
    const ref = await importImage(built.archive, { address, namespace: flags.namespace });
    log(
      `import: ${ref} into ${address}, namespace ${flags.namespace} (${seconds(t).toFixed(1)} s)`,
    );
  } else {
    log(
      flags['no-import']
        ? `not imported (--no-import): the archive is ${built.archive}`
        : `no registry serves at ${REGISTRY_HOST} and no containerd at ${address}: only built the archive, ${built.archive}`,
    );
  }
  log(
    `done in ${seconds(started).toFixed(1)} s; run it with: ${podmanRunArgv(built.podmanRef, '--version').join(' ')}`,
  );
} catch (err) {
  fail(`${(err as Error).message}\n(every command's output: ${IMAGE_LOG})`);
}
