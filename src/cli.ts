#!/usr/bin/env -S node --max-semi-space-size=4
// kubegc's entry point. It checks the Node.js version before it loads
// anything else: an older Node.js fails deep inside a dependency with an
// error that names neither kubegc nor Node.js.
import v8 from 'node:v8';
import { nodeVersionProblem } from './cli/node-version.ts';
import { boundYoungGenerationLate } from './runtime-flags.ts';

const problem = nodeVersionProblem(process.versions.node);
if (problem) {
  console.error(`kubegc: ${problem}`);
  process.exit(1);
}
// Before anything allocates: lean however node was started (src/runtime-flags.ts).
boundYoungGenerationLate(process.execArgv, process.env.NODE_OPTIONS, (flags) =>
  v8.setFlagsFromString(flags),
);
(await import('./cli/main.ts')).main();
