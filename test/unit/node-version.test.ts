import { readFileSync } from 'node:fs';
import { NODE_ENGINES, nodeVersionProblem } from '../../src/cli/node-version.ts';

test('the range checked at start-up is package.json engines.node', () => {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
  expect(NODE_ENGINES).toBe(pkg.engines.node);
});

test.each([
  ['20.20.2', true],
  ['24.8.9', true],
  ['24.9.0', false],
  ['24.21.0', false],
  ['25.0.0', true],
])('Node.js v%s refused: %s', (version, refused) => {
  const problem = nodeVersionProblem(version);
  expect(problem !== undefined).toBe(refused);
  if (problem) {
    expect(problem).toContain(`v${version}`);
    expect(problem).toContain('npx kubegc');
  }
});
