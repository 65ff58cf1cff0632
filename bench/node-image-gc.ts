// kubegc's image GC against the kubelet's own, side by side on the same real
// node (a kubelet and containerd from `upNode`, the image filesystem a 2 GiB
// tmpfs of its own). Each repetition starts a fresh node, runs a pod, waits a
// seeded random phase within the contender's GC period (so that, over the
// repetitions, the fill lands anywhere in a period, as it does on a node that
// has been up for days), then pushes unused images at the disk until its usage
// is past the high threshold, and measures until statfs sees it below the low
// threshold. The same policy for both: the kubelet's defaults (85/80, minimum
// age 2m); each collector at its own period (the kubelet's is fixed at 5m in
// its code; kubegc's as the DaemonSet ships, 1m). Hard eviction is moved out
// of the way (imagefs.available<5%, for the kubelet and kubegc alike), so that
// only image GC is measured.
//
//   npm run bench:node-gc -- [--rounds 5] [--seed S] [--keep-cluster]
//
// Every repetition is appended to bench/results/node-gc-latest.raw.json as it
// finishes; a full run (5 rounds or more) also writes
// bench/results/node-gc-full-<date>.json (committed) and bench/NODE-GC-RESULTS.md.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import * as prettier from 'prettier';
import { KUBEGC_DIST_CLI, kubegcArgv } from '../cluster/kubegc-command.ts';
import {
  REPO_ROOT,
  down,
  kubernetesVersion,
  logFile,
  up,
  type Cluster,
} from '../cluster/controlplane.ts';
import {
  CONTAINERD,
  NODE_NAME,
  PAUSE_IMAGE,
  downNode,
  importNodeImages,
  nodeImages,
  upNode,
} from '../cluster/node.ts';
import { hostToolsLayer, randomLayer, type ImageSpec } from '../cluster/oci-image.ts';
import { statFilesystem } from '../src/node/statfs.ts';
import { machine, machineTable, table, RESULTS_DIR } from './lib/report.ts';
import { rng, round2, shuffled, summarize, type Summary } from './lib/stats.ts';

const argv = process.argv.slice(2);
const opt = (name: string, fallback: string): string => {
  const i = argv.indexOf(name);
  return i === -1 ? fallback : (argv[i + 1] ?? fallback);
};
const ROUNDS = Number(opt('--rounds', '5'));
const SEED = Number(opt('--seed', String(Math.floor(Math.random() * 2 ** 31))));
const KEEP = argv.includes('--keep-cluster');
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive integer');
if (!Number.isInteger(SEED)) throw new Error('--seed must be an integer');
const FULL = ROUNDS >= 5;

const DIR = path.join(REPO_ROOT, '.cluster-bench-node');
const MiB = 1 << 20;
const HIGH = 85;
const LOW = 80;
const MIN_AGE = '2m';
/** Out of the way of image GC: eviction would remove every unused image at once. */
const EVICTION = {
  'memory.available': '100Mi',
  'nodefs.available': '5%',
  'imagefs.available': '5%',
};
const KUBEGC_EVICTION = 'memory.available<100Mi,nodefs.available<5%,imagefs.available<5%';
/** The fill stops at or above this usage: past the high threshold, below kubegc's pressure margin (90%). */
const FILL_TO_PERCENT = 86;
const FILLER_LAYER = 24 * MiB;
const FILL_BATCH = 6;
/** Longest wait for the low threshold: two kubelet periods and a half. */
const DEADLINE_MS = 13 * 60_000;
/** After the low threshold is reached, a pass may still be removing: wait this long for it to end. */
const SETTLE_MS = 15_000;

type Contender = 'kubelet' | 'kubegc';
const CONTENDERS: Contender[] = ['kubelet', 'kubegc'];
const PERIOD_MS: Record<Contender, number> = { kubelet: 300_000, kubegc: 60_000 };
const LABELS: Record<Contender, string> = {
  kubelet: `kubelet image GC (imageGCHighThresholdPercent ${HIGH}, imageGCLowThresholdPercent ${LOW}, imageMinimumGCAge ${MIN_AGE}; every 5m, fixed); kubegc off`,
  kubegc: `kubegc node --image-gc-high-threshold=${HIGH} --image-gc-low-threshold=${LOW} --image-minimum-gc-age=${MIN_AGE} --image-gc-period=1m; the kubelet's image GC off (imageGCHighThresholdPercent 100)`,
};

const APP: ImageSpec = {
  name: 'kubegc.bench/app:1',
  layers: [hostToolsLayer(['/bin/sleep']), randomLayer(8 * MiB)],
  entrypoint: ['/bin/sleep', '3600'],
};

interface Repetition {
  round: number;
  position: number;
  contender: Contender;
  phaseSeconds: number;
  fillers?: number;
  capacityBytes?: number;
  /** Used bytes (capacity − available, as statfs reports) at the end of the fill. */
  usedAtFillEndBytes?: number;
  usagePercentAtFillEnd?: number;
  fillSeconds?: number;
  /** From the end of the fill until statfs shows usage below the low threshold. */
  secondsToLow?: number | null;
  /** GC passes that began with usage at or above the high threshold (the kubelet's log, kubegc's). */
  passes?: number;
  imagesRemoved?: number;
  /** The fewest fillers whose removal (at their measured size on disk) brings usage below the low threshold. */
  fewestSufficient?: number;
  bytesFreedStatfs?: number;
  usagePercentAfter?: number;
  /** Images that had to stay (pause, the running pod's) and are gone: must be empty. */
  wronglyRemoved?: string[];
  appPodReady?: boolean;
  freeDiskSpaceFailedEvents?: number;
  error?: string;
}

const log = (l: string): void => void process.stderr.write(`node-gc bench: ${l}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function usage(): Promise<{ used: number; capacity: number; percent: number }> {
  const s = await statFilesystem(CONTAINERD.root);
  const used = s.capacityBytes - Math.min(s.availableBytes, s.capacityBytes);
  return { used, capacity: s.capacityBytes, percent: (100 * used) / s.capacityBytes };
}

function startKubegc(cluster: Cluster, logPath: string): ChildProcess {
  const args = kubegcArgv(
    [
      'node',
      '--kubeconfig',
      cluster.kubeconfig,
      '--node-name',
      NODE_NAME,
      `--image-gc-high-threshold=${HIGH}`,
      `--image-gc-low-threshold=${LOW}`,
      `--image-minimum-gc-age=${MIN_AGE}`,
      '--image-gc-period=1m',
      `--eviction-hard=${KUBEGC_EVICTION}`,
      `--root-dir=${path.join(DIR, 'node', 'kubelet')}`,
      '--metrics-bind-address=0',
      '--health-probe-bind-address=0',
    ],
    [],
    KUBEGC_DIST_CLI,
  );
  const out = createWriteStream(logPath, { flags: 'a' });
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  return child;
}

async function stopKubegc(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(10_000)]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

/** Lines of a log file written after byte `from` that contain `text`. */
async function linesSince(file: string, from: number, text: string): Promise<string[]> {
  const buf = await fs.readFile(file).catch(() => Buffer.alloc(0));
  return buf
    .subarray(from)
    .toString('utf8')
    .split('\n')
    .filter((l) => l.includes(text));
}

const fileSize = async (file: string): Promise<number> =>
  (await fs.stat(file).catch(() => ({ size: 0 }))).size;

async function repetition(cluster: Cluster, core: k8s.CoreV1Api, rec: Repetition): Promise<void> {
  const { contender, round } = rec;
  let kubegc: ChildProcess | undefined;
  const kubegcLog = path.join(DIR, 'logs', `kubegc-node-r${round}.log`);
  try {
    await downNode(DIR, log).catch(() => undefined);
    await upNode(cluster, {
      log,
      kubeletDisk: {
        imageGc: contender === 'kubelet' ? 'kubelet-defaults' : 'off',
        eviction: EVICTION,
      },
    });
    if (contender === 'kubegc') kubegc = startKubegc(cluster, kubegcLog);

    const ns = `bench-node-gc-${round}-${contender}`;
    await core.deleteNamespace({ name: ns }).catch(() => undefined);
    await waitUntil('the old namespace to go', 120_000, async () =>
      core.readNamespace({ name: ns }).then(
        () => false,
        () => true,
      ),
    );
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await importNodeImages([APP]);
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'app' },
        spec: { containers: [{ name: 'app', image: APP.name, imagePullPolicy: 'Never' }] },
      },
    });
    await waitUntil('the app pod to run', 120_000, async () =>
      podReady(await core.readNamespacedPod({ namespace: ns, name: 'app' })),
    );

    log(`round ${round} ${contender}: phase ${rec.phaseSeconds} s`);
    await sleep(rec.phaseSeconds * 1000);

    const fillStart = Date.now();
    const before = await usage();
    let fillers = 0;
    for (;;) {
      const u = await usage();
      if (u.percent >= FILL_TO_PERCENT) break;
      // Batches while far from the target, one at a time near it.
      const perFiller = fillers ? (u.used - before.used) / fillers : 40 * MiB;
      const room = Math.floor(((FILL_TO_PERCENT / 100) * u.capacity - u.used) / perFiller);
      const batch = Math.max(1, Math.min(FILL_BATCH, room));
      await importNodeImages(
        Array.from({ length: batch }, (_, i) => ({
          name: `kubegc.bench/filler-r${round}:${fillers + i}`,
          layers: [randomLayer(FILLER_LAYER)],
        })),
      );
      fillers += batch;
    }
    const t0 = Date.now();
    const filled = await usage();
    rec.fillers = fillers;
    rec.fillSeconds = round2((t0 - fillStart) / 1000);
    rec.capacityBytes = filled.capacity;
    rec.usedAtFillEndBytes = filled.used;
    rec.usagePercentAtFillEnd = round2(filled.percent);
    const kubeletLog = logFile(DIR, 'kubelet');
    const kubeletFrom = await fileSize(kubeletLog);
    const kubegcFrom = await fileSize(kubegcLog);
    log(
      `round ${round} ${contender}: ${fillers} fillers in ${rec.fillSeconds} s, usage ${rec.usagePercentAtFillEnd}%`,
    );

    let reached: number | null = null;
    while (Date.now() - t0 < DEADLINE_MS) {
      if ((await usage()).percent < LOW) {
        reached = Date.now();
        break;
      }
      await sleep(1000);
    }
    rec.secondsToLow = reached === null ? null : round2((reached - t0) / 1000);
    await sleep(SETTLE_MS);

    const after = await usage();
    const images = await nodeImages();
    const left = images.filter((n) => n.startsWith(`kubegc.bench/filler-r${round}:`)).length;
    const perFillerBytes = (filled.used - before.used) / fillers;
    rec.imagesRemoved = fillers - left;
    rec.fewestSufficient = Math.max(
      0,
      Math.floor((filled.used - (LOW / 100) * filled.capacity) / perFillerBytes) + 1,
    );
    rec.bytesFreedStatfs = filled.used - after.used;
    rec.usagePercentAfter = round2(after.percent);
    rec.wronglyRemoved = [PAUSE_IMAGE, APP.name].filter((n) => !images.includes(n));
    rec.appPodReady = podReady(await core.readNamespacedPod({ namespace: ns, name: 'app' }));
    rec.passes =
      contender === 'kubelet'
        ? (
            await linesSince(
              kubeletLog,
              kubeletFrom,
              'Disk usage on image filesystem is over the high threshold',
            )
          ).length
        : (await linesSince(kubegcLog, kubegcFrom, '"image GC pass done"')).filter((l) => {
            const before = (JSON.parse(l) as { usagePercentBefore?: number }).usagePercentBefore;
            return before !== undefined && before >= HIGH;
          }).length;
    const events = await core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: 'reason=FreeDiskSpaceFailed',
    });
    rec.freeDiskSpaceFailedEvents = events.items.filter(
      (e) =>
        new Date(e.series?.lastObservedTime ?? e.lastTimestamp ?? e.eventTime ?? 0).getTime() >=
        t0 - 1000,
    ).length;
    await core.deleteNamespace({ name: ns }).catch(() => undefined);
  } finally {
    await stopKubegc(kubegc);
  }
}

function podReady(p: k8s.V1Pod): boolean {
  return p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

async function waitUntil(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await sleep(1000);
  }
  throw new Error(`${what}: not within ${ms / 1000} s`);
}

// ---------------------------------------------------------------------------
// Summary

type Measure = keyof Pick<
  Repetition,
  | 'secondsToLow'
  | 'passes'
  | 'imagesRemoved'
  | 'fewestSufficient'
  | 'bytesFreedStatfs'
  | 'usagePercentAfter'
  | 'freeDiskSpaceFailedEvents'
>;
const MEASURES: { key: Measure; label: string; scale?: number }[] = [
  { key: 'secondsToLow', label: 'seconds from the end of the fill to below the low threshold' },
  { key: 'passes', label: 'passes that began at or above the high threshold' },
  { key: 'imagesRemoved', label: 'images removed' },
  { key: 'fewestSufficient', label: 'fewest removals that would have sufficed' },
  { key: 'bytesFreedStatfs', label: 'MiB freed (statfs)', scale: MiB },
  { key: 'usagePercentAfter', label: 'usage % after' },
  { key: 'freeDiskSpaceFailedEvents', label: 'FreeDiskSpaceFailed events on the Node' },
];

function summarise(reps: readonly Repetition[]): Record<Contender, Record<string, Summary>> {
  const out = {} as Record<Contender, Record<string, Summary>>;
  for (const c of CONTENDERS) {
    const mine = reps.filter((r) => r.contender === c && !r.error);
    out[c] = {};
    for (const m of MEASURES)
      out[c][m.key] = summarize(
        mine
          .map((r) => r[m.key])
          .filter((v): v is number => typeof v === 'number')
          .map((v) => v / (m.scale ?? 1)),
      );
    out[c].removedOverFewest = summarize(
      mine
        .filter((r) => r.imagesRemoved !== undefined && r.fewestSufficient)
        .map((r) => (r.imagesRemoved ?? 0) / (r.fewestSufficient ?? 1)),
    );
    out[c].wronglyRemoved = summarize(mine.map((r) => r.wronglyRemoved?.length ?? 0));
  }
  return out;
}

const fmt = (s: Summary | undefined): string =>
  !s || s.median === null
    ? '–'
    : `${round2(s.median)} (${round2(s.min ?? 0)}–${round2(s.max ?? 0)})`;

function markdown(
  reps: readonly Repetition[],
  rawFile: string,
  m: ReturnType<typeof machine>,
): string {
  const sum = summarise(reps);
  const rows = [
    ...MEASURES.map((x) => [x.label, fmt(sum.kubelet[x.key]), fmt(sum.kubegc[x.key])]),
    [
      'images removed ÷ fewest sufficient',
      fmt(sum.kubelet.removedOverFewest),
      fmt(sum.kubegc.removedOverFewest),
    ],
    [
      'protected images wrongly removed (must be 0)',
      fmt(sum.kubelet.wronglyRemoved),
      fmt(sum.kubegc.wronglyRemoved),
    ],
  ];
  const failed = reps.filter((r) => r.error);
  const perRep = reps.map((r) => [
    String(r.round),
    r.contender,
    String(r.phaseSeconds),
    String(r.fillers ?? '–'),
    String(r.usagePercentAtFillEnd ?? '–'),
    r.secondsToLow === null ? 'not reached' : String(r.secondsToLow ?? '–'),
    String(r.passes ?? '–'),
    `${r.imagesRemoved ?? '–'} / ${r.fewestSufficient ?? '–'}`,
    String(r.usagePercentAfter ?? '–'),
    r.error ? `error: ${r.error}` : (r.wronglyRemoved ?? []).join(', ') || 'none',
  ]);
  return `# Node image GC: kubegc against the kubelet's own, on the same node

Written by \`npm run bench:node-gc\` (see the header of \`bench/node-image-gc.ts\`
for what is measured and how); raw data: \`${path.relative(REPO_ROOT, rawFile)}\`.
Seed ${SEED}, ${ROUNDS} rounds; median (min–max) over the repetitions.

| contender | what ran |
| --- | --- |
| kubelet | ${LABELS.kubelet} |
| kubegc | ${LABELS.kubegc} |

The node: a real kubelet and containerd (\`upNode\`), a fresh one per
repetition, its image filesystem a 2 GiB tmpfs (a dedicated imagefs to the
kubelet); hard eviction at \`imagefs.available<5%\` for both, so that only
image GC acts. Each filler image is one ${FILLER_LAYER / MiB} MiB random
layer. The fill starts after a seeded random phase within the contender's
period and stops once usage is at or above ${FILL_TO_PERCENT}%.

| measure | kubelet | kubegc |
| --- | --- | --- |
${rows.map((r) => `| ${r.join(' | ')} |`).join('\n')}

Why the kubelet removes the pause image here: the kubelet's image GC counts
only containers' images as in use, not sandboxes', and relies on the runtime
marking the sandbox image pinned. The pause image on this node is imported
with \`ctr import\` (no registry here), and containerd labels its sandbox image
pinned only when the CRI pulls it, so containerd reports it unpinned and the
kubelet removes it under running sandboxes. kubegc keeps it by its sandbox
rule (the runtime's configured sandbox image, by name) and by \`--pinned-images\`.

## Every repetition

${table(['round', 'contender', 'phase s', 'fillers', 'usage % at fill end', 's to low', 'passes', 'removed / fewest', 'usage % after', 'wrongly removed'], perRep)}
${failed.length ? `\n${failed.length} repetition(s) failed (listed above with their error).\n` : ''}
## Machine

${machineTable(m)}
`;
}

// ---------------------------------------------------------------------------

if (!existsSync(KUBEGC_DIST_CLI))
  throw new Error(`${KUBEGC_DIST_CLI} is missing: run \`npm run build\` first`);
const cluster = await up({ dir: DIR, log });
const kc = new k8s.KubeConfig();
kc.loadFromFile(cluster.kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const m = machine(await kubernetesVersion(), path.join(cluster.binDir, 'kubelet'));
m.loadAverageAtStart = (await import('node:os')).loadavg();
const results = RESULTS_DIR(REPO_ROOT);
await fs.mkdir(results, { recursive: true });
const rawLatest = path.join(results, 'node-gc-latest.raw.json');
const reps: Repetition[] = [];
const random = rng(SEED);
log(`seed ${SEED}, ${ROUNDS} rounds`);
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const order = shuffled(CONTENDERS, random);
    for (const [position, contender] of order.entries()) {
      const rec: Repetition = {
        round,
        position,
        contender,
        phaseSeconds: Math.floor(random() * (PERIOD_MS[contender] / 1000)),
      };
      try {
        await repetition(cluster, core, rec);
      } catch (err) {
        rec.error = (err as Error).message;
        log(`round ${round} ${contender} failed: ${rec.error}`);
      }
      reps.push(rec);
      log(`round ${round} ${contender}: ${JSON.stringify(rec)}`);
      await fs.writeFile(rawLatest, JSON.stringify({ seed: SEED, rounds: ROUNDS, reps }, null, 2));
    }
  }
} finally {
  await downNode(DIR, log).catch((err: unknown) => log(`node teardown: ${String(err)}`));
  if (!KEEP) await down(DIR);
}
m.loadAverageAtEnd = (await import('node:os')).loadavg();
const doc = {
  seed: SEED,
  rounds: ROUNDS,
  labels: LABELS,
  machine: m,
  summary: summarise(reps),
  reps,
};
await fs.writeFile(path.join(results, 'node-gc-latest.json'), JSON.stringify(doc, null, 2));
const stamp = new Date().toISOString().slice(0, 16).replace(':', '');
const rawFull = path.join(results, `node-gc-full-${stamp}.json`);
// Formatted as `npm run lint` checks it, so that a committed report passes.
const mdFile = path.join(REPO_ROOT, 'bench', 'NODE-GC-RESULTS.md');
const md = await prettier.format(markdown(reps, FULL ? rawFull : rawLatest, m), {
  ...((await prettier.resolveConfig(mdFile)) ?? {}),
  parser: 'markdown',
});
await fs.writeFile(path.join(results, 'node-gc-latest.md'), md);
if (FULL) {
  await fs.writeFile(rawFull, JSON.stringify(doc, null, 2));
  await fs.writeFile(mdFile, md);
  log(`full run: ${path.relative(REPO_ROOT, rawFull)} and bench/NODE-GC-RESULTS.md written`);
} else
  log(
    `fewer than 5 rounds: bench/NODE-GC-RESULTS.md left alone; see bench/results/node-gc-latest.md`,
  );
process.stdout.write(md);
