// `npm run krew`: the `kubectl gc` plugin as krew installs it. Builds the
// archive (kubectl-gc, the bundled CLI with @kubernetes/client-node inside,
// a package.json for the version) and renders `.krew.yaml`, the manifest
// template in krew-release-bot's format, with that archive's URI and sha256.
// Both go to dist-krew/: publishing the archive as a release asset and the
// manifest to krew-index is the release's job, not this script's.
//
//   npm run krew [-- --tag v0.1.0] [--out DIR]
//
// The archive is byte-for-byte reproducible (sorted entries, fixed times and
// owners, gzip without a timestamp), so its sha256 is a property of the source.
// test/e2e/kubectl-plugin.test.ts installs it with the real krew.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { bundle } from './build.ts';

const root = path.join(import.meta.dirname, '..');
/** The manifest template (krew-release-bot's `.krew.yaml` at the repository's root). */
export const TEMPLATE = path.join(root, '.krew.yaml');
/**
 * Not bundled: only `kubegc node` loads gRPC, which the plugin never runs.
 * client-node is bundled: it reads the kubeconfigs the native reader does not
 * (exec credential plugins), and the archive has no node_modules.
 */
const PLUGIN_EXTERNAL = ['@grpc/grpc-js', '@grpc/proto-loader'];

/** What krew starts (linked from $KREW_ROOT/bin): its name makes dist/cli.js the plugin. */
const PLUGIN_BIN = `#!/usr/bin/env node
// kubectl gc, installed by krew: kubegc's read-only commands (doctor, explain)
// on the node on PATH, which must be Node.js 24 (it says so otherwise).
import './dist/cli.js';
`;

export interface KrewRelease {
  archive: string;
  manifest: string;
  sha256: string;
}

/** Renders krew-release-bot's template: `{{ .TagName }}` and `{{ addURIAndSha "URL" .TagName }}`. */
export function renderManifest(template: string, tag: string, sha256: string): string {
  return template
    .replace(
      /^( *)\{\{ *addURIAndSha +"([^"]+)" +\.TagName *\}\}$/gm,
      (_, indent: string, uri: string) =>
        `${indent}uri: ${uri.replaceAll(/\{\{ *\.TagName *\}\}/g, tag)}\n${indent}sha256: ${sha256}`,
    )
    .replaceAll(/\{\{ *\.TagName *\}\}/g, tag);
}

/** The archive's file name in the template's URI (the release asset krew downloads). */
export function archiveName(template: string, tag: string): string {
  const match = /addURIAndSha +"([^"]+)"/.exec(template);
  if (!match?.[1]) throw new Error(`${TEMPLATE}: no {{ addURIAndSha "URL" .TagName }} line`);
  return path.posix.basename(renderManifest(match[1], tag, ''));
}

export async function buildKrewRelease(out: string, tag?: string): Promise<KrewRelease> {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    name: string;
    version: string;
    license: string;
  };
  const version = tag ?? `v${pkg.version}`;
  const template = fs.readFileSync(TEMPLATE, 'utf8');
  const stage = path.join(out, 'stage');
  fs.rmSync(out, { recursive: true, force: true });
  await bundle(path.join(stage, 'dist'), PLUGIN_EXTERNAL);
  for (const map of fs.readdirSync(path.join(stage, 'dist')).filter((f) => f.endsWith('.map')))
    fs.rmSync(path.join(stage, 'dist', map));
  // src/version.ts reads the version from the package.json above dist/.
  const meta = { name: pkg.name, version: pkg.version, license: pkg.license, type: 'module' };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(meta, null, 2)}\n`);
  fs.writeFileSync(path.join(stage, 'kubectl-gc'), PLUGIN_BIN, { mode: 0o755 });

  const archive = path.join(out, archiveName(template, version));
  fs.writeFileSync(archive, gzipSync(tar(stage), { level: 9 }));
  const sha256 = createHash('sha256').update(fs.readFileSync(archive)).digest('hex');
  const manifest = path.join(out, 'gc.yaml');
  fs.writeFileSync(manifest, renderManifest(template, version, sha256));
  fs.rmSync(stage, { recursive: true, force: true });
  return { archive, manifest, sha256 };
}

/** A ustar archive of `dir`'s regular files, sorted, owned by 0:0 at time 0. */
function tar(dir: string): Buffer {
  const files = walk(dir).sort();
  const blocks: Buffer[] = [];
  for (const rel of files) {
    const full = path.join(dir, rel);
    const data = fs.readFileSync(full);
    const executable = (fs.statSync(full).mode & 0o111) !== 0;
    blocks.push(tarHeader(rel, data.length, executable ? 0o755 : 0o644), data);
    const pad = (512 - (data.length % 512)) % 512;
    if (pad > 0) blocks.push(Buffer.alloc(pad));
  }
  blocks.push(Buffer.alloc(1024)); // two empty blocks end the archive
  return Buffer.concat(blocks);
}

function walk(dir: string, prefix = ''): string[] {
  return fs.readdirSync(path.join(dir, prefix), { withFileTypes: true }).flatMap((e) => {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    return e.isDirectory() ? walk(dir, rel) : [rel];
  });
}

function tarHeader(name: string, size: number, mode: number): Buffer {
  if (Buffer.byteLength(name) > 100) throw new Error(`tar: name over 100 bytes: ${name}`);
  const h = Buffer.alloc(512);
  const field = (value: string, offset: number, length: number): void =>
    void h.write(value, offset, length, 'utf8');
  const octal = (value: number, length: number): string =>
    `${value.toString(8).padStart(length - 1, '0')}\0`;
  field(name, 0, 100);
  field(octal(mode, 8), 100, 8);
  field(octal(0, 8), 108, 8); // uid
  field(octal(0, 8), 116, 8); // gid
  field(octal(size, 12), 124, 12);
  field(octal(0, 12), 136, 12); // mtime
  field('        ', 148, 8); // checksum, counted as spaces
  field('0', 156, 1); // regular file
  field('ustar\0', 257, 6);
  field('00', 263, 2);
  let sum = 0;
  for (const byte of h) sum += byte;
  field(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return h;
}

if (import.meta.main) {
  let values: { tag?: string; out?: string };
  try {
    ({ values } = parseArgs({ options: { tag: { type: 'string' }, out: { type: 'string' } } }));
  } catch (err) {
    console.error(
      `krew: ${(err as Error).message}\nusage: npm run krew [-- --tag vX.Y.Z] [--out DIR]`,
    );
    process.exit(2);
  }
  if (values.tag !== undefined && !/^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(values.tag)) {
    console.error(
      `krew: --tag ${values.tag}: krew needs a semantic version with a leading v (v0.1.0)`,
    );
    process.exit(2);
  }
  const out = path.resolve(values.out ?? path.join(root, 'dist-krew'));
  const release = await buildKrewRelease(out, values.tag);
  console.log(`archive  ${path.relative(process.cwd(), release.archive)}`);
  console.log(`manifest ${path.relative(process.cwd(), release.manifest)}`);
  console.log(`sha256   ${release.sha256}`);
}
