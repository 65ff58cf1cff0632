import { readFileSync } from 'node:fs';
import semver from 'semver';
import { nodeVersionProblem } from '../../src/cli/node-version.ts';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
  engines: { node: string };
  devDependencies: { node: string };
};

test('the Node.js that npm ci installs (the `node` devDependency) runs kubegc', () => {
  expect(nodeVersionProblem(pkg.devDependencies.node)).toBeUndefined();
});

test('the oldest Node.js package.json engines admits is one every installed package admits', () => {
  // engines is what installing needs (the runtime range is checked above): no
  // package in the lock may ask for more, or `npm ci` on the stated Node.js
  // warns EBADENGINE. test/e2e/clean-install.test.ts runs that install.
  const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
    packages: Record<string, { engines?: { node?: string } | string[] }>;
  };
  const floor = semver.minVersion(pkg.engines.node)?.version ?? 'unparsable';
  const refusing = Object.entries(lock.packages)
    .map(
      ([name, p]) =>
        [name || 'kubegc', Array.isArray(p.engines) ? undefined : p.engines?.node] as const,
    )
    .filter(([, range]) => range !== undefined && !semver.satisfies(floor, range))
    .map(([name, range]) => `${name} needs ${range}`);
  expect(refusing).toEqual([]);
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
