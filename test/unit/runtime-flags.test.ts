// kubegc runs with the same Node.js flags however it is started.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../cluster/controlplane.ts';
import { RUNTIME_FLAGS } from '../../src/runtime-flags.ts';

const read = (file: string): string => readFileSync(path.join(REPO_ROOT, file), 'utf8');

test('the kubegc bin (src/cli.ts, copied to dist/cli.js) starts node with the runtime flags', () => {
  const shebang = read('src/cli.ts').split('\n')[0];
  expect(shebang).toBe(`#!/usr/bin/env -S node ${RUNTIME_FLAGS.join(' ')}`);
});

test("the image's ENTRYPOINT starts node with the runtime flags", () => {
  const entrypoint = read('Dockerfile')
    .split('\n')
    .find((l) => l.startsWith('ENTRYPOINT '));
  expect(JSON.parse(entrypoint?.slice('ENTRYPOINT '.length) ?? '[]')).toEqual([
    'node',
    ...RUNTIME_FLAGS,
    'dist/cli.js',
  ]);
});
