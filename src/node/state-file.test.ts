import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ImageRecord } from './image-gc-policy.ts';
import { decodeState, encodeState, loadStateFile, saveStateFile } from './state-file.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kubegc-state-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const records = new Map<string, ImageRecord>([
  ['sha256:b', { firstDetectedMs: Date.parse('2026-01-02T03:04:05.006Z') }],
  [
    'sha256:a',
    {
      firstDetectedMs: Date.parse('2026-01-01T00:00:00.000Z'),
      lastUsedMs: Date.parse('2026-01-03T00:00:00.000Z'),
    },
  ],
]);

test('encodes readable timestamps, sorted by image ID, and decodes them back', () => {
  const doc = encodeState(records);
  expect(doc).toEqual({
    version: 1,
    images: {
      'sha256:a': {
        firstDetected: '2026-01-01T00:00:00.000Z',
        lastUsed: '2026-01-03T00:00:00.000Z',
      },
      'sha256:b': { firstDetected: '2026-01-02T03:04:05.006Z' },
    },
  });
  expect(Object.keys(doc.images)).toEqual(['sha256:a', 'sha256:b']);
  expect(decodeState(JSON.stringify(doc))).toEqual(records);
});

test('save then load round-trips, creating the directory and leaving no temporary file', async () => {
  const file = path.join(dir, 'sub', 'state.json');
  await saveStateFile(file, records);
  await saveStateFile(file, records);
  expect(readdirSync(path.dirname(file))).toEqual(['state.json']);
  expect(await loadStateFile(file)).toEqual({ kind: 'loaded', records });
});

test('the last user (for images expected back) round-trips; a file without it is still valid', async () => {
  const lastUser = {
    namespace: 'shop',
    owner: { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29000000', uid: 'j1' },
  };
  const withUser = new Map<string, ImageRecord>([
    ['sha256:a', { firstDetectedMs: 1000, lastUsedMs: 2000, lastUser }],
    ['sha256:b', { firstDetectedMs: 1000 }],
  ]);
  expect(encodeState(withUser).images['sha256:a']).toEqual({
    firstDetected: '1970-01-01T00:00:01.000Z',
    lastUsed: '1970-01-01T00:00:02.000Z',
    lastUser,
  });
  const file = path.join(dir, 'state.json');
  await saveStateFile(file, withUser);
  expect(await loadStateFile(file)).toEqual({ kind: 'loaded', records: withUser });
  // A file written before lastUser existed.
  expect(
    decodeState('{"version":1,"images":{"sha256:a":{"firstDetected":"2026-01-01T00:00:00Z"}}}'),
  ).toEqual(new Map([['sha256:a', { firstDetectedMs: Date.parse('2026-01-01T00:00:00Z') }]]));
});

test('a missing file is reported as missing', async () => {
  expect(await loadStateFile(path.join(dir, 'none.json'))).toEqual({ kind: 'missing' });
});

test.each([
  ['not JSON', '{', /JSON/],
  ['another version', '{"version":2,"images":{}}', /unsupported state file version 2/],
  [
    'a bad date',
    '{"version":1,"images":{"sha256:a":{"firstDetected":"soon"}}}',
    /invalid firstDetected "soon"/,
  ],
  [
    'a bad lastUsed',
    '{"version":1,"images":{"sha256:a":{"firstDetected":"2026-01-01T00:00:00Z","lastUsed":"x"}}}',
    /invalid lastUsed/,
  ],
  [
    'a lastUser without a UID',
    '{"version":1,"images":{"sha256:a":{"firstDetected":"2026-01-01T00:00:00Z","lastUser":{"namespace":"shop","owner":{"apiVersion":"batch/v1","kind":"Job","name":"n"}}}}}',
    /image sha256:a: invalid lastUser \{"namespace":"shop".*\(want \{namespace, owner: \{apiVersion, kind, name, uid\}\}\)/,
  ],
  [
    'a lastUser that is not an object',
    '{"version":1,"images":{"sha256:a":{"firstDetected":"2026-01-01T00:00:00Z","lastUser":"shop/nightly"}}}',
    /image sha256:a: invalid lastUser "shop\/nightly"/,
  ],
  [
    'a lastUser of null',
    '{"version":1,"images":{"sha256:a":{"firstDetected":"2026-01-01T00:00:00Z","lastUser":null}}}',
    /image sha256:a: invalid lastUser null/,
  ],
])('%s is invalid, with a reason', async (_name, text, reason) => {
  const file = path.join(dir, 'state.json');
  writeFileSync(file, text);
  const r = await loadStateFile(file);
  expect(r.kind).toBe('invalid');
  expect(r.kind === 'invalid' && r.error).toMatch(reason);
  // The bad file is left for an operator to look at.
  expect(readFileSync(file, 'utf8')).toBe(text);
});
