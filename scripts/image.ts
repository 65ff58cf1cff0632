// `npm run image [-- --containerd-address PATH] [--no-import] [--rebuild-base]`:
// builds kubegc:dev from the Dockerfile with podman, its base made locally
// (cluster/image.ts), saves it as an OCI archive and imports that into the
// containerd at /run/containerd/containerd.sock (or --containerd-address),
// namespace k8s.io, when that socket exists. One line per step, with its
// duration; every command's output goes to ~/.cache/kubegc/image/last-run.log.
import { existsSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  IMAGE_LOG,
  buildKubegcImage,
  ensureImagePackages,
  importImage,
  podmanRunArgv,
} from '../cluster/image.ts';

const USAGE = `usage: npm run image [-- [--containerd-address PATH] [--namespace NS] [--no-import] [--rebuild-base]]

Builds kubegc:dev from the Dockerfile with podman (root; the base node:24-bookworm-slim
is made locally with mmdebstrap), saves it as an OCI archive and imports it into
containerd (namespace k8s.io) when the socket exists.

  --containerd-address PATH  containerd's socket (default /run/containerd/containerd.sock)
  --namespace NS             containerd namespace (default k8s.io, the CRI's)
  --no-import                build and save the archive only
  --rebuild-base             make the base again even when the cached one is current`;

function fail(msg: string, code = 1): never {
  console.error(`image: ${msg}`);
  process.exit(code);
}

let flags;
try {
  flags = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    allowPositionals: false,
    options: {
      'containerd-address': { type: 'string' },
      namespace: { type: 'string', default: 'k8s.io' },
      'no-import': { type: 'boolean', default: false },
      'rebuild-base': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }).values;
} catch (err) {
  fail(`${(err as Error).message}\n${USAGE}`, 2);
}
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}
if (flags['no-import'] && flags['containerd-address'] !== undefined)
  fail('--no-import and --containerd-address do not go together', 2);

const log = (line: string): void => console.log(`image: ${line}`);
const seconds = (since: number): number => Math.round((Date.now() - since) / 100) / 10;
const address = flags['containerd-address'] ?? '/run/containerd/containerd.sock';
const isSocket = (p: string): boolean => existsSync(p) && statSync(p).isSocket();

try {
  const started = Date.now();
  const doImport = !flags['no-import'] && isSocket(address);
  if (!flags['no-import'] && flags['containerd-address'] !== undefined && !doImport)
    fail(`--containerd-address ${address}: no socket there`, 1);
  ensureImagePackages(log, { forImport: doImport });
  const built = await buildKubegcImage({ log, rebuildBase: flags['rebuild-base'] });
  if (doImport) {
    const t = Date.now();
    const ref = await importImage(built.archive, { address, namespace: flags.namespace });
    log(
      `import: ${ref} into ${address}, namespace ${flags.namespace} (${seconds(t).toFixed(1)} s)`,
    );
  } else {
    log(
      flags['no-import']
        ? `not imported (--no-import): the archive is ${built.archive}`
        : `no containerd at ${address}: only built the archive, ${built.archive}`,
    );
  }
  log(
    `done in ${seconds(started).toFixed(1)} s; run it with: ${podmanRunArgv(built.podmanRef, '--version').join(' ')}`,
  );
} catch (err) {
  fail(`${(err as Error).message}\n(every command's output: ${IMAGE_LOG})`);
}
