#!/usr/bin/env -S node --max-semi-space-size=4
// kubegc's entry point. It checks the Node.js version before it loads
// anything else: an older Node.js fails deep inside a dependency with an
// error that names neither kubegc nor Node.js.
import { nodeVersionProblem } from './cli/node-version.ts';

const problem = nodeVersionProblem(process.versions.node);
if (problem) {
  console.error(`kubegc: ${problem}`);
  process.exit(1);
}
(await import('./cli/main.ts')).main();
