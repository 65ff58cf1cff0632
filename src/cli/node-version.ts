// The Node.js versions kubegc runs on, checked by src/cli.ts before anything
// else is loaded. Imports nothing, so that it runs on any Node.js.
//
// This is not package.json `engines`: that is what `npm ci` needs (Node.js
// >= 20.19.0, the floor of every package it installs), and `npm ci` then installs the Node.js every
// npm script and `npx kubegc` run on, the `node` devDependency (24), which
// this range must admit (test/unit/node-version.test.ts). The image uses 24 too.

/** The oldest Node.js kubegc runs on, and the first major it does not. */
export const NODE_RANGE = { min: [24, 9, 0], belowMajor: 25 } as const;
export const NODE_ENGINES = `>=${NODE_RANGE.min.join('.')} <${NODE_RANGE.belowMajor}`;

/** Why this Node.js (`process.versions.node`) cannot run kubegc, or undefined when it can. */
export function nodeVersionProblem(version: string): string | undefined {
  const parts = version.split('.').map((p) => Number.parseInt(p, 10));
  const [major = 0, minor = 0, patch = 0] = parts;
  const [minMajor, minMinor, minPatch] = NODE_RANGE.min;
  const tooOld =
    major < minMajor ||
    (major === minMajor && (minor < minMinor || (minor === minMinor && patch < minPatch)));
  if (!tooOld && major < NODE_RANGE.belowMajor) return undefined;
  return [
    `this is Node.js v${version}; kubegc needs Node.js ${NODE_ENGINES}.`,
    'From a clone of kubegc (after `npm ci`), run `npx kubegc ...` (it uses the Node.js',
    'the project installs in node_modules/.bin), or run the container image. For',
    '`kubectl gc` installed by krew, put a Node.js 24 first on PATH.',
  ].join('\n');
}
