// `npm ci` (prepare): links node_modules/.bin/kubegc and kubectl-gc to
// dist/cli.js, so that `npx kubegc …` runs the built CLI straight from the
// project's own .bin, and kubectl finds its `gc` plugin with that directory on PATH.
// package.json has no `bin` on purpose: with one, npx "self-executes" the
// project by installing it into its cache first, and that install prints npm's
// EBADENGINE warning (twice) whenever npm itself runs on an older Node.js than
// kubegc's engines, although kubegc runs on the Node 24 that npm ci installed
// (node_modules/.bin/node, first on npx's PATH, found by dist/cli.js's shebang;
// npm run build makes dist/cli.js executable, as npm does for a bin it links).
import fs from 'node:fs';
import path from 'node:path';
import { URL, fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../node_modules/.bin/', import.meta.url));
fs.mkdirSync(bin, { recursive: true });
// kubectl-gc: the same program as the kubectl plugin (`kubectl gc doctor`,
// `kubectl gc explain`; src/cli/kubectl-plugin.ts), found by kubectl on PATH.
for (const name of ['kubegc', 'kubectl-gc']) {
  fs.rmSync(path.join(bin, name), { force: true });
  fs.symlinkSync(path.join('..', '..', 'dist', 'cli.js'), path.join(bin, name));
}
