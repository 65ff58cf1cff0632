import { jest } from '@jest/globals';
import { ensurePackages, missingPackages, type Requirement } from '../../cluster/packages.ts';

const absent: Requirement = {
  provides: '/nonexistent/kubegc-test-tool',
  pkg: 'kubegc-test-pkg',
  why: 'a test',
};
const there: Requirement = { provides: 'sh', pkg: 'dash', why: 'a shell' };

test('missingPackages lists what is not on this machine', () => {
  expect(missingPackages([there, absent])).toEqual([absent]);
});

test('nothing missing: nothing done', () => {
  expect(() => ensurePackages([there])).not.toThrow();
});

test('missing and not root: stops at once, naming the package and the command', () => {
  const spy = jest.spyOn(process, 'getuid').mockReturnValue(1000);
  try {
    expect(() => ensurePackages([there, absent])).toThrow(
      'missing /nonexistent/kubegc-test-tool (kubegc-test-pkg: a test); install with: sudo apt-get install -y kubegc-test-pkg',
    );
  } finally {
    spy.mockRestore();
  }
});
