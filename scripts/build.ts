// `npm run build` (after the type check): dist/, what the `kubegc` bin and the
// image run. kubegc's sources and the small dependencies the controller loads
// at start are bundled into a few ES modules (esbuild), because loading them
// file by file was a fixed cost of every start: resolving, reading and
// linking 130 modules took about 40 ms of a 210 ms start to the controller's
// first line on 2 cores (bench/RESULTS.md, "start-up"). Each subcommand is a
// chunk of its own, loaded only when it runs, as the separate modules were.
// Tests, the demo and the benchmarks' in-process code run the sources.
import { build } from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';

const root = path.join(import.meta.dirname, '..');

/**
 * Left out of the bundle, imported from node_modules when used: client-node
 * only for kubeconfigs the native reader does not cover (exec plugins...),
 * gRPC and its proto loader only by `kubegc node`.
 */
export const EXTERNAL = ['@kubernetes/client-node', '@grpc/grpc-js', '@grpc/proto-loader'];

/** Bundles src/cli.ts into `dist`, leaving `external` to node_modules. */
export async function bundle(dist: string, external: string[] = EXTERNAL): Promise<void> {
  fs.rmSync(dist, { recursive: true, force: true });
  await build({
    entryPoints: [path.join(root, 'src', 'cli.ts')],
    outdir: dist,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    external,
    sourcemap: true,
    logLevel: 'warning',
    // The CommonJS dependencies (prom-client) call require(): an ES module has
    // none of its own.
    banner: {
      js: "import { createRequire as kubegcCreateRequire } from 'node:module'; const require = kubegcCreateRequire(import.meta.url);",
    },
  });
  // kubegc node reads the CRI's proto beside the module that loads it (src/node/cri/client.ts).
  fs.cpSync(
    path.join(root, 'src', 'node', 'cri', 'runtime.proto'),
    path.join(dist, 'runtime.proto'),
  );
  // As npm does for a bin it links: the shebang of src/cli.ts starts it.
  fs.chmodSync(path.join(dist, 'cli.js'), 0o755);
}

if (import.meta.main) {
  // Another directory for tests (`node scripts/build.ts OUT_DIR`); it must sit
  // one level below a package.json of kubegc's (src/version.ts reads it).
  await bundle(path.resolve(process.argv[2] ?? path.join(root, 'dist')));
}
