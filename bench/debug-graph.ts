// /debug/graph under load, in-process (no API server): what a client reading
// the whole graph as JSON does to kubegc's event loop and to the graph work
// running beside it, for the streaming handler and for the old one that built
// the whole view and JSON.stringify'd it.
//   npm run bench:debug-graph -- [--seconds 10] [--objects 300000] [--rate 20000]
// Each scenario runs in a fresh process (so peak RSS and heap are its own):
// it builds an OwnershipGraph of --objects objects (a third ReplicaSets, each
// owning 2 Pods), serves /debug/graph on 127.0.0.1:0 and runs a "cascade":
// a 1 ms timer applying graph events (add a Pod under a ReplicaSet, mark a Pod
// being deleted, drop a Pod) through the OwnershipGraph API at --rate events/s,
// catching up (at most 50 ms worth per tick) when it falls behind. A client in
// another process fetches the whole JSON view in a loop (new: every page with
// limit=100000; old: the one answer). The event-loop delay is measured with
// perf_hooks.monitorEventLoopDelay({ resolution: 1 }) over --seconds, after
// one second of warm-up.
//   idle: the cascade alone (no client)     new: + streaming client     old: + old handler
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  edgeAttributes,
  NO_OWNER_REFERENCES,
  OwnershipGraph,
  type NodeAttributes,
} from '../src/graph/graph.ts';
import { debugGraphHandler, type DebugGraphJson } from '../src/observability/debug-graph.ts';

const SCENARIOS = ['idle', 'new', 'old'] as const;
type Scenario = (typeof SCENARIOS)[number];

interface Result {
  scenario: Scenario;
  seconds: number;
  objects: number;
  edges: number;
  loop_p50_ms: number;
  loop_p99_ms: number;
  loop_max_ms: number;
  target_events_per_s: number;
  events_per_s: number;
  /** How far the cascade fell behind its schedule, at worst. */
  max_event_lag_ms: number;
  views: number;
  view_mb: number;
  view_s_median: number;
  baseline_rss_mb: number;
  baseline_heap_mb: number;
  peak_rss_mb: number;
  peak_heap_mb: number;
  /** After the scenario and a forced GC: what the requests left behind. */
  end_heap_mb: number;
}

const argv = process.argv.slice(2);
const opt = (name: string, fallback: string): string => {
  const i = argv.indexOf(name);
  return i === -1 ? fallback : (argv[i + 1] ?? fallback);
};
const seconds = Number(opt('--seconds', '10'));
const objects = Number(opt('--objects', '300000'));
const rate = Number(opt('--rate', '20000'));
if (!(seconds > 0) || !(objects >= 3) || !(rate > 0))
  throw new Error('--seconds, --objects (>= 3) and --rate must be positive numbers');
const scenario = opt('--scenario', '') as Scenario | '';

// ---------------------------------------------------------------------------
// The old /debug/graph (HEAD before the streaming handler), for comparison.
type GraphView = DebugGraphJson;

function oldNeighbourhood(graph: OwnershipGraph, uid: string): Set<string> {
  const seen = new Set<string>([uid]);
  for (const step of [(u: string) => graph.owners(u), (u: string) => graph.dependents(u)]) {
    const stack = [uid];
    while (stack.length > 0) {
      const u = stack.pop() as string;
      for (const next of step(u)) {
        if (!seen.has(next)) {
          seen.add(next);
          stack.push(next);
        }
      }
    }
  }
  return seen;
}

function oldView(graph: OwnershipGraph, uid?: string): GraphView | undefined {
  if (uid !== undefined && !graph.has(uid)) return undefined;
  const include = uid === undefined ? undefined : oldNeighbourhood(graph, uid);
  const view: GraphView = { nodes: [], edges: [] };
  graph.g.forEachNode((key, a) => {
    if (include && !include.has(key)) return;
    view.nodes.push({
      uid: key,
      apiVersion: a.apiVersion,
      kind: a.kind,
      namespace: a.namespace,
      name: a.name,
      virtual: a.virtual,
      beingDeleted: a.beingDeleted,
      deletingDependents: a.deletingDependents,
    });
  });
  graph.g.forEachEdge((_e, a, owner, dependent) => {
    if (include && !(include.has(owner) && include.has(dependent))) return;
    view.edges.push({
      owner,
      dependent,
      controller: a.controller,
      blockOwnerDeletion: a.blockOwnerDeletion,
    });
  });
  return view;
}

/** The old route, JSON only (the bench fetches JSON), as served by the old server. */
function oldHandler(graph: OwnershipGraph): http.RequestListener {
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const view = oldView(graph, url.searchParams.get('uid') ?? undefined);
    if (!view) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(view));
  };
}

// ---------------------------------------------------------------------------
// The graph and the cascade.

function pod(uid: string, rs: NodeAttributes): NodeAttributes {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    namespace: rs.namespace,
    name: `${rs.name}-${uid.slice(0, 5)}`,
    uid,
    virtual: false,
    beingDeleted: false,
    deletingDependents: false,
    hasOrphanFinalizer: false,
    hasForegroundFinalizer: false,
    resourceVersion: String(Math.floor(Math.random() * 1e9)),
    ownerReferences: [
      {
        apiVersion: rs.apiVersion,
        kind: rs.kind,
        name: rs.name,
        uid: rs.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
  };
}

function build(n: number): { graph: OwnershipGraph; owners: string[]; pods: string[] } {
  const graph = new OwnershipGraph();
  const owners: string[] = [];
  const pods: string[] = [];
  const ctl = edgeAttributes(true, true);
  for (let i = 0; i < Math.floor(n / 3); i++) {
    const rs: NodeAttributes = {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      namespace: `team-${i % 200}`,
      name: `web-${i}-${randomUUID().slice(0, 10)}`,
      uid: randomUUID(),
      virtual: false,
      beingDeleted: false,
      deletingDependents: false,
      hasOrphanFinalizer: false,
      hasForegroundFinalizer: false,
      resourceVersion: String(1000 + i),
      ownerReferences: NO_OWNER_REFERENCES,
    };
    graph.addNode(rs);
    owners.push(rs.uid);
    for (let j = 0; j < 2; j++) {
      const p = pod(randomUUID(), rs);
      graph.addNode(p);
      graph.addEdge(rs.uid, p.uid, ctl);
      pods.push(p.uid);
    }
  }
  return { graph, owners, pods };
}

interface Cascade {
  /** Events applied since the last reset. */
  applied(): number;
  maxLagMs(): number;
  reset(): void;
  stop(): void;
}

function cascade(
  graph: OwnershipGraph,
  owners: string[],
  pods: string[],
  eventsPerS: number,
): Cascade {
  const ctl = edgeAttributes(true, true);
  const pick = <T>(a: T[]): number => Math.floor(Math.random() * a.length);
  let kind = 0;
  const event = (): void => {
    kind = (kind + 1) % 3;
    if (kind === 0) {
      const rs = graph.get(owners[pick(owners)] as string);
      if (!rs) return;
      const p = pod(randomUUID(), rs);
      graph.addNode(p);
      graph.addEdge(rs.uid, p.uid, ctl);
      pods.push(p.uid);
    } else if (kind === 1) {
      const a = graph.get(pods[pick(pods)] as string);
      if (a) {
        a.beingDeleted = true;
        a.resourceVersion = String(Number(a.resourceVersion) + 1);
      }
    } else {
      const i = pick(pods);
      const uid = pods[i] as string;
      pods[i] = pods[pods.length - 1] as string;
      pods.pop();
      if (graph.has(uid)) graph.dropNode(uid);
    }
  };
  let t0 = performance.now();
  let done = 0;
  let maxLag = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = (): void => {
    const due = Math.floor(((performance.now() - t0) * eventsPerS) / 1000) - done;
    maxLag = Math.max(maxLag, (due / eventsPerS) * 1000);
    const n = Math.min(due, Math.ceil(eventsPerS / 20));
    for (let i = 0; i < n; i++) event();
    done += Math.max(n, 0);
    timer = setTimeout(tick, 1);
  };
  tick();
  return {
    applied: () => done,
    maxLagMs: () => maxLag,
    reset: () => {
      // Forget any backlog: count from now.
      t0 = performance.now();
      done = 0;
      maxLag = 0;
    },
    stop: () => clearTimeout(timer),
  };
}

// The client: another process, so its reading and parsing is not on our loop.
const CLIENT = `
import http from 'node:http';
const base = process.env.URL, mode = process.env.MODE;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const page = (url) => new Promise((resolve, reject) => {
  http.get(url, { agent }, (r) => {
    let bytes = 0, tail = '';
    r.on('data', (c) => { bytes += c.length; tail = (tail + c.toString('latin1')).slice(-300); });
    r.on('end', () => r.statusCode === 200 ? resolve({ bytes, tail }) : reject(new Error('HTTP ' + r.statusCode)));
    r.on('error', reject);
  }).on('error', reject);
});
for (;;) {
  const t = performance.now();
  let token, bytes = 0, pages = 0;
  do {
    const r = await page(mode === 'new'
      ? base + '?format=json&limit=100000' + (token ? '&continue=' + token : '')
      : base + '?format=json');
    bytes += r.bytes; pages++;
    token = mode === 'new' ? /"continue":"([^"]+)"\\}$/.exec(r.tail)?.[1] : undefined;
  } while (token);
  process.stdout.write('view ' + bytes + ' ' + pages + ' ' + (performance.now() - t) + '\\n');
}
`;

const mb = (b: number): number => Math.round(b / 1e5) / 10;
const ms = (ns: number): number => Math.round(ns / 1e4) / 100;
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.floor(s.length / 2)] as number);
};

async function runScenario(which: Scenario): Promise<Result> {
  const { graph, owners, pods } = build(objects);
  (globalThis as { gc?: () => void }).gc?.();
  const base = process.memoryUsage();

  const handler = debugGraphHandler(graph);
  const server = http.createServer(
    which === 'old'
      ? oldHandler(graph)
      : (req, res) => {
          handler(req, res).catch((err: unknown) => {
            console.error(err);
            res.destroy();
          });
        },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/debug/graph`;

  let peakRss = base.rss;
  let peakHeap = base.heapUsed;
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  }, 20);

  const c = cascade(graph, owners, pods, rate);
  const views: { bytes: number; s: number }[] = [];
  let measuring = false;
  const client =
    which === 'idle'
      ? undefined
      : spawn(process.execPath, ['--input-type=module', '-e', CLIENT], {
          env: { ...process.env, URL: url, MODE: which },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
  if (client?.stdout)
    createInterface({ input: client.stdout }).on('line', (line) => {
      const [, bytes, , t] = line.split(' ');
      if (measuring) views.push({ bytes: Number(bytes), s: Number(t) / 1000 });
    });

  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await new Promise((r) => setTimeout(r, 1000)); // warm-up
  h.reset();
  c.reset();
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const elapsed = (performance.now() - t0) / 1000;
  measuring = false;
  h.disable();
  const applied = c.applied();
  const maxLag = c.maxLagMs();
  c.stop();
  clearInterval(sampler);
  client?.kill();
  server.closeAllConnections();
  server.close();
  (globalThis as { gc?: () => void }).gc?.();
  const end = process.memoryUsage();

  return {
    scenario: which,
    seconds: Math.round(elapsed * 10) / 10,
    objects: graph.order,
    edges: graph.g.size,
    loop_p50_ms: ms(h.percentile(50)),
    loop_p99_ms: ms(h.percentile(99)),
    loop_max_ms: ms(h.max),
    target_events_per_s: rate,
    events_per_s: Math.round(applied / elapsed),
    max_event_lag_ms: Math.round(maxLag),
    views: views.length,
    view_mb: mb(median(views.map((v) => v.bytes))),
    view_s_median: Math.round(median(views.map((v) => v.s)) * 100) / 100,
    baseline_rss_mb: mb(base.rss),
    baseline_heap_mb: mb(base.heapUsed),
    peak_rss_mb: mb(peakRss),
    peak_heap_mb: mb(peakHeap),
    end_heap_mb: mb(end.heapUsed),
  };
}

function table(results: Result[]): string {
  const rows = [
    '| scenario | loop delay p50 / p99 / max (ms) | graph events/s (target) | max event lag (ms) | whole views fetched (MB each, s each) | RSS after build → peak (MB) | heap used after build → peak → after GC at end (MB) |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  const name: Record<Scenario, string> = {
    idle: 'cascade only, no client',
    new: 'cascade + streaming /debug/graph (limit=100000 pages)',
    old: 'cascade + old /debug/graph (whole view, JSON.stringify)',
  };
  for (const r of results)
    rows.push(
      `| ${name[r.scenario]} | ${r.loop_p50_ms} / ${r.loop_p99_ms} / ${r.loop_max_ms} | ${r.events_per_s} (${r.target_events_per_s}) | ${r.max_event_lag_ms} | ${r.scenario === 'idle' ? '-' : `${r.views} (${r.view_mb}, ${r.view_s_median})`} | ${r.baseline_rss_mb} → ${r.peak_rss_mb} | ${r.baseline_heap_mb} → ${r.peak_heap_mb} → ${r.end_heap_mb} |`,
    );
  return rows.join('\n');
}

if (scenario !== '') {
  if (!SCENARIOS.includes(scenario)) throw new Error(`--scenario must be one of ${SCENARIOS}`);
  console.log(JSON.stringify(await runScenario(scenario)));
  process.exit(0);
} else {
  const results: Result[] = [];
  for (const which of SCENARIOS) {
    console.error(`scenario ${which}: ${objects} objects, ${seconds} s, ${rate} events/s ...`);
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn(
        process.execPath,
        [
          '--expose-gc',
          '--disable-warning=ExperimentalWarning',
          fileURLToPath(import.meta.url),
          ...argv,
          '--scenario',
          which,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let text = '';
      p.stdout.on('data', (d: Buffer) => (text += d.toString()));
      p.on('error', reject);
      p.on('exit', (code) =>
        code === 0 ? resolve(text) : reject(new Error(`scenario ${which} exited ${code}`)),
      );
    });
    const r = JSON.parse(out.trim().split('\n').pop() ?? '') as Result;
    console.error(JSON.stringify(r));
    results.push(r);
  }
  const first = results[0];
  console.log(
    `\n/debug/graph bench: ${first?.objects} objects, ${first?.edges} edges, ${seconds} s per scenario, Node ${process.version}\n`,
  );
  console.log(table(results));
}
