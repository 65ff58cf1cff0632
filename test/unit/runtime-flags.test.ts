// kubegc runs with the same Node.js flags however it is started.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../cluster/controlplane.ts';
import { boundYoungGenerationLate, RUNTIME_FLAGS } from '../../src/runtime-flags.ts';

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

describe('a kubegc started without the runtime flags', () => {
  const late = (execArgv: string[], nodeOptions?: string): string[] => {
    const set: string[] = [];
    boundYoungGenerationLate(execArgv, nodeOptions, (f) => set.push(f));
    return set;
  };

  test('stops the young generation from growing', () => {
    expect(late([])).toEqual(['--semi-space-growth-factor=1']);
    expect(late(['--enable-source-maps'], '--max-old-space-size=512')).toEqual([
      '--semi-space-growth-factor=1',
    ]);
  });

  test('leaves alone a young generation the command line or NODE_OPTIONS already bounds', () => {
    expect(late([...RUNTIME_FLAGS])).toEqual([]);
    expect(late(['--max-semi-space-size=16'])).toEqual([]);
    expect(late(['--semi-space-growth-factor=2'])).toEqual([]);
    expect(late([], '--inspect --max-semi-space-size=8')).toEqual([]);
  });

  test('the flag it sets takes effect at run time (the young generation stays small)', () => {
    const script = [
      "import v8 from 'node:v8';",
      "import { boundYoungGenerationLate } from './src/runtime-flags.ts';",
      'boundYoungGenerationLate(process.execArgv, undefined, (f) => v8.setFlagsFromString(f));',
      'const keep = [];',
      'for (let i = 0; i < 1e6; i++) { const o = { a: "x" + i, b: [i] }; if (i % 4 === 0) keep.push(o); }',
      "const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');",
      'console.log(s.space_size);',
    ].join('\n');
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    // Without the bound it grows to tens of MB on this allocation (128 MB measured).
    expect(Number(out.trim())).toBeLessThanOrEqual(4 * 1024 * 1024);
  });
});
