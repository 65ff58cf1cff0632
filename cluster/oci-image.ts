// Container images built from scratch for the node-GC e2e tests and the local
// node (its pause image): nothing can be pulled here, so we write OCI image
// layouts (blobs + index.json) into a tar archive that `ctr images import` loads. Layers are uncompressed tars
// (media type ...layer.v1.tar), so the CRI size of an image is close to the
// bytes its files take once unpacked.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';

export interface TarEntry {
  path: string;
  /** Regular file content; a directory when absent. */
  content?: Buffer;
  mode?: number;
}

const BLOCK = 512;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(name: string, size: number, mode: number, type: '0' | '5'): Buffer {
  const h = Buffer.alloc(BLOCK);
  let prefix = '';
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    // ustar splits long names at a '/' into prefix (155) and name (100).
    const cut = name.lastIndexOf('/', 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100)
      throw new Error(`tar: path too long: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  h.write(base, 0, 100);
  h.write(octal(mode, 8), 100);
  h.write(octal(0, 8), 108);
  h.write(octal(0, 8), 116);
  h.write(octal(size, 12), 124);
  h.write(octal(0, 12), 136); // mtime 0: identical inputs give identical digests
  h.write('        ', 148); // checksum field counts as spaces while summing
  h.write(type, 156);
  h.write('ustar\0', 257);
  h.write('00', 263);
  h.write(prefix, 345, 155);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return h;
}

/** A ustar archive of the entries (parent directories must be listed before their files). */
export function tarArchive(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const name = e.path.replace(/^\/+/, '');
    if (e.content === undefined) {
      parts.push(header(name.endsWith('/') ? name : `${name}/`, 0, e.mode ?? 0o755, '5'));
      continue;
    }
    parts.push(header(name, e.content.length, e.mode ?? 0o644, '0'), e.content);
    const pad = (BLOCK - (e.content.length % BLOCK)) % BLOCK;
    if (pad) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

/** Adds the parent directories of every file, once each, in order. */
function withParents(files: TarEntry[]): TarEntry[] {
  const seen = new Set<string>();
  const out: TarEntry[] = [];
  for (const f of files) {
    const parts = f.path.replace(/^\/+/, '').split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (!seen.has(dir)) {
        seen.add(dir);
        out.push({ path: dir });
      }
    }
    out.push(f);
  }
  return out;
}

export interface Layer {
  blob: Buffer;
  /** sha256:... of the blob; equal to the diff ID (the layer is not compressed). */
  digest: string;
}

const sha256 = (b: Buffer | string): string =>
  `sha256:${createHash('sha256').update(b).digest('hex')}`;

export function layerOf(files: TarEntry[]): Layer {
  const blob = tarArchive(withParents(files));
  return { blob, digest: sha256(blob) };
}

/** One file of `bytes` random (incompressible) bytes: every image built with it is unique. */
export function randomLayer(bytes: number): Layer {
  return layerOf([{ path: `data/${randomBytes(8).toString('hex')}`, content: randomBytes(bytes) }]);
}

/**
 * The host's own binaries and the shared libraries they load (from ldd), so
 * containers can run `sleep` and `true` without any image from a registry.
 */
export function hostToolsLayer(binaries = ['/bin/sleep', '/bin/true', '/bin/sh']): Layer {
  const files = new Map<string, TarEntry>();
  for (const bin of binaries) {
    files.set(bin, { path: bin, content: readFileSync(realpathSync(bin)), mode: 0o755 });
    const ldd = execFileSync('ldd', [bin], { encoding: 'utf8' });
    for (const m of ldd.matchAll(/(\/\S+)\s+\(0x/g)) {
      const lib = m[1] as string;
      if (!files.has(lib))
        files.set(lib, { path: lib, content: readFileSync(realpathSync(lib)), mode: 0o755 });
    }
  }
  // Mount points the runtime bind-mounts files onto.
  const etc = ['/etc/hosts', '/etc/resolv.conf', '/etc/hostname'].map((p) => ({
    path: p,
    content: Buffer.alloc(0),
  }));
  return layerOf([...files.values(), ...etc].sort((a, b) => a.path.localeCompare(b.path)));
}

export interface ImageSpec {
  /** Full reference, e.g. kubegc.test/app:1. */
  name: string;
  layers: Layer[];
  entrypoint?: string[];
}

export interface BuiltImage {
  name: string;
  /** The CRI image ID: the digest of the image config. */
  id: string;
  /** Bytes of all the image's blobs (config, manifest, layers). */
  contentBytes: number;
}

const OCI_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };
const ARCHITECTURE = OCI_ARCH[process.arch] ?? process.arch;

/** One image as blobs: what an OCI layout holds and what a registry push uploads. */
export interface ImageBlobs {
  config: Buffer;
  configDigest: string;
  manifest: Buffer;
  /** The manifest's digest: what `name@sha256:…` and the runtime's repoDigests name. */
  manifestDigest: string;
  layers: Layer[];
}

export const OCI_MANIFEST_TYPE = 'application/vnd.oci.image.manifest.v1+json';

/** The config and manifest of `img` for this machine's architecture. */
export function imageBlobs(img: ImageSpec): ImageBlobs {
  const config = Buffer.from(
    JSON.stringify({
      architecture: ARCHITECTURE,
      os: 'linux',
      config: img.entrypoint ? { Entrypoint: img.entrypoint } : {},
      rootfs: { type: 'layers', diff_ids: img.layers.map((l) => l.digest) },
    }),
  );
  const configDigest = sha256(config);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST_TYPE,
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: configDigest,
        size: config.length,
      },
      layers: img.layers.map((l) => ({
        mediaType: 'application/vnd.oci.image.layer.v1.tar',
        digest: l.digest,
        size: l.blob.length,
      })),
    }),
  );
  return { config, configDigest, manifest, manifestDigest: sha256(manifest), layers: img.layers };
}

/** An OCI image layout archive holding every image (shared blobs once). */
export function ociArchive(images: ImageSpec[]): { archive: Buffer; images: BuiltImage[] } {
  const blobs = new Map<string, Buffer>();
  const manifests: unknown[] = [];
  const built: BuiltImage[] = [];
  for (const img of images) {
    const b = imageBlobs(img);
    blobs.set(b.configDigest, b.config);
    for (const l of b.layers) blobs.set(l.digest, l.blob);
    blobs.set(b.manifestDigest, b.manifest);
    manifests.push({
      mediaType: OCI_MANIFEST_TYPE,
      digest: b.manifestDigest,
      size: b.manifest.length,
      platform: { architecture: ARCHITECTURE, os: 'linux' },
      annotations: {
        'io.containerd.image.name': img.name,
        'org.opencontainers.image.ref.name': img.name,
      },
    });
    built.push({
      name: img.name,
      id: b.configDigest,
      contentBytes:
        b.config.length + b.manifest.length + img.layers.reduce((n, l) => n + l.blob.length, 0),
    });
  }
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, manifests }));
  const entries: TarEntry[] = [
    { path: 'oci-layout', content: Buffer.from('{"imageLayoutVersion":"1.0.0"}') },
    { path: 'index.json', content: index },
    { path: 'blobs' },
    { path: 'blobs/sha256' },
    ...[...blobs].map(([d, content]) => ({
      path: path.posix.join('blobs/sha256', d.slice('sha256:'.length)),
      content,
    })),
  ];
  return { archive: tarArchive(entries), images: built };
}
