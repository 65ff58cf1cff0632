import {
  globMatcher,
  globToRegExp,
  imageNames,
  normalizeImagePattern,
  normalizeImageRef,
} from './image-refs.ts';

describe('normalizeImageRef', () => {
  test.each([
    ['nginx', 'docker.io/library/nginx:latest'],
    ['nginx:1.27', 'docker.io/library/nginx:1.27'],
    ['bitnami/redis:7', 'docker.io/bitnami/redis:7'],
    ['registry.k8s.io/pause:3.9', 'registry.k8s.io/pause:3.9'],
    ['registry.k8s.io/pause', 'registry.k8s.io/pause:latest'],
    ['localhost/app', 'localhost/app:latest'],
    ['localhost:5000/app:1', 'localhost:5000/app:1'],
    ['example.com/app@sha256:abc', 'example.com/app@sha256:abc'],
    ['sha256:0123', 'sha256:0123'],
  ])('%s → %s', (ref, normalized) => {
    expect(normalizeImageRef(ref)).toBe(normalized);
  });
});

describe('globs over image references', () => {
  test.each([
    ['registry.k8s.io/pause:*', 'registry.k8s.io/pause:3.9', true],
    ['registry.k8s.io/pause:*', 'registry.k8s.io/pause-extra:3.9', false],
    ['*/critical/*', 'example.com/critical/db:1', true],
    ['*/critical/*', 'example.com/team/critical/db:1', true],
    ['*/critical/*', 'example.com/uncritical/db:1', false],
    ['docker.io/library/*', 'docker.io/library/nginx:latest', true],
    ['app:?', 'app:1', true],
    ['app:?', 'app:10', false],
    ['a.b', 'axb', false],
    ['(x)[y]+', '(x)[y]+', true],
  ])('%s matches %s: %p', (glob, ref, matches) => {
    expect(globToRegExp(glob).test(ref)).toBe(matches);
  });

  test('a matcher returns the first pattern that matches any name', () => {
    const m = globMatcher(['nope/*', 'docker.io/library/keep:*']);
    const names = imageNames({ id: 'sha256:1', repoTags: ['keep:1'], repoDigests: [] });
    expect(m.match(names)).toBe('docker.io/library/keep:*');
    expect(m.match(['other'])).toBeUndefined();
  });
});

describe('--pinned-images patterns are normalised as references are', () => {
  test.each([
    ['hubkeep:*', 'docker.io/library/hubkeep:*'],
    ['hubkeep:1.0', 'docker.io/library/hubkeep:1.0'],
    ['hubkeep', 'docker.io/library/hubkeep:latest'],
    ['pause*', 'docker.io/library/pause*'],
    ['bitnami/*', 'docker.io/bitnami/*'],
    ['registry.k8s.io/pause:*', 'registry.k8s.io/pause:*'],
    ['localhost/app:*', 'localhost/app:*'],
    ['*/critical/*', '*/critical/*'],
    ['*pause*', '*pause*'],
    ['sha256:ab*', 'sha256:ab*'],
  ])('%s → %s', (pattern, normalized) => {
    expect(normalizeImagePattern(pattern)).toBe(normalized);
  });

  // CRI-O reports docker.io/library/hubkeep:1.0 for an image loaded as hubkeep:1.0.
  test.each([
    ['hubkeep:*', 'docker.io/library/hubkeep:1.0', true],
    ['hubkeep:1.0', 'docker.io/library/hubkeep:1.0', true],
    ['hubkeep:*', 'docker.io/library/hubkeeper:1.0', false],
    ['hubkeep:*', 'example.com/hubkeep:1.0', false],
    ['bitnami/*', 'docker.io/bitnami/redis:7', true],
    ['*/critical/*', 'example.com/critical/db:1', true],
  ])('pattern %s protects an image named %s: %p', (pattern, name, matches) => {
    const names = imageNames({ id: 'sha256:1', repoTags: [name], repoDigests: [] });
    expect(globMatcher([pattern]).match(names) !== undefined).toBe(matches);
  });
});
