// Runs `kubegc node` against a test containerd and reads its JSON log lines.
import { runKubegc, type KubegcProcess, type LogLine } from './kubegc.ts';
import type { TestContainerd } from './containerd.ts';

export interface NodeRun {
  code: number | null;
  lines: LogLine[];
  raw: string[];
  /** Log lines with this message. */
  logged(msg: string): LogLine[];
  /** IDs of the images logged as removed (or as would-be removed in a dry run). */
  removedImages(): string[];
  removedContainers(): string[];
  /** The "image GC pass done" summary. */
  imagePass(): LogLine;
}

/**
 * Image GC flags under which a pass removes every image nothing protects: no
 * minimum age, a high threshold below any usage and a low one of 0.
 */
export const EVERY_UNPROTECTED_IMAGE = [
  '--image-minimum-gc-age',
  '0',
  '--image-gc-high-threshold',
  '1',
  '--image-gc-low-threshold',
  '0',
];

/** Percent of the image filesystem available, as the kubelet's signal has it (floor). */
export async function availablePercent(h: TestContainerd): Promise<number> {
  const fs = await h.fs();
  return Math.floor((Math.min(fs.availableBytes, fs.capacityBytes) * 100) / fs.capacityBytes);
}

/**
 * Pressure reclaim on imagefs.available alone, due now: its threshold 3% below
 * `available` (so the kubelet would not evict yet) and a 5% margin, so a
 * reclaim runs (once with --once) and aims 7% above that level; the kubelet's
 * root is the test containerd's directory.
 */
export function imagefsPressureFlags(h: TestContainerd, available: number): string[] {
  return [
    '--eviction-hard',
    `imagefs.available<${available - 3}%`,
    '--eviction-reclaim-margin',
    '5%',
    '--pressure-check-period',
    '10s',
    '--root-dir',
    h.dir,
  ];
}

/** The flags every test run shares: this containerd, its log directories, no HTTP endpoints. */
export function nodeArgs(h: TestContainerd, extra: string[]): string[] {
  return [
    'node',
    '--cri-endpoint',
    h.endpoint,
    '--pod-logs-dir',
    h.podLogsDir,
    '--container-logs-dir',
    h.containerLogsDir,
    '--runtime-request-timeout',
    '30s',
    '--metrics-bind-address',
    '0',
    '--health-probe-bind-address',
    '0',
    // Pressure reclaim reads this machine's disk: off unless a test turns it on
    // (with its own --root-dir and thresholds).
    '--root-dir',
    h.podLogsDir,
    '--pressure-check-period',
    '0',
    ...extra,
  ];
}

export function startNode(h: TestContainerd, extra: string[]): KubegcProcess {
  return runKubegc(nodeArgs(h, extra), { ...process.env, KUBERNETES_SERVICE_HOST: '' });
}

/** `kubegc node --once ...`, to its exit. */
export async function runNodeOnce(h: TestContainerd, extra: string[]): Promise<NodeRun> {
  const proc = startNode(h, ['--once', ...extra]);
  // 'close' comes after the output streams ended, so every log line is parsed.
  const closed = new Promise<number | null>((resolve) => proc.child.on('close', resolve));
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 120_000);
  const code = await closed;
  clearTimeout(timer);
  return wrap(code, proc);
}

export function wrap(code: number | null, proc: KubegcProcess): NodeRun {
  const logged = (msg: string): LogLine[] => proc.lines.filter((l) => l.msg === msg);
  return {
    code,
    lines: proc.lines,
    raw: proc.raw,
    logged,
    removedImages: () =>
      [...logged('removed image'), ...logged('would remove image (dry run)')].map(
        (l) => l.id as string,
      ),
    removedContainers: () =>
      [...logged('removed container'), ...logged('would remove container (dry run)')].map(
        (l) => l.id as string,
      ),
    imagePass: () => {
      const l = logged('image GC pass done')[0];
      if (!l)
        throw new Error(
          `no image GC pass summary; output:\n${proc.lines.map((x) => JSON.stringify(x)).join('\n')}\n${proc.raw.join('\n')}`,
        );
      return l;
    },
  };
}
