// What `kubegc controller` loads before its first request: every module
// costs start-up time (bench/RESULTS.md, "start-up"), so the ones it never
// uses on that path must stay unloaded.
import { execFileSync } from 'node:child_process';
import { REPO_ROOT } from '../../cluster/controlplane.ts';

/** Node's internal modules loaded once the controller's module graph is imported, in a fresh process. */
function internalsLoadedBy(entry: string): string[] {
  const script = [
    `await import(${JSON.stringify(entry)});`,
    'console.log(JSON.stringify(process.moduleLoadList));',
  ].join('\n');
  const out = execFileSync(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', '--input-type=module', '-e', script],
    { cwd: REPO_ROOT, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
  );
  return JSON.parse(out) as string[];
}

test('importing the controller does not load undici (an ES import of node:http reads its WebSocket getters, which compile all of undici)', () => {
  const loaded = internalsLoadedBy('./src/cli/controller.ts');
  expect(loaded.some((m) => m.includes('http2'))).toBe(true); // the list is real
  expect(loaded.filter((m) => m.includes('undici'))).toEqual([]);
});
