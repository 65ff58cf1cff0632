// `kubegc node` as an operator meets it without a runtime: help, and one
// clear line with exit code 2 for flags the kubelet would reject.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { UsageError } from '../../src/cli/flags.ts';
import { nodeCommand } from '../../src/cli/node.ts';
import { kubegcArgv } from '../../cluster/kubegc-command.ts';

function kubegc(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, kubegcArgv(args), {
    encoding: 'utf8',
    env: { ...process.env, KUBERNETES_SERVICE_HOST: '' },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('node --help lists the kubelet-style flags', () => {
  const r = kubegc('node', '--help');
  expect(r.status).toBe(0);
  for (const flag of [
    '--cri-endpoint',
    '--image-gc-high-threshold',
    '--image-gc-low-threshold',
    '--image-minimum-gc-age',
    '--image-maximum-gc-age',
    '--pinned-images',
    '--expected-back-images',
    '--expected-back-max-unused',
    '--state-file',
    '--max-removals-per-run',
    '--image-gc-period',
    '--container-gc-period',
    '--minimum-container-ttl-duration',
    '--maximum-dead-containers-per-container',
    '--maximum-dead-containers',
    '--pod-logs-dir',
    '--container-logs-dir',
    '--eviction-hard',
    '--eviction-reclaim-margin',
    '--root-dir',
    '--pressure-check-period',
    '--node-name',
    '--once',
    '--dry-run',
    '--metrics-bind-address',
    '--health-probe-bind-address',
  ]) {
    expect(r.stdout).toContain(flag);
  }
});

test.each([
  [['--image-gc-high-threshold', '101'], /--image-gc-high-threshold 101 must be between 0 and 100/],
  [['--image-gc-low-threshold', '-1'], /--image-gc-low-threshold -1 must be between 0 and 100/],
  [
    ['--image-gc-high-threshold', '70', '--image-gc-low-threshold', '75'],
    /--image-gc-low-threshold 75 must be less than --image-gc-high-threshold 70/,
  ],
  [
    ['--image-gc-high-threshold', '80', '--image-gc-low-threshold', '80'],
    /--image-gc-low-threshold 80 must be less than --image-gc-high-threshold 80/,
  ],
  [['--image-maximum-gc-age', '-1m'], /invalid duration "-1m"/],
  [
    ['--eviction-hard', 'imagefs.available>15%'],
    /--eviction-hard: "imagefs.available>15%" is not of the form signal<value/,
  ],
  [
    ['--eviction-hard', 'disk.available<10%'],
    /--eviction-hard: unsupported eviction signal disk.available/,
  ],
  [['--eviction-hard', 'nodefs.available<200%'], /must be <= 100%/],
  [
    ['--eviction-reclaim-margin', 'lots'],
    /--eviction-reclaim-margin: margin: "lots" is not a quantity/,
  ],
  [['--pressure-check-period', '10ms'], /--pressure-check-period: must be 0 or at least 100ms/],
  // 50% for 5%: reclaim would start on a disk 40% full and take every eligible image.
  [
    ['--eviction-reclaim-margin', '50%'],
    /--eviction-reclaim-margin: 50% is more than 10%: .*start below 65% free/,
  ],
  [['--eviction-reclaim-margin', '10.5%'], /--eviction-reclaim-margin: 10.5% is more than 10%/],
  [
    ['--runtime-request-timeout', '600h'],
    /--runtime-request-timeout: must be at most 596h: kubegc waits on it with one timer/,
  ],
  [
    ['--once', '--root-dir', '/nonexistent/kubelet'],
    /--root-dir \/nonexistent\/kubelet: no such directory: .* pass --root-dir=<the kubelet's --root-dir, or a directory on its filesystem>, or --eviction-hard='' to turn pressure reclaim off/,
  ],
  [['--minimum-container-ttl-duration', '-5s'], /invalid duration "-5s"/],
  [
    ['--image-maximum-gc-age', '1m'],
    /--image-maximum-gc-age \(60s\) must be greater than --image-minimum-gc-age \(120s\)/,
  ],
  [['--image-gc-high-threshold', 'high'], /--image-gc-high-threshold: "high" is not an integer/],
  [['--image-minimum-gc-age', '2'], /invalid duration/],
  [['--max-removals-per-run', '-1'], /--max-removals-per-run: must be at least 0/],
  [
    ['--expected-back-max-unused', '1w'],
    /--expected-back-max-unused: invalid duration "1w" \(examples: 500ms, 30s, 2m, 1h30m\)/,
  ],
  [['--expected-back-images=maybe'], /--expected-back-images: "maybe" is not true or false/],
  [['--metrics-bind-address', 'nowhere'], /invalid bind address/],
  [['--kubeconfig', '/nonexistent/kubeconfig'], /cannot load kubeconfig \/nonexistent\/kubeconfig/],
  [['--bogus'], /unknown flag --bogus/],
  [['--tls-cert-file', 'x.crt'], /must be given together/],
  [
    ['--metrics-bind-address', '127.0.0.1:0'],
    /no API access for the metrics port .* pass --metrics-secure=false or --metrics-bind-address=0/,
  ],
  [['extra'], /unexpected argument "extra"/],
  [
    ['--pinned-images', 'registry.k8s.io/pause:*,NGINX:1.25'],
    /--pinned-images: "NGINX:1.25" can never match an image: .*repository name \(library\/NGINX\) must be lowercase/,
  ],
  [
    ['--pinned-images', 'nginx:1.25@sha256:abc'],
    /--pinned-images: "nginx:1.25@sha256:abc" can never match an image/,
  ],
  // No Node can have such a name: every pod list would be empty.
  [['--node-name', 'node_1'], /--node-name: "node_1" is not a DNS subdomain/],
  [['--node-name', `n${'x'.repeat(253)}`], /--node-name: "nx+" is longer than 253 characters/],
])('kubegc node %p is a usage error (one line, exit code 2)', async (args, message) => {
  const err = await nodeCommand(args).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(UsageError);
  expect((err as Error).message).toMatch(message);
  expect((err as Error).message).not.toContain('\n');
});

test('a usage error is one line on stderr and exit code 2', () => {
  const r = kubegc('node', '--image-gc-high-threshold', '70', '--image-gc-low-threshold', '75');
  expect(r.status).toBe(2);
  expect(r.stderr.trim().split('\n')).toEqual([
    'kubegc: --image-gc-low-threshold 75 must be less than --image-gc-high-threshold 70',
  ]);
});

/** One pass of each kind against a socket that does not exist (each fails fast). */
const ONCE_WITHOUT_RUNTIME = [
  'node',
  '--once',
  '--cri-endpoint',
  'unix:///nonexistent/kubegc-test.sock',
  '--runtime-request-timeout',
  '2s',
];

test("--once with a --root-dir that does not exist: exit code 2 before any pass, naming the flags to pass; with --eviction-hard='' the passes run", () => {
  const missing = [...ONCE_WITHOUT_RUNTIME, '--root-dir', '/nonexistent/kubelet'];
  const r = kubegc(...missing);
  expect(r.status).toBe(2);
  expect(r.stderr.trim().split('\n')).toEqual([
    "kubegc: --root-dir /nonexistent/kubelet: no such directory: pressure reclaim measures the kubelet's root filesystem (nodefs) there; pass --root-dir=<the kubelet's --root-dir, or a directory on its filesystem>, or --eviction-hard='' to turn pressure reclaim off",
  ]);
  const off = kubegc(...missing, '--eviction-hard', '');
  expect(off.status).toBe(1); // the runtime is missing, and said so by each pass
  const errors = off.stderr
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { level: string; gc?: string })
    .filter((l) => l.level === 'error');
  expect(errors.map((e) => e.gc)).toEqual(['container', 'image']);
});

test('--once against a missing socket: one clear error line per pass, exit code 1', () => {
  // A --root-dir that exists wherever the test runs (the default, /var/lib/kubelet, may not).
  const r = kubegc(...ONCE_WITHOUT_RUNTIME, '--root-dir', os.tmpdir());
  expect(r.status).toBe(1);
  const errors = r.stderr
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { level: string; msg: string; error?: string })
    .filter((l) => l.level === 'error');
  expect(errors).toHaveLength(3); // the container pass, the image pass and the pressure check
  for (const e of errors) {
    expect(e.msg).toBe('container runtime unavailable');
    expect(e.error).toMatch(
      /cannot reach the container runtime at unix:\/\/\/nonexistent\/kubegc-test.sock: .*ENOENT/,
    );
  }
});

test('a --pinned-images glob no image can match is a warning at start', () => {
  const r = kubegc(
    ...ONCE_WITHOUT_RUNTIME,
    '--root-dir',
    os.tmpdir(),
    '--pinned-images',
    'https://registry.example.com/*,registry.k8s.io/pause:*',
  );
  const warnings = r.stderr
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { level: string; msg: string })
    .filter((l) => l.level === 'warn');
  expect(warnings.map((w) => w.msg)).toEqual([
    expect.stringMatching(
      /^--pinned-images: "https:\/\/registry.example.com\/\*" seems to match no image/,
    ),
  ]);
});

test('an API server that accepts connections and never answers leaves the pods unknown for the pass after --request-timeout, instead of holding the pass (and a pressure reclaim) for the client default of 30 s', async () => {
  // A listener that never speaks: the TLS handshake hangs, as behind a blackholed network.
  const silent = net.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const port = (silent.address() as net.AddressInfo).port;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-silent-api-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  await fs.writeFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'c',
          cluster: { server: `https://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true },
        },
      ],
      users: [{ name: 'u', user: { token: 'x' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'c',
    }),
  );
  try {
    const child = spawn(
      process.execPath,
      kubegcArgv([
        ...ONCE_WITHOUT_RUNTIME,
        '--root-dir',
        os.tmpdir(),
        '--kubeconfig',
        kubeconfig,
        '--node-name',
        'n1',
        '--request-timeout',
        '500ms',
      ]),
      { env: { ...process.env, KUBERNETES_SERVICE_HOST: '' } },
    );
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    // The deadline of the check, not a timing assertion: the old client default (30 s) misses it.
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((r) => child.on('close', r));
    clearTimeout(killer);
    expect(code).not.toBeNull();
    expect(stderr).toMatch(/timed out after 500 ms/);
  } finally {
    silent.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
}, 30_000);
