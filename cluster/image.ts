// `npm run image`: builds the image kubegc:dev from the project's Dockerfile
// with podman, on a machine where no image can be pulled, and imports it into
// a containerd.
//
// The Dockerfile's base (`FROM node:24-bookworm-slim`) is made locally when it
// is not in our podman store: mmdebstrap makes a minimal Debian bookworm from
// this machine's Debian apt sources, plus what the official node image adds
// and the Dockerfile relies on: the Node 24 binary the `node` devDependency
// installed, npm and npx (for `npm ci` and `npx tsc`), the user node
// (1000:1000, home /home/node) and this machine's CA bundle with
// NODE_EXTRA_CA_CERTS pointing at it (npm traffic here goes through a CA
// Debian does not ship). It is imported under the name podman resolves the
// short name to, so the Dockerfile stays as it is and `docker build` still
// works wherever the real base can be pulled.
//
// Everything lives under ~/.cache/kubegc/image (KUBEGC_CACHE_DIR/image): the
// base tarball, the npm tarball, a private podman store (never the machine's
// default one) and the OCI archive. Needs root (mmdebstrap --mode=root,
// rootful podman). Runs directly under Node's type stripping, so it uses only
// erasable TypeScript syntax.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync, readdirSync, statfsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from './controlplane.ts';
import { ensurePackages, type Requirement } from './packages.ts';

export const IMAGE_PACKAGES: Requirement[] = [
  { provides: 'podman', pkg: 'podman', why: 'builds the kubegc image from the Dockerfile' },
  { provides: 'mmdebstrap', pkg: 'mmdebstrap', why: 'makes the image’s Debian base locally' },
  // podman is told to use runc (podmanArgv): Debian's podman pulls in crun, not runc.
  { provides: 'runc', pkg: 'runc', why: 'the OCI runtime podman is told to use' },
];

/** What importing into containerd needs on top of IMAGE_PACKAGES. */
export const IMPORT_PACKAGES: Requirement[] = [
  { provides: 'ctr', pkg: 'containerd', why: 'imports the kubegc image into containerd' },
];

/** npm and npx in the base: npm 11 is the line Node 24 ships with. */
export const NPM_VERSION = '11.19.1';

/** Bump when the base recipe changes: a new key makes a new base. */
const BASE_RECIPE = 1;

/** What Debian's -slim images leave out (debuerreotype's slimify): docs, man pages, locales. */
const SLIM_DPKG = [
  'path-exclude=/usr/share/doc/*',
  'path-include=/usr/share/doc/*/copyright',
  'path-exclude=/usr/share/groff/*',
  'path-exclude=/usr/share/info/*',
  'path-exclude=/usr/share/linda/*',
  'path-exclude=/usr/share/lintian/overrides/*',
  'path-exclude=/usr/share/locale/*',
  'path-exclude=/usr/share/man/*',
];

/** Where the machine's CA bundle is, and where the base image has it. */
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

export const IMAGE_CACHE = path.join(
  process.env.KUBEGC_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'kubegc'),
  'image',
);
const STORE = path.join(IMAGE_CACHE, 'storage');
const RUNROOT = '/run/kubegc-podman';
/** Output of every command of the last run (one line per step goes to `log`). */
export const IMAGE_LOG = path.join(IMAGE_CACHE, 'last-run.log');

export class ImageError extends Error {}

const noop = (): void => undefined;

// ---------------------------------------------------------------------------
// Commands

/**
 * podman with our private store; the global flags make it independent of
 * systemd and of crun. podman prefers crun when Debian's crun is installed,
 * and crun refuses these cgroup-v1 hosts ("cgroups in hybrid mode not
 * supported"), so the runtime is named: runc, which containerd brings.
 */
export function podmanArgv(...args: string[]): string[] {
  return [
    'podman',
    '--runtime',
    'runc',
    '--root',
    STORE,
    '--runroot',
    RUNROOT,
    '--tmpdir',
    path.join(RUNROOT, 'libpod'),
    '--storage-driver',
    storageDriver(),
    '--cgroup-manager',
    'cgroupfs',
    '--events-backend',
    'file',
    ...args,
  ];
}

/**
 * `podman run --rm --network=none IMAGE ARGS…` with explicit nofile and nproc
 * limits: podman's defaults (1048576) are above the hard limits here, and
 * root without CAP_SYS_RESOURCE may not raise them (runc: "error setting
 * rlimit type 7: operation not permitted"). So: this process's limits, nproc
 * at most kernel.pid_max (the most podman passes on to runc).
 */
export function podmanRunArgv(image: string, ...args: string[]): string[] {
  const read = (f: string): string => (existsSync(f) ? readFileSync(f, 'utf8') : '');
  const limits = read('/proc/self/limits');
  const pidMax = Number(read('/proc/sys/kernel/pid_max').trim()) || Infinity;
  const ulimits: string[] = [];
  for (const [name, row, cap] of [
    ['nofile', 'Max open files', Infinity],
    ['nproc', 'Max processes', pidMax],
  ] as const) {
    const m = new RegExp(`^${row}\\s+(\\S+)\\s+(\\S+)`, 'm').exec(limits);
    if (!m?.[1] || !m[2]) continue;
    const n = (v: string): number => Math.min(v === 'unlimited' ? Infinity : Number(v), cap);
    const [soft, hard] = [n(m[1]), n(m[2])];
    if (Number.isFinite(hard)) ulimits.push('--ulimit', `${name}=${Math.min(soft, hard)}:${hard}`);
  }
  return podmanArgv('run', '--rm', '--network=none', ...ulimits, image, ...args);
}

/** overlay, unless the cache itself is on overlayfs (a container), where only vfs works. */
function storageDriver(): string {
  const OVERLAYFS_SUPER_MAGIC = 0x794c7630;
  let dir = IMAGE_CACHE;
  while (!existsSync(dir)) dir = path.dirname(dir);
  return statfsSync(dir).type === OVERLAYFS_SUPER_MAGIC ? 'vfs' : 'overlay';
}

interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Keep stdout (returned); stderr and, otherwise, stdout go to IMAGE_LOG. */
  capture?: boolean;
  /** The command's name in an error (default: its first two words). */
  what?: string;
}

/** Runs a command, its output appended to IMAGE_LOG; on failure throws with its tail. */
async function run(argv: string[], o: RunOptions = {}): Promise<string> {
  const [cmd, ...args] = argv;
  if (!cmd) throw new ImageError('run: empty command');
  await fs.mkdir(IMAGE_CACHE, { recursive: true });
  await fs.appendFile(IMAGE_LOG, `\n$ ${argv.join(' ')}\n`);
  const out = await fs.open(IMAGE_LOG, 'a');
  try {
    return await new Promise<string>((resolve, reject) => {
      const child = spawn(cmd, args, {
        cwd: o.cwd ?? REPO_ROOT,
        env: o.env ?? process.env,
        stdio: ['ignore', o.capture ? 'pipe' : out.fd, out.fd],
      });
      let stdout = '';
      child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.on('error', (err) => reject(new ImageError(`${cmd}: ${err.message}`)));
      child.on('close', (code, signal) => {
        if (code === 0) resolve(stdout);
        else
          reject(
            new ImageError(
              `${o.what ?? argv.slice(0, 2).join(' ')} failed (${signal ?? `exit ${code}`}); ` +
                `the end of ${IMAGE_LOG}:\n${tail(IMAGE_LOG, 25)}`,
            ),
          );
      });
    });
  } finally {
    await out.close();
  }
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

const podman = (args: string[], o: RunOptions = {}): Promise<string> =>
  run(podmanArgv(...args), { what: `podman ${args[0] ?? ''}`, ...o });

async function podmanImageId(ref: string): Promise<string | undefined> {
  try {
    return (
      await podman(['image', 'inspect', '--format', '{{.Id}}', ref], { capture: true })
    ).trim();
  } catch {
    return undefined;
  }
}

/** Removes an image the store no longer needs; one still in use (a parent) stays. */
async function removeImage(id: string): Promise<void> {
  try {
    await podman(['rmi', id]);
  } catch {
    /* still used, or already gone */
  }
}

const seconds = (since: number): number => Math.round((Date.now() - since) / 100) / 10;

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

// ---------------------------------------------------------------------------
// Inputs

export function ensureImagePackages(
  log: (line: string) => void = noop,
  o: { forImport?: boolean } = {},
): void {
  ensurePackages(o.forImport ? [...IMAGE_PACKAGES, ...IMPORT_PACKAGES] : IMAGE_PACKAGES, log);
}

/** The external images the Dockerfile builds FROM (stage names left out). */
export function dockerfileBases(dockerfile = path.join(REPO_ROOT, 'Dockerfile')): string[] {
  const stages = new Set<string>();
  const bases: string[] = [];
  for (const line of readFileSync(dockerfile, 'utf8').split('\n')) {
    const m = /^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (!m?.[1]) continue;
    if (!stages.has(m[1].toLowerCase()) && !bases.includes(m[1])) bases.push(m[1]);
    if (m[2]) stages.add(m[2].toLowerCase());
  }
  return bases;
}

/** The Node binary the `node` devDependency installed (not whatever runs us). */
export async function nodeBinary(): Promise<{ file: string; version: string }> {
  const candidates = [
    path.join(REPO_ROOT, 'node_modules', '.bin', 'node'),
    path.join(REPO_ROOT, 'node_modules', 'node', 'bin', 'node'),
    process.execPath,
  ];
  for (const c of candidates) {
    if (!existsSync(c)) continue;
    const file = await fs.realpath(c);
    const head = Buffer.alloc(4);
    const fh = await fs.open(file, 'r');
    await fh.read(head, 0, 4, 0);
    await fh.close();
    if (!head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) continue; // not an ELF binary
    const version = (await run([file, '--version'], { capture: true })).trim().replace(/^v/, '');
    return { file, version };
  }
  throw new ImageError('no Node.js binary found: run `npm ci` (the `node` devDependency)');
}

/**
 * The host's apt sources files that only name Debian's own mirrors (so
 * third-party repositories stay out), when they carry bookworm; [] means
 * mmdebstrap's defaults.
 */
function debianSources(): string[] {
  const files = ['/etc/apt/sources.list'];
  const dir = '/etc/apt/sources.list.d';
  if (existsSync(dir))
    for (const f of readdirSync(dir).sort())
      if (f.endsWith('.list') || f.endsWith('.sources')) files.push(path.join(dir, f));
  return files.filter((f) => {
    if (!existsSync(f)) return false;
    const text = readFileSync(f, 'utf8').replace(/^\s*#.*$/gm, '');
    const uris = [
      ...[...text.matchAll(/^\s*URIs:\s*(.+)$/gim)].flatMap((m) => (m[1] ?? '').split(/\s+/)),
      ...[...text.matchAll(/^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)/gm)].map((m) => m[1] ?? ''),
    ].filter(Boolean);
    return (
      uris.length > 0 &&
      uris.every((u) => /^https?:\/\/([a-z0-9-]+\.)*debian\.org(\/|$)/i.test(u)) &&
      /\bbookworm\b/.test(text)
    );
  });
}

// ---------------------------------------------------------------------------
// The base image

interface BaseRecord {
  key: string;
  image: string;
  id: string;
}

/** npm from the registry, cached: `npm pack npm@NPM_VERSION`. */
async function npmTarball(nodeDir: string): Promise<string> {
  const file = path.join(IMAGE_CACHE, `npm-${NPM_VERSION}.tgz`);
  if (existsSync(file)) return file;
  // The npm that runs `npm run image`, on our Node; else npm on PATH.
  const npmCli = process.env.npm_execpath;
  const argv = npmCli?.endsWith('.js') ? [path.join(nodeDir, 'node'), npmCli] : ['npm'];
  await run([...argv, 'pack', `npm@${NPM_VERSION}`, '--pack-destination', IMAGE_CACHE], {
    cwd: IMAGE_CACHE,
    env: { ...process.env, PATH: `${nodeDir}:${process.env.PATH ?? ''}` },
  });
  if (!existsSync(file)) throw new ImageError(`npm pack npm@${NPM_VERSION} did not write ${file}`);
  return file;
}

/**
 * Makes the Dockerfile's base in the private store unless it is there with
 * the current key (recipe, Node and npm versions, CA bundle): from the cached
 * tarball when there is one, else with mmdebstrap (~40 s on 2 CPUs, a 270 MB tarball).
 */
async function ensureBase(o: {
  log: (line: string) => void;
  rebuild: boolean;
}): Promise<{ image: string; how: 'made' | 'imported' | 'reused'; replaced: boolean }> {
  const bases = dockerfileBases();
  const node = await nodeBinary();
  const major = node.version.split('.')[0];
  const want = `node:${major}-bookworm-slim`;
  if (bases.length !== 1 || bases[0] !== want)
    throw new ImageError(
      `the Dockerfile builds FROM ${bases.join(', ') || 'nothing'}; this script makes only ${want} ` +
        `(from the \`node\` devDependency, Node ${node.version})`,
    );
  // The name podman resolves the short name to with --pull=never: the alias
  // in /etc/containers/registries.conf.d/shortnames.conf ("node" =
  // "docker.io/library/node"), which wins over localhost/. Checked below.
  const image = `docker.io/library/${want}`;
  if (!existsSync(CA_BUNDLE)) throw new ImageError(`no CA bundle at ${CA_BUNDLE}`);
  const key = createHash('sha256')
    .update(
      JSON.stringify({
        recipe: BASE_RECIPE,
        node: node.version,
        nodeSha: await sha256File(node.file),
        npm: NPM_VERSION,
        ca: await sha256File(CA_BUNDLE),
      }),
    )
    .digest('hex')
    .slice(0, 16);
  const recordFile = path.join(IMAGE_CACHE, 'base.json');
  const tarball = path.join(IMAGE_CACHE, `base-${key}.tar`);
  const rec = existsSync(recordFile)
    ? (JSON.parse(await fs.readFile(recordFile, 'utf8')) as BaseRecord)
    : undefined;
  if (!o.rebuild && rec?.key === key && rec.image === image)
    if ((await podmanImageId(image)) === rec.id) return { image, how: 'reused', replaced: false };

  let made = false;
  if (o.rebuild || !existsSync(tarball)) {
    for (const f of await fs.readdir(IMAGE_CACHE))
      if (/^base-.*\.tar(\.tmp)?$/.test(f)) await fs.rm(path.join(IMAGE_CACHE, f), { force: true });
    const npm = await npmTarball(path.dirname(node.file));
    const sources = debianSources();
    o.log(
      `base: making ${image} with mmdebstrap (Debian bookworm minbase from ${sources.join(', ') || 'deb.debian.org'}, ` +
        `Node ${node.version}, npm ${NPM_VERSION}, user node 1000:1000, ${CA_BUNDLE})`,
    );
    const q = shellQuote;
    const npmDir = '"$1"/usr/local/lib/node_modules/npm';
    const hooks = [
      `install -D -m 0755 ${q(node.file)} "$1"/usr/local/bin/node`,
      `mkdir -p ${npmDir} && tar -xzf ${q(npm)} -C ${npmDir} --strip-components=1 --no-same-owner`,
      'ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1"/usr/local/bin/npm',
      'ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1"/usr/local/bin/npx',
      'chroot "$1" groupadd --gid 1000 node',
      'chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node',
      `install -D -m 0644 ${q(CA_BUNDLE)} "$1"${CA_BUNDLE}`,
      // As the official image's Dockerfile ends: the binaries run in the new root.
      'chroot "$1" /usr/local/bin/node --version && chroot "$1" /usr/local/bin/npm --version',
    ];
    await run(
      [
        'mmdebstrap',
        '--variant=minbase',
        '--mode=root',
        '--format=tar',
        ...SLIM_DPKG.map((o) => `--dpkgopt=${o}`),
        ...hooks.map((h) => `--customize-hook=${h}`),
        'bookworm',
        `${tarball}.tmp`,
        ...sources,
      ],
      { cwd: IMAGE_CACHE },
    );
    await fs.rename(`${tarball}.tmp`, tarball);
    made = true;
  }

  const id = (
    await podman(
      [
        'import',
        '--quiet',
        '--change',
        'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--change',
        `ENV NODE_VERSION=${node.version}`,
        '--change',
        `ENV NODE_EXTRA_CA_CERTS=${CA_BUNDLE}`,
        '--change',
        'CMD ["node"]',
        tarball,
        image,
      ],
      { capture: true },
    )
  )
    .trim()
    .replace(/^sha256:/, '');
  // What the Dockerfile's FROM resolves to must be what we imported.
  const resolved = await podmanImageId(want);
  if (resolved !== id)
    throw new ImageError(
      `podman resolves ${want} to ${resolved ?? 'nothing'}, not to the imported ${image} (${id}): ` +
        'check /etc/containers/registries.conf(.d)',
    );
  // Node, npm, npx and the user, as the Dockerfile uses them.
  const check = await run(
    podmanRunArgv(
      image,
      'sh',
      '-c',
      'node --version && npm --version && npx --version && id -u node && id -g node && echo ~node',
    ),
    { capture: true, what: `podman run ${image}` },
  );
  const wantCheck = [`v${node.version}`, NPM_VERSION, NPM_VERSION, '1000', '1000', '/home/node'];
  if (check.trim().split('\n').join(' ') !== wantCheck.join(' '))
    throw new ImageError(
      `the base ${image} is not right: got "${check.trim()}", want "${wantCheck.join(' ')}"`,
    );
  await fs.writeFile(recordFile, JSON.stringify({ key, image, id } satisfies BaseRecord) + '\n');
  const replaced = rec !== undefined && rec.id !== id;
  if (replaced) await removeImage(rec.id);
  return { image, how: made ? 'made' : 'imported', replaced };
}

// ---------------------------------------------------------------------------
// Build, save, import

export interface BuiltKubegcImage {
  /** The OCI archive (`podman save --format oci-archive`). */
  archive: string;
  /** The name containerd gives it on import (ctr images import). */
  ref: string;
  /** The name in the podman store, for `podman … run` (podmanRunArgv). */
  podmanRef: string;
  /** The base: made (mmdebstrap), imported from the cached tarball, or reused from the store. */
  baseSeconds: number;
  base: 'made' | 'imported' | 'reused';
  buildSeconds: number;
  saveSeconds: number;
  archiveBytes: number;
}

/** The name an archive's index.json gives its image (org.opencontainers.image.ref.name). */
async function archiveRefName(archive: string): Promise<string> {
  const index = JSON.parse(
    await run(['tar', '-xOf', archive, 'index.json'], { capture: true }),
  ) as {
    manifests?: { annotations?: Record<string, string> }[];
  };
  const name = index.manifests?.[0]?.annotations?.['org.opencontainers.image.ref.name'];
  if (!name) throw new ImageError(`${archive}: index.json names no image`);
  return name;
}

/**
 * containerd's name for an image reference: docker.io/library/ added to bare
 * names, as ctr (reference/docker.ParseDockerRef) does.
 */
export function containerdRef(name: string): string {
  const [first, ...rest] = name.split('/');
  const hasDomain =
    rest.length > 0 &&
    first !== undefined &&
    (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasDomain) return name;
  return rest.length === 0 ? `docker.io/library/${name}` : `docker.io/${name}`;
}

export async function buildKubegcImage(
  o: {
    log?: (line: string) => void;
    tag?: string;
    /** Make the base again even when the cached one is current. */
    rebuildBase?: boolean;
  } = {},
): Promise<BuiltKubegcImage> {
  const log = o.log ?? noop;
  const tag = o.tag ?? 'kubegc:dev';
  if (process.getuid?.() !== 0)
    throw new ImageError(
      'npm run image needs root: mmdebstrap --mode=root and rootful podman (private store)',
    );
  ensureImagePackages(log);
  await fs.mkdir(IMAGE_CACHE, { recursive: true });
  await fs.writeFile(IMAGE_LOG, `# npm run image, ${new Date().toISOString()}\n`);

  let t = Date.now();
  const base = await ensureBase({ log, rebuild: o.rebuildBase ?? false });
  const baseSeconds = seconds(t);
  log(`base: ${base.image} ${base.how} (${baseSeconds.toFixed(1)} s)`);

  t = Date.now();
  // A new base makes the build cache (images on the old base) useless: drop
  // what no tag names. Otherwise keep it (npm ci stays cached).
  if (base.replaced) await podman(['image', 'prune', '--force']);
  const previous = await podmanImageId(tag);
  await podman(['build', '--pull=never', '--network=host', '-t', tag, '-f', 'Dockerfile', '.'], {
    cwd: REPO_ROOT,
  });
  const buildSeconds = seconds(t);
  const podmanRef = (
    await podman(['image', 'inspect', '--format', '{{index .RepoTags 0}}', tag], { capture: true })
  ).trim();
  log(`build: ${podmanRef} from the Dockerfile (${buildSeconds.toFixed(1)} s)`);
  // The image the tag named before (and its own layers); the build cache stays.
  if (previous && previous !== (await podmanImageId(tag))) await removeImage(previous);

  t = Date.now();
  const archive = path.join(IMAGE_CACHE, `${tag.replace(/[^A-Za-z0-9_.-]+/g, '-')}.oci.tar`);
  // The image ID the archive holds, so an unchanged image is not saved again.
  const savedId = `${archive}.id`;
  const id = await podmanImageId(tag);
  const upToDate =
    existsSync(archive) && existsSync(savedId) && readFileSync(savedId, 'utf8').trim() === id;
  if (!upToDate) {
    await fs.rm(`${archive}.tmp`, { force: true });
    await fs.rm(savedId, { force: true });
    await podman(['save', '--format', 'oci-archive', '-o', `${archive}.tmp`, tag]);
    await fs.rename(`${archive}.tmp`, archive);
    await fs.writeFile(savedId, `${id}\n`);
  }
  const ref = containerdRef(await archiveRefName(archive));
  const archiveBytes = (await fs.stat(archive)).size;
  const saveSeconds = seconds(t);
  log(
    `save: ${archive}, ${Math.round(archiveBytes / 1e6)} MB${upToDate ? ', unchanged' : ''} (${saveSeconds.toFixed(1)} s)`,
  );
  return {
    archive,
    ref,
    podmanRef,
    baseSeconds,
    base: base.how,
    buildSeconds,
    saveSeconds,
    archiveBytes,
  };
}

/** Imports an OCI archive into a containerd; returns the image's name as containerd lists it. */
export async function importImage(
  archive: string,
  o: { address?: string; namespace?: string; snapshotter?: string } = {},
): Promise<string> {
  const address = o.address ?? '/run/containerd/containerd.sock';
  const namespace = o.namespace ?? 'k8s.io';
  ensurePackages(IMPORT_PACKAGES);
  const want = containerdRef(await archiveRefName(archive));
  const ctr = ['ctr', '--address', address, '--namespace', namespace];
  await run([
    ...ctr,
    'images',
    'import',
    ...(o.snapshotter ? ['--snapshotter', o.snapshotter] : []),
    archive,
  ]);
  const listed = (await run([...ctr, 'images', 'ls', '--quiet'], { capture: true })).split('\n');
  if (!listed.includes(want))
    throw new ImageError(
      `ctr imported ${archive} but ${address} (namespace ${namespace}) does not list ${want}`,
    );
  return want;
}

/**
 * Pushes the image podman built (`podmanRef`) to `target` (`host:port/name:tag`)
 * over TLS, trusting the CA in `caFile` (podman's --cert-dir is a directory
 * of CA certificates). Returns `target` and the digest the registry stored:
 * the reference a kubelet pulls, as in any cluster.
 */
export async function pushImage(
  podmanRef: string,
  target: string,
  caFile: string,
): Promise<{ ref: string; digest: string }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-push-'));
  try {
    await fs.copyFile(caFile, path.join(dir, 'ca.crt'));
    const digestFile = path.join(dir, 'digest');
    await podman([
      'push',
      '--tls-verify=true',
      '--cert-dir',
      dir,
      '--digestfile',
      digestFile,
      podmanRef,
      `docker://${target}`,
    ]);
    return { ref: target, digest: (await fs.readFile(digestFile, 'utf8')).trim() };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
