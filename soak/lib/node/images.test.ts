import {
  ImageTable,
  canonicalDigest,
  canonicalName,
  pinSpellings,
  spellings,
  type SoakImage,
} from './images.ts';

const D = `sha256:${'a'.repeat(64)}`;
const official: SoakImage = {
  key: 'a',
  role: 'app',
  domain: 'docker.io',
  path: 'library/soak-app-0',
  tag: 'latest',
  digest: D,
  id: `sha256:${'b'.repeat(64)}`,
};
const org: SoakImage = {
  key: 'b',
  role: 'app',
  domain: 'docker.io',
  path: 'soakorg/app-1',
  tag: '1',
  digest: D,
};
const local: SoakImage = {
  key: 'c',
  role: 'app',
  domain: '198.18.0.1:5000',
  path: 'soak/app-2',
  tag: '1',
  digest: D,
};

test('an official Docker Hub image is spelled in every form distribution normalises to it', () => {
  const s = spellings(official);
  for (const want of [
    'soak-app-0',
    'soak-app-0:latest',
    'library/soak-app-0:latest',
    'docker.io/soak-app-0',
    'docker.io/library/soak-app-0:latest',
    'index.docker.io/library/soak-app-0:latest',
    'index.docker.io/soak-app-0:latest',
    `soak-app-0@${D}`,
    `soak-app-0:latest@${D}`,
    `docker.io/library/soak-app-0@${D}`,
  ])
    expect(s).toContain(want);
  expect(canonicalName(official)).toBe('docker.io/library/soak-app-0:latest');
  expect(canonicalDigest(official)).toBe(`docker.io/library/soak-app-0@${D}`);
});

test('a two-component Docker Hub path gets no library/, and a registry with a port is spelled as is', () => {
  expect(spellings(org)).toEqual(
    expect.arrayContaining([
      'soakorg/app-1:1',
      'docker.io/soakorg/app-1:1',
      'index.docker.io/soakorg/app-1:1',
      `soakorg/app-1@${D}`,
    ]),
  );
  expect(spellings(org).some((x) => x.includes('library/'))).toBe(false);
  expect(spellings(org)).not.toContain('soakorg/app-1');
  expect(spellings(local).every((x) => x.startsWith('198.18.0.1:5000/soak/app-2'))).toBe(true);
});

test('pins are spelled without digests, exactly and with a tag glob', () => {
  const p = pinSpellings(org);
  expect(p).toEqual(
    expect.arrayContaining(['soakorg/app-1:1', 'soakorg/app-1:*', 'docker.io/soakorg/app-1:*']),
  );
  expect(p.some((x) => x.includes('@'))).toBe(false);
});

test('the table resolves each spelling and each name the runtime reports to its image', () => {
  const t = new ImageTable();
  t.add(official);
  t.add(org);
  for (const s of spellings(official)) expect(t.resolve(s)?.key).toBe('a');
  expect(t.resolve('docker.io/library/soak-app-0:latest')?.key).toBe('a');
  expect(t.resolve(official.id as string)?.key).toBe('a');
  expect(t.resolve('docker.io/soakorg/app-1:1')?.key).toBe('b');
  expect(t.resolve('soakorg/app-1:2')).toBeUndefined();
});
