import {
  globMatcher,
  globToRegExp,
  imageNames,
  imagePatternForms,
  imagePatternProblem,
  imageRefNames,
  normalizeImageRef,
} from './image-refs.ts';

const X = 'a'.repeat(64);
const Y = 'b'.repeat(64);
const ID = `sha256:${'c'.repeat(64)}`;

// distribution's ParseDockerRef on each spelling: what containerd's and
// CRI-O's CRI look the image up as (test/e2e/node-image-refs.test.ts asks a
// real containerd the same questions).
describe('normalizeImageRef: the name a runtime resolves a spelling to', () => {
  test.each([
    ['nginx', 'docker.io/library/nginx:latest'],
    ['nginx:1.25', 'docker.io/library/nginx:1.25'],
    ['nginx:V1_2', 'docker.io/library/nginx:V1_2'],
    ['library/nginx:1.25', 'docker.io/library/nginx:1.25'],
    ['docker.io/nginx', 'docker.io/library/nginx:latest'],
    ['docker.io/nginx:1.25', 'docker.io/library/nginx:1.25'],
    ['docker.io/library/nginx:1.25', 'docker.io/library/nginx:1.25'],
    ['index.docker.io/nginx:1.25', 'docker.io/library/nginx:1.25'],
    ['index.docker.io/library/nginx', 'docker.io/library/nginx:latest'],
    [`nginx@sha256:${X}`, `docker.io/library/nginx@sha256:${X}`],
    [`nginx:1.25@sha256:${X}`, `docker.io/library/nginx@sha256:${X}`],
    [`docker.io/nginx:1.25@sha256:${X}`, `docker.io/library/nginx@sha256:${X}`],
    [`index.docker.io/library/nginx@sha256:${X}`, `docker.io/library/nginx@sha256:${X}`],
    ['bitnami/redis:7', 'docker.io/bitnami/redis:7'],
    ['docker.io/bitnami/redis', 'docker.io/bitnami/redis:latest'],
    ['a/b/c:1', 'docker.io/a/b/c:1'],
    ['registry.k8s.io/pause:3.9', 'registry.k8s.io/pause:3.9'],
    ['registry.k8s.io/pause', 'registry.k8s.io/pause:latest'],
    ['localhost/app', 'localhost/app:latest'],
    ['localhost:5000/app:1', 'localhost:5000/app:1'],
    ['localhost:5000/team/app', 'localhost:5000/team/app:latest'],
    ['registry.example.com:5000/team/app:1.0', 'registry.example.com:5000/team/app:1.0'],
    [`registry.example.com:5000/app@sha256:${X}`, `registry.example.com:5000/app@sha256:${X}`],
    ['[::1]:5000/app:1', '[::1]:5000/app:1'],
    // An upper-case first component can only be a registry.
    ['Registry/app:1', 'Registry/app:1'],
    // Without a `/` there is no registry: localhost and a port are a name and a tag.
    ['localhost', 'docker.io/library/localhost:latest'],
    ['localhost:5000', 'docker.io/library/localhost:5000'],
    ['my-app__x.y:1', 'docker.io/library/my-app__x.y:1'],
    // Image IDs stand for themselves.
    [ID, ID],
    ['c'.repeat(64), 'c'.repeat(64)],
  ])('%s → %s', (ref, normalized) => {
    expect(normalizeImageRef(ref)).toBe(normalized);
  });

  // No runtime resolves these (the kubelet refuses them: InvalidImageName):
  // they stand for nothing but themselves.
  test.each([
    ['NGINX:1.25', 'must be lowercase'],
    ['docker.io/Nginx', 'must be lowercase'],
    ['library/Nginx', 'must be lowercase'],
    ['nginx:-1', 'not [registry'],
    ['nginx:', 'not [registry'],
    ['nginx::1', 'not [registry'],
    ['https://registry.example.com/app', 'not [registry'],
    ['registry.example.com/app/', 'not [registry'],
    ['app_:1', 'not [registry'],
    ['app with space', 'not [registry'],
    [`nginx@sha256:${'a'.repeat(32)}`, 'sha256 digest is 64 lowercase hex'],
    [`nginx@sha256:${'A'.repeat(64)}`, 'sha256 digest is 64 lowercase hex'],
    [`nginx@md5:${'a'.repeat(32)}`, 'unsupported digest algorithm md5'],
    [`nginx:${'t'.repeat(129)}`, 'not [registry'],
    [`example.com/${'a'.repeat(250)}`, 'longer than 255'],
    ['', 'empty'],
  ])('%s is no valid reference (%s): unchanged', (ref, why) => {
    expect(normalizeImageRef(ref)).toBe(ref);
    expect(imageRefNames(ref)).toEqual([ref]);
    const problem = imagePatternProblem(ref);
    expect(problem?.message).toContain(why);
    expect(problem?.certain).toBe(true);
  });

  test('tag and digest: the digest decides which image, the tag is kept as a second name', () => {
    expect(imageRefNames(`nginx:1.25@sha256:${X}`)).toEqual([
      `nginx:1.25@sha256:${X}`,
      `docker.io/library/nginx@sha256:${X}`,
      'docker.io/library/nginx:1.25',
    ]);
  });
});

describe('a spelling matches the names a runtime reports for the image', () => {
  // The names containerd reports for nginx:1.25 pulled by tag (it records the
  // digest too), and for an image pulled only as nginx@sha256:Y.
  const byTag = {
    id: ID,
    repoTags: ['docker.io/library/nginx:1.25'],
    repoDigests: [`docker.io/library/nginx@sha256:${X}`],
  };
  const byDigest = {
    id: 'sha256:d',
    repoTags: [],
    repoDigests: [`docker.io/library/nginx@sha256:${Y}`],
  };
  const other = {
    id: 'sha256:e',
    repoTags: [
      'docker.io/library/nginx:1.26',
      'docker.io/team/nginx:1.25',
      'localhost:5000/nginx:1.25',
    ],
    repoDigests: [],
  };
  const images = { byTag, byDigest, other };
  const matching = (spelling: string): string[] => {
    const wanted = new Set(imageRefNames(spelling));
    return Object.entries(images)
      .filter(([, img]) => imageNames(img).some((n) => wanted.has(n)))
      .map(([k]) => k);
  };

  test.each([
    ['nginx:1.25', ['byTag']],
    ['docker.io/nginx:1.25', ['byTag']],
    ['library/nginx:1.25', ['byTag']],
    ['docker.io/library/nginx:1.25', ['byTag']],
    ['index.docker.io/nginx:1.25', ['byTag']],
    ['index.docker.io/library/nginx:1.25', ['byTag']],
    [`nginx@sha256:${X}`, ['byTag']],
    [`docker.io/nginx@sha256:${X}`, ['byTag']],
    [`nginx:1.25@sha256:${X}`, ['byTag']],
    [`nginx@sha256:${Y}`, ['byDigest']],
    // The digest finds the image; the tag is kept, so nginx:1.25 is protected too.
    [`nginx:1.25@sha256:${Y}`, ['byTag', 'byDigest']],
    [`nginx:0.9@sha256:${Y}`, ['byDigest']],
    ['nginx', []],
    ['nginx:1.2', []],
    ['team/nginx:1.25', ['other']],
    ['localhost:5000/nginx:1.25', ['other']],
    ['localhost/nginx:1.25', []],
    ['NGINX:1.25', []],
    [ID, ['byTag']],
  ])('%s matches %p', (spelling, expected) => {
    expect(matching(spelling)).toEqual(expected);
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
    ['docker.io/nginx:*', 'docker.io/library/nginx:*'],
    ['docker.io/nginx', 'docker.io/library/nginx:latest'],
    ['docker.io/nginx:1.25', 'docker.io/library/nginx:1.25'],
    ['index.docker.io/nginx:*', 'docker.io/library/nginx:*'],
    ['index.docker.io/library/nginx*', 'docker.io/library/nginx*'],
    ['library/nginx:*', 'docker.io/library/nginx:*'],
    ['docker.io/bitnami/*', 'docker.io/bitnami/*'],
    ['nginx@sha256:*', 'docker.io/library/nginx@sha256:*'],
    ['registry.k8s.io/pause:*', 'registry.k8s.io/pause:*'],
    ['localhost/app:*', 'localhost/app:*'],
    ['localhost:5000/app:*', 'localhost:5000/app:*'],
    ['*/critical/*', '*/critical/*'],
    ['*pause*', '*pause*'],
    ['sha256:ab*', 'sha256:ab*'],
  ])('%s → %s', (pattern, normalized) => {
    // The pattern as written comes first; one left as it is has no other form.
    expect(imagePatternForms(pattern)).toEqual([...new Set([pattern, normalized])]);
  });

  test('a tag+digest pattern is compared as its digest and as its tag', () => {
    expect(imagePatternForms(`nginx:1.25@sha256:${X}`)).toEqual([
      `nginx:1.25@sha256:${X}`,
      `docker.io/library/nginx@sha256:${X}`,
      'docker.io/library/nginx:1.25',
    ]);
    expect(imagePatternForms('docker.io/nginx:1.*@sha256:*')).toEqual([
      'docker.io/nginx:1.*@sha256:*',
      'docker.io/library/nginx@sha256:*',
      'docker.io/library/nginx:1.*',
    ]);
  });

  // What the runtimes report for nginx:1.25 pulled by tag (CRI-O for an image
  // loaded as hubkeep:1.0 reports docker.io/library/hubkeep:1.0).
  test.each([
    ['hubkeep:*', 'docker.io/library/hubkeep:1.0', true],
    ['hubkeep:1.0', 'docker.io/library/hubkeep:1.0', true],
    ['hubkeep:*', 'docker.io/library/hubkeeper:1.0', false],
    ['hubkeep:*', 'example.com/hubkeep:1.0', false],
    ['bitnami/*', 'docker.io/bitnami/redis:7', true],
    ['*/critical/*', 'example.com/critical/db:1', true],
    ['docker.io/nginx:*', 'docker.io/library/nginx:1.25', true],
    ['docker.io/nginx:1.25', 'docker.io/library/nginx:1.25', true],
    ['docker.io/nginx', 'docker.io/library/nginx:latest', true],
    ['docker.io/nginx', 'docker.io/library/nginx:1.25', false],
    ['index.docker.io/nginx:*', 'docker.io/library/nginx:1.25', true],
    ['index.docker.io/library/nginx:1.25', 'docker.io/library/nginx:1.25', true],
    ['library/nginx:1.*', 'docker.io/library/nginx:1.25', true],
    ['docker.io/nginx:*', 'docker.io/library/nginx-extra:1.25', false],
    [`nginx@sha256:${X}`, `docker.io/library/nginx@sha256:${X}`, true],
    [`docker.io/nginx:1.25@sha256:${X}`, `docker.io/library/nginx@sha256:${X}`, true],
    [`docker.io/nginx:1.25@sha256:${Y}`, 'docker.io/library/nginx:1.25', true],
    ['nginx@sha256:*', `docker.io/library/nginx@sha256:${X}`, true],
    ['nginx@sha256:*', 'docker.io/library/nginx:1.25', false],
    ['localhost:5000/app:*', 'localhost:5000/app:1', true],
    ['localhost:5000/app:*', 'docker.io/library/app:1', false],
  ])('pattern %s protects an image named %s: %p', (pattern, name, matches) => {
    const names = imageNames({
      id: 'sha256:1',
      repoTags: name.includes('@') ? [] : [name],
      repoDigests: name.includes('@') ? [name] : [],
    });
    expect(globMatcher([pattern]).match(names) !== undefined).toBe(matches);
  });

  test.each([
    'registry.k8s.io/pause:*',
    '*/critical/*',
    '*',
    'pause*',
    '*pause*',
    'sha256:ab*',
    `sha256:${'c'.repeat(64)}`,
    'c'.repeat(64),
    'docker.io/nginx:1.?',
    'nginx@sha256:*',
    `*@sha256:${'a'.repeat(10)}*`,
    'Registry/*',
    'localhost:5000/*',
    '[::1]:5000/app:*',
  ])('%s can match an image', (pattern) => {
    expect(imagePatternProblem(pattern)).toBeUndefined();
  });

  test.each(['https://registry.example.com/*', 'app_:*', 'my app:*', 'docker.io/Nginx:*'])(
    '%s can match no image: a warning (globs are checked by trying expansions)',
    (pattern) => {
      const problem = imagePatternProblem(pattern);
      expect(problem?.message).toContain(`"${pattern}" seems to match no image`);
      expect(problem?.certain).toBe(false);
    },
  );
});
