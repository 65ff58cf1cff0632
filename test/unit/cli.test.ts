// The kubegc command line as an operator meets it: help, version, and one
// clear line with exit code 2 for anything it cannot accept.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { kubegcArgv } from '../../cluster/kubegc-command.ts';

function kubegc(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, kubegcArgv(args), {
    encoding: 'utf8',
    env: { ...process.env, KUBECONFIG: '/nonexistent/kubeconfig' },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

test('--version prints the package version', () => {
  expect(kubegc('--version')).toMatchObject({ status: 0, stdout: `${pkg.version}\n` });
});

// The README's `npx kubegc …` on the prerequisites it states (npm on any Node
// >= 20): runs the built CLI from node_modules/.bin (linked by npm ci's
// prepare), with nothing from npm on stderr. With a `bin` in package.json, npx
// installed the project into its cache first and printed EBADENGINE twice.
test('npx kubegc --version: the version, and no npm noise, even with an empty npm cache', () => {
  const cache = mkdtempSync(path.join(os.tmpdir(), 'kubegc-npx-cache-'));
  try {
    const r = spawnSync('npx', ['kubegc', '--version'], {
      encoding: 'utf8',
      cwd: path.join(import.meta.dirname, '..', '..'),
      env: {
        ...process.env,
        // The user's shell: no node_modules/.bin of npm's own scripts on PATH,
        // so npm runs on the system's Node.js, which may be older than kubegc's.
        PATH: (process.env.PATH ?? '')
          .split(path.delimiter)
          .filter((p) => !p.includes(`node_modules${path.sep}.bin`))
          .join(path.delimiter),
        npm_config_cache: cache,
        npm_config_update_notifier: 'false',
      },
    });
    expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({
      status: 0,
      stdout: `${pkg.version}\n`,
      stderr: '',
    });
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

test('--help lists the commands; no arguments prints it and exits 2', () => {
  const help = kubegc('--help');
  expect(help.status).toBe(0);
  expect(help.stdout).toContain('controller');
  expect(help.stdout).toContain('node');
  expect(kubegc().status).toBe(2);
});

test('controller --help lists its flags with upstream-style names', () => {
  const r = kubegc('controller', '--help');
  expect(r.status).toBe(0);
  for (const flag of [
    '--kubeconfig',
    '--workers',
    '--discovery-period',
    '--ignored-resources',
    '--kube-api-qps',
    '--kube-api-burst',
    '--dry-run',
    '--log-level',
    '--metrics-bind-address',
    '--metrics-secure',
    '--tls-cert-file',
    '--tls-private-key-file',
    '--authentication-token-webhook-cache-ttl',
    '--authorization-webhook-cache-authorized-ttl',
    '--authorization-webhook-cache-unauthorized-ttl',
    '--min-watch-timeout',
  ]) {
    expect(r.stdout).toContain(flag);
  }
});

test.each([
  [['frobnicate'], /unknown command "frobnicate"/],
  [['controller', '--workers', '0'], /--workers: must be at least 1/],
  [['controller', '--workers', 'ten'], /--workers: "ten" is not an integer/],
  [['controller', '--bogus'], /unknown flag --bogus/],
  [['controller', '--discovery-period', '5'], /invalid duration/],
  [['controller', '--min-watch-timeout', '500ms'], /--min-watch-timeout: must be at least/],
  // Waited on with one timer each: above 2^31-1 ms a timer fires after 1 ms.
  ...['--discovery-period', '--request-timeout', '--initial-sync-timeout'].map(
    (flag): [string[], RegExp] => [
      ['controller', flag, '600h'],
      new RegExp(`${flag}: must be at most 596h: kubegc waits on it with one timer`),
    ],
  ),
  [
    ['controller', '--leader-elect-retry-period', '597h'],
    /--leader-elect-retry-period: must be at most 596h/,
  ],
  [
    ['controller', '--leader-elect-renew-deadline', '1000h'],
    /--leader-elect-renew-deadline: must be at most 596h/,
  ],
  [['controller', '--discovery-period', `${'9'.repeat(400)}h`], /duration "9+h" is too long/],
  [['controller', '--log-level', 'loud'], /--log-level: must be one of/],
  [['controller', '--tls-cert-file', '/etc/tls/tls.crt'], /must be given together/],
  [['controller', '--tls-private-key-file', '/etc/tls/tls.key'], /must be given together/],
  [
    ['controller', '--metrics-bind-address', ':9443', '--health-probe-bind-address', ':9443'],
    /--metrics-bind-address \(:9443\) and --health-probe-bind-address \(:9443\) must use different ports/,
  ],
  [
    ['controller', '--metrics-secure=false', '--tls-cert-file=a', '--tls-private-key-file=b'],
    /need --metrics-secure=true/,
  ],
  [['controller', '--metrics-secure=maybe'], /--metrics-secure: "maybe" is not true or false/],
  [
    ['controller', '--kubeconfig', '/nonexistent/kubeconfig'],
    /cannot load kubeconfig \/nonexistent\/kubeconfig/,
  ],
])('kubegc %p: one error line, exit code 2', (args, message) => {
  const r = kubegc(...args);
  expect(r.status).toBe(2);
  expect(r.stderr).toMatch(message);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
});
