import { describe, expect, it } from '@jest/globals';
import { IMAGE_PACKAGES, podmanArgv, podmanRunArgv } from '../../cluster/image.ts';

describe('cluster/image.ts podman command lines', () => {
  // With Debian's crun installed podman picks it, and crun fails on cgroup-v1
  // hosts: every podman call must name runc itself.
  it('names runc as the OCI runtime on every call', () => {
    for (const argv of [podmanArgv('build', '.'), podmanRunArgv('base:1', 'true')]) {
      const at = argv.indexOf('--runtime');
      expect(at).toBeGreaterThan(0);
      expect(argv[at + 1]).toBe('runc');
      // a global flag: before the subcommand
      expect(at).toBeLessThan(argv.indexOf(argv.includes('build') ? 'build' : 'run'));
    }
  });

  // A fresh machine has no runc until containerd's packages come: `npm run image`
  // alone failed there with 'default OCI runtime "runc" not found'.
  it('installs the runtime it names', () => {
    expect(IMAGE_PACKAGES.map((r) => r.provides)).toContain('runc');
  });
});
