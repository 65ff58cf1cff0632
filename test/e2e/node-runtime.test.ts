// `kubegc node` running as the DaemonSet does, while its containerd goes away
// and comes back: clear error lines, no crash, readiness and metrics follow
// the runtime, and collection resumes once containerd is back.
import { fileContainerd, until } from '../support/containerd.ts';
import { afterFile } from '../support/e2e.ts';
import { startNode } from '../support/kubegc-node.ts';
import type { KubegcProcess, LogLine } from '../support/kubegc.ts';
import { randomLayer } from '../../cluster/oci-image.ts';

const h = await fileContainerd({ sizeMiB: 64 });
let proc: KubegcProcess | undefined;
afterFile(async () => {
  await proc?.kill();
});

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

/** The value of one sample in Prometheus text format (0 when absent). */
function sample(text: string, name: string, labels = ''): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(labels ? `${name}{${labels}}` : `${name} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

test('containerd stopped and restarted under a running kubegc node: error lines, no crash, recovery', async () => {
  // Start with the runtime down, as after a node reboot where kubegc is first.
  await h.stop();
  proc = startNode(h, [
    '--container-gc-period',
    '300ms',
    '--image-gc-period',
    '300ms',
    '--runtime-request-timeout',
    '2s',
    '--image-minimum-gc-age',
    '0s',
    '--image-maximum-gc-age',
    '1s',
    // No API access here (TokenReview is impossible): plain HTTP, as for local development.
    '--metrics-secure=false',
    '--metrics-bind-address',
    '127.0.0.1:0',
    '--health-probe-bind-address',
    '127.0.0.1:0',
  ]);
  const running = proc;
  const started = await running.waitForLog(
    'the start line',
    (l) => l.msg === 'kubegc node starting',
  );
  const metricsUrl = `http://${started.metricsAddress as string}/metrics`;
  const readyUrl = `http://${started.healthAddress as string}/readyz`;

  const unavailable = (l: LogLine): boolean =>
    l.level === 'error' && l.msg === 'container runtime unavailable';
  const firstError = await running.waitForLog('a runtime error line', unavailable);
  expect(firstError.error).toMatch(
    new RegExp(`cannot reach the container runtime at ${h.endpoint}: .*(ENOENT|ECONNREFUSED)`),
  );
  expect(await get(readyUrl)).toMatchObject({ status: 503 });
  expect((await get(readyUrl)).body).toMatch(/container runtime at .* not reachable/);

  // containerd comes up: kubegc connects and collects.
  await h.start();
  await running.waitForLog('connection', (l) => l.msg === 'container runtime reachable again');
  const [aged] = await h.importImages([
    { name: 'kubegc.test/restart-aged:1', layers: [randomLayer(256 * 1024)] },
  ]);
  if (!aged) throw new Error('image not built');
  await running.waitForLog(
    'the aged image removed',
    (l) => l.msg === 'removed image' && l.id === aged.id && l.reason === 'age',
    30_000,
  );
  expect(await h.imageIds()).not.toContain(aged.id);
  expect((await get(readyUrl)).status).toBe(200);
  let metrics = (await get(metricsUrl)).body;
  expect(sample(metrics, 'kubegc_node_runtime_up')).toBe(1);
  expect(sample(metrics, 'kubegc_node_images_removed_total', 'reason="age",dry_run="false"')).toBe(
    1,
  );
  expect(
    sample(metrics, 'kubegc_node_gc_errors_total', 'gc="image",kind="runtime"'),
  ).toBeGreaterThan(0);

  // containerd stops while kubegc runs.
  const errorsBefore = running.lines.filter(unavailable).length;
  await h.stop();
  await until(
    'more runtime error lines',
    () => running.lines.filter(unavailable).length >= errorsBefore + 4,
  );
  expect(running.child.exitCode).toBeNull();
  await until('/readyz to fail', async () => (await get(readyUrl)).status === 503);
  metrics = (await get(metricsUrl)).body;
  expect(sample(metrics, 'kubegc_node_runtime_up')).toBe(0);
  // Each failure is one line naming the endpoint, not a stack trace.
  expect(running.raw.filter((l) => l.trim())).toEqual([]);
  const messages = new Set(running.lines.filter(unavailable).map((l) => l.error as string));
  for (const m of messages)
    expect(m).toMatch(
      new RegExp(
        `^cannot reach the container runtime at ${h.endpoint}: CRI \\S+: (UNAVAILABLE|DEADLINE_EXCEEDED): `,
      ),
    );

  // And comes back: passes succeed again.
  await h.start();
  const back = running.lines.length;
  await until('an image pass and a container pass after the restart', () => {
    const since = running.lines.slice(back);
    return (
      since.some((l) => l.msg === 'image GC pass done') &&
      since.some((l) => l.msg === 'container GC pass done')
    );
  });
  expect((await get(readyUrl)).status).toBe(200);

  // SIGTERM: a clean exit.
  await running.stop();
  expect(await running.exited).toEqual({ code: 0, signal: null });
  proc = undefined;
});
