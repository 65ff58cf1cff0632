import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  edgeAttributes,
  NO_OWNER_REFERENCES,
  OwnershipGraph,
  StandaloneObject,
  type NodeAttributes,
} from '../graph/graph.ts';
import { debugGraphHandler, type DebugGraphJson } from './debug-graph.ts';

type JsonView = DebugGraphJson;
type JsonEdge = DebugGraphJson['edges'][number];

function attrs(uid: string, extra: Partial<NodeAttributes> = {}): NodeAttributes {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    namespace: 'ns',
    name: `cm-${uid}`,
    uid,
    virtual: false,
    beingDeleted: false,
    deletingDependents: false,
    hasOrphanFinalizer: false,
    hasForegroundFinalizer: false,
    resourceVersion: '1',
    ownerReferences: NO_OWNER_REFERENCES,
    ...extra,
  };
}

function own(graph: OwnershipGraph, owner: string, dependent: string, controller = true): void {
  const o = graph.get(owner);
  const d = graph.get(dependent);
  if (!o || !d) throw new Error('own: unknown node');
  d.ownerReferences = [
    ...d.ownerReferences,
    { apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid, controller },
  ];
  graph.addEdge(owner, dependent, edgeAttributes(controller, controller));
}

/**
 * 25,000 objects: 5,000 Deployments, each with 2 ReplicaSets, each with 1 Pod;
 * every 7th Pod also owned (not as controller) by the previous Deployment's
 * first ReplicaSet; a few virtual owners; names padded so that a whole-graph
 * answer is well over 10 MB (more than the kernel buffers on loopback).
 */
function bigGraph(): OwnershipGraph {
  const graph = new OwnershipGraph();
  const pad = 'x'.repeat(300);
  for (let d = 0; d < 5000; d++) {
    const du = `dep-${d}`;
    graph.addNode(
      attrs(du, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: `web-"${d}"\\${pad}`,
        virtual: d % 1000 === 0,
      }),
    );
    for (let r = 0; r < 2; r++) {
      const ru = `rs-${d}-${r}`;
      graph.addNode(attrs(ru, { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${ru}-${pad}` }));
      own(graph, du, ru);
      const pu = `pod-${d}-${r}`;
      graph.addNode(attrs(pu, { kind: 'Pod', name: `${pu}-${pad}`, beingDeleted: d % 3 === 0 }));
      own(graph, ru, pu);
      if (r === 0 && d > 0 && d % 7 === 0) own(graph, `rs-${d - 1}-0`, pu, false);
    }
  }
  return graph;
}

const allEdges = (graph: OwnershipGraph): string[] => {
  const out: string[] = [];
  graph.g.forEachEdge((_e, a, owner, dependent) =>
    out.push(`${owner}>${dependent}>${a.controller}>${a.blockOwnerDeletion}`),
  );
  return out.sort();
};
const edgeKey = (e: JsonEdge): string =>
  `${e.owner}>${e.dependent}>${e.controller}>${e.blockOwnerDeletion}`;

interface Call {
  res: http.ServerResponse;
  promise: Promise<void>;
  settled: boolean;
  /** Bytes handed to res.write. */
  written: number;
  writeReturnedFalse: number;
  maxWritableLength: number;
}

interface Served {
  url: string;
  calls: Call[];
  close(): Promise<void>;
}

async function serve(graph: OwnershipGraph): Promise<Served> {
  const handler = debugGraphHandler(graph);
  const calls: Call[] = [];
  const server = http.createServer((req, res) => {
    const call: Call = {
      res,
      promise: Promise.resolve(),
      settled: false,
      written: 0,
      writeReturnedFalse: 0,
      maxWritableLength: 0,
    };
    const write = res.write.bind(res) as (chunk: string) => boolean;
    res.write = ((chunk: string) => {
      call.written += Buffer.byteLength(chunk);
      const ok = write(chunk);
      if (!ok) call.writeReturnedFalse++;
      call.maxWritableLength = Math.max(call.maxWritableLength, res.writableLength);
      return ok;
    }) as typeof res.write;
    call.promise = handler(req, res).finally(() => {
      call.settled = true;
    });
    calls.push(call);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/debug/graph`,
    calls,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

interface Answer {
  status: number;
  type: string;
  body: string;
}

function get(url: string, method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    http
      .request(url, { agent: false, method }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'] ?? '', body }),
        );
        res.on('error', reject);
      })
      .on('error', reject)
      .end();
  });
}

/** Polls `cond` until it holds; fails after `timeoutMs` with what was awaited. */
async function until(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe('/debug/graph on a small graph', () => {
  const graph = new OwnershipGraph();
  graph.addNode(
    attrs('d', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: 'web',
      beingDeleted: true,
      deletingDependents: true,
    }),
  );
  graph.addNode(attrs('v', { name: 'a "quoted" \\ name', virtual: true }));
  graph.addNode(
    attrs('rs', { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', beingDeleted: true }),
  );
  graph.addNode(attrs('p', { kind: 'Pod', name: 'web-1-x' }));
  graph.addNode(attrs('other'));
  graph.addEdge('d', 'rs', edgeAttributes(true, true));
  graph.addEdge('v', 'rs', edgeAttributes(false, false));
  graph.addEdge('rs', 'p', edgeAttributes(true, false));

  let s: Served;
  beforeAll(async () => {
    s = await serve(graph);
  });
  afterAll(() => s.close());

  const node = (uid: string, apiVersion: string, kind: string, name: string, flags = '') => ({
    uid,
    apiVersion,
    kind,
    namespace: 'ns',
    name,
    virtual: flags.includes('v'),
    beingDeleted: flags.includes('b'),
    deletingDependents: flags.includes('d'),
  });
  const nodes = [
    node('d', 'apps/v1', 'Deployment', 'web', 'bd'),
    node('v', 'v1', 'ConfigMap', 'a "quoted" \\ name', 'v'),
    node('rs', 'apps/v1', 'ReplicaSet', 'web-1', 'b'),
    node('p', 'v1', 'Pod', 'web-1-x'),
  ];
  const edges = [
    { owner: 'd', dependent: 'rs', controller: true, blockOwnerDeletion: true },
    { owner: 'v', dependent: 'rs', controller: false, blockOwnerDeletion: false },
    { owner: 'rs', dependent: 'p', controller: true, blockOwnerDeletion: false },
  ];
  const dotNodes = [
    '  "d" [label="uid=d\nnamespace=ns\nDeployment.apps/v1/web\n(deleting dependents)"];',
    '  "v" [label="uid=v\nnamespace=ns\nConfigMap.v1/a \\"quoted\\" \\\\ name\n(virtual)" style=dashed];',
    '  "rs" [label="uid=rs\nnamespace=ns\nReplicaSet.apps/v1/web-1\n(being deleted)"];',
    '  "p" [label="uid=p\nnamespace=ns\nPod.v1/web-1-x"];',
  ];
  const dotEdges = ['  "rs" -> "d" [style=bold];', '  "rs" -> "v";', '  "p" -> "rs";'];

  test('JSON and DOT: the same text as before, for the whole graph and a neighbourhood', async () => {
    const whole = await get(`${s.url}?format=json`);
    expect(whole.status).toBe(200);
    expect(whole.type).toBe('application/json');
    expect(whole.body).toBe(
      JSON.stringify({ nodes: [...nodes, node('other', 'v1', 'ConfigMap', 'cm-other')], edges }),
    );

    const around = await get(`${s.url}?format=json&uid=rs`);
    const v = JSON.parse(around.body) as JsonView;
    expect(v.nodes.map((n) => n.uid).sort()).toEqual(['d', 'p', 'rs', 'v']);
    expect(v.edges).toEqual(edges);
    expect(v.nodes).toEqual(expect.arrayContaining(nodes));
    expect(v.truncated).toBeUndefined();

    const dot = await get(`${s.url}?uid=rs`);
    expect(dot.status).toBe(200);
    expect(dot.type).toBe('text/vnd.graphviz');
    // Breadth-first: the object, its owners, then its dependents.
    expect(dot.body).toBe(
      `${['digraph full {', dotNodes[2], dotNodes[0], dotNodes[1], dotNodes[3], ...dotEdges, '}'].join('\n')}\n`,
    );
    // The default format is DOT; the whole graph in one page has no continue line.
    const dotWhole = await get(s.url);
    expect(dotWhole.body).toBe(
      `${['digraph full {', ...dotNodes, '  "other" [label="uid=other\nnamespace=ns\nConfigMap.v1/cm-other"];', ...dotEdges, '}'].join('\n')}\n`,
    );
  });

  test('pages of one node: a continue token each, in JSON and DOT, until the last', async () => {
    const uids: string[] = [];
    let token: string | undefined;
    do {
      const a = await get(
        `${s.url}?format=json&limit=1${token ? `&continue=${encodeURIComponent(token)}` : ''}`,
      );
      const v = JSON.parse(a.body) as JsonView;
      expect(v.nodes).toHaveLength(1);
      uids.push(...v.nodes.map((n) => n.uid));
      token = v.continue;
    } while (token);
    expect(uids).toEqual(['d', 'v', 'rs', 'p', 'other']);

    const first = await get(`${s.url}?limit=2`);
    const m = /\n\/\/ continue=(\S+)\n\}\n$/.exec(first.body);
    expect(m).not.toBeNull();
    const second = await get(`${s.url}?limit=2&continue=${m?.[1] ?? ''}`);
    // The page of rs and p carries the edges whose dependent is rs or p.
    expect(second.body).toBe(
      `${['digraph full {', dotNodes[2], dotNodes[3], ...dotEdges, `// continue=${/continue=(\S+)/.exec(second.body)?.[1] ?? ''}`, '}'].join('\n')}\n`,
    );
  });

  test('a neighbourhood larger than limit is cut there and says it was truncated', async () => {
    const v = JSON.parse((await get(`${s.url}?format=json&uid=p&limit=2`)).body) as JsonView;
    expect(v.nodes.map((n) => n.uid)).toEqual(['p', 'rs']);
    expect(v.edges).toEqual([edges[2]]);
    expect(v.truncated).toBe(true);
    const dot = await get(`${s.url}?uid=p&limit=2`);
    expect(dot.body).toMatch(/\n\/\/ truncated: the neighbourhood has more than 2 nodes\n\}\n$/);
  });

  test.each([
    ['limit=0', /limit must be/],
    ['limit=100001', /limit must be/],
    ['limit=ten', /limit must be/],
    ['limit=1.5', /limit must be/],
    ['limit=-3', /limit must be/],
    ['limit=', /limit must be/],
    ['format=svg', /format must be dot or json/],
    ['continue=junk', /invalid continue token/],
    ['continue=%00%01', /invalid continue token/],
    [`continue=${Buffer.from('kubegc-debug-graph/v1:-1').toString('base64url')}`, /invalid/],
    ['uid=rs&continue=abc', /continue applies to the whole graph only/],
  ])('%s: 400 with a message', async (query, message) => {
    const a = await get(`${s.url}?${query}`);
    expect(a.status).toBe(400);
    expect(a.type).toBe('text/plain');
    expect(a.body).toMatch(message);
  });

  test('limit 100000 is allowed; an unknown uid is 404; HEAD has no body', async () => {
    expect((await get(`${s.url}?limit=100000`)).status).toBe(200);
    const a = await get(`${s.url}?uid=nope`);
    expect(a.status).toBe(404);
    expect(a.body).toBe('no object with uid nope in the graph\n');
    const h = await get(`${s.url}?format=json`, 'HEAD');
    expect(h).toEqual({ status: 200, type: 'application/json', body: '' });
  });
});

describe('/debug/graph on 25,000 objects', () => {
  const graph = bigGraph();
  const expectedEdges = allEdges(graph);
  const expectedNodes: string[] = [];
  graph.g.forEachNode((k) => expectedNodes.push(k));
  expectedNodes.sort();

  let s: Served;
  beforeEach(async () => {
    s = await serve(graph);
  });
  afterEach(() => s.close());

  test('paging by 10,000 through continue: every node and every edge exactly once', async () => {
    expect(graph.order).toBe(25_000);
    const nodes: string[] = [];
    const edges: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const a = await get(
        `${s.url}?format=json&limit=10000${token ? `&continue=${encodeURIComponent(token)}` : ''}`,
      );
      expect(a.status).toBe(200);
      const v = JSON.parse(a.body) as JsonView;
      expect(v.nodes.length).toBeLessThanOrEqual(10_000);
      expect(v.truncated).toBeUndefined();
      nodes.push(...v.nodes.map((n) => n.uid));
      edges.push(...v.edges.map(edgeKey));
      // Each edge is on the page of its dependent.
      const here = new Set(v.nodes.map((n) => n.uid));
      expect(v.edges.every((e) => here.has(e.dependent))).toBe(true);
      for (const n of v.nodes.slice(0, 50)) {
        const a2 = graph.get(n.uid);
        expect(n).toEqual({
          uid: a2?.uid,
          apiVersion: a2?.apiVersion,
          kind: a2?.kind,
          namespace: a2?.namespace,
          name: a2?.name,
          virtual: a2?.virtual,
          beingDeleted: a2?.beingDeleted,
          deletingDependents: a2?.deletingDependents,
        });
      }
      token = v.continue;
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(nodes.sort()).toEqual(expectedNodes);
    expect(edges.sort()).toEqual(expectedEdges);
    expect(s.calls.every((c) => c.maxWritableLength < 512 * 1024)).toBe(true);
  });

  test('DOT pages: the same nodes and edges', async () => {
    let labels = 0;
    let arrows = 0;
    let token: string | undefined;
    let pages = 0;
    do {
      const a = await get(`${s.url}?limit=10000${token ? `&continue=${token}` : ''}`);
      expect(a.type).toBe('text/vnd.graphviz');
      expect(a.body.startsWith('digraph full {\n')).toBe(true);
      expect(a.body.endsWith('\n}\n')).toBe(true);
      labels += a.body.match(/^ {2}"[^\n]*" \[label="uid=/gm)?.length ?? 0;
      arrows += a.body.match(/^ {2}"[^\n]*" -> "[^\n]*"( \[style=bold\])?;$/gm)?.length ?? 0;
      token = /^\/\/ continue=(\S+)$/m.exec(a.body)?.[1];
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(labels).toBe(graph.order);
    expect(arrows).toBe(graph.g.size);
  });

  test('a neighbourhood is truncated at limit, nearest objects first', async () => {
    // dep-7 → rs-7-0 → pod-7-0, which rs-6-0 also owns; rs-6-0's owner is dep-6.
    const all = JSON.parse((await get(`${s.url}?format=json&uid=pod-7-0`)).body) as JsonView;
    expect(all.nodes.map((n) => n.uid).sort()).toEqual(
      ['dep-6', 'dep-7', 'pod-7-0', 'rs-6-0', 'rs-7-0'].sort(),
    );
    expect(all.edges.map(edgeKey).sort()).toEqual(
      expectedEdges.filter((e) =>
        /^(rs-7-0>pod-7-0|rs-6-0>pod-7-0|dep-7>rs-7-0|dep-6>rs-6-0)>/.test(e),
      ),
    );
    expect(all.truncated).toBeUndefined();
    const cut = JSON.parse(
      (await get(`${s.url}?format=json&uid=pod-7-0&limit=3`)).body,
    ) as JsonView;
    expect(cut.nodes.map((n) => n.uid).sort()).toEqual(['pod-7-0', 'rs-6-0', 'rs-7-0']);
    expect(cut.edges.map((e) => `${e.owner}>${e.dependent}`).sort()).toEqual([
      'rs-6-0>pod-7-0',
      'rs-7-0>pod-7-0',
    ]);
    expect(cut.truncated).toBe(true);
    // Down from a Deployment: limit 3 of its 5 objects.
    const down = JSON.parse((await get(`${s.url}?format=json&uid=dep-8&limit=3`)).body) as JsonView;
    expect(down.nodes.map((n) => n.uid)).toEqual(['dep-8', 'rs-8-0', 'rs-8-1']);
    expect(down.truncated).toBe(true);
  });

  test('a client that goes away mid-answer stops the handler', async () => {
    // The size of the whole answer, in one page.
    const full = await get(`${s.url}?format=json&limit=100000`);
    const total = Buffer.byteLength(full.body);
    expect(total).toBeGreaterThan(10_000_000);

    let received = 0;
    const req = http.get(`${s.url}?format=json&limit=100000`, { agent: false }, (res) => {
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        req.destroy();
      });
    });
    req.on('error', () => undefined);
    await until('the aborted request to reach the handler', () => s.calls.length === 2);
    const call = s.calls[1] as Call;
    await until('the handler to settle after the client went away', () => call.settled);
    await expect(call.promise).resolves.toBeUndefined();
    expect(received).toBeGreaterThan(0);
    expect(call.written).toBeLessThan(total / 4);
  });

  test('a reader that does not read: the handler waits for drain, then finishes on a changed graph', async () => {
    // A graph of its own: this test changes it.
    const graph = bigGraph();
    await s.close();
    s = await serve(graph);
    let body = '';
    let ended = false;
    let response: http.IncomingMessage | undefined;
    const req = http.get(`${s.url}?format=json&limit=100000`, { agent: false }, (res) => {
      response = res;
      res.pause();
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => (ended = true));
    });
    req.on('error', () => undefined);
    await until('the request to reach the handler', () => s.calls.length === 1);
    const call = s.calls[0] as Call;
    // The kernel's socket buffers take a few MB first; then the handler waits.
    let last = -1;
    let still = 0;
    await until('res.write to ask the handler to wait, and the handler to stop writing', () => {
      if (call.written === last) still++;
      else [last, still] = [call.written, 0];
      return call.writeReturnedFalse > 0 && still >= 20;
    });
    expect(call.settled).toBe(false);

    // Many event-loop turns (the handler writes a chunk per turn when it may):
    // nothing more is written and the response's buffer stays small.
    const written = call.written;
    for (let i = 0; i < 20; i++) {
      await turns(10);
      expect(call.res.writableLength).toBeLessThan(256 * 1024);
    }
    expect(call.written).toBeLessThan(written + 256 * 1024);
    expect(call.settled).toBe(false);

    // The graph changes while the answer waits: nodes go (with their edges), others come.
    const dropped = ['pod-4000-0', 'rs-4500-1', 'pod-4500-1', 'dep-4999'];
    for (const uid of dropped) graph.dropNode(uid);
    graph.addNode(attrs('late-owner'));
    graph.addNode(attrs('late-dependent'));
    own(graph, 'late-owner', 'late-dependent');
    own(graph, 'dep-4998', 'late-dependent', false);
    response?.resume();
    await until('the answer to end', () => ended && call.settled);
    await expect(call.promise).resolves.toBeUndefined();
    expect(Buffer.byteLength(body)).toBe(call.written);
    expect(call.written).toBeGreaterThan(written + 1024 * 1024);
    const v = JSON.parse(body) as JsonView;
    const uids = v.nodes.map((n) => n.uid);
    expect(new Set(uids).size).toBe(uids.length);
    expect(uids).toEqual(expect.arrayContaining(['late-owner', 'late-dependent']));
    expect(uids).not.toContain('dep-4999');
    // Every edge exists in the graph as it is now, and is on its dependent's page.
    const now = new Set(allEdges(graph));
    const here = new Set(uids);
    expect(v.edges.every((e) => now.has(edgeKey(e)) && here.has(e.dependent))).toBe(true);
    expect(v.edges.map(edgeKey)).toEqual(
      expect.arrayContaining([
        'late-owner>late-dependent>true>true',
        'dep-4998>late-dependent>false>false',
      ]),
    );
    expect(call.maxWritableLength).toBeLessThan(512 * 1024);
  });
});

describe('/debug/graph with objects in no ownership relation (outside graphology)', () => {
  const graph = new OwnershipGraph();
  graph.addNode(attrs('o'));
  graph.addNode(attrs('d'));
  graph.addEdge('o', 'd', edgeAttributes(true, true));
  graph.addStandalone('s', new StandaloneObject('v1', 'Secret', 'ns', 'alone', '7'));

  let s: Served;
  beforeAll(async () => {
    s = await serve(graph);
  });
  afterAll(() => s.close());

  const alone = {
    uid: 's',
    apiVersion: 'v1',
    kind: 'Secret',
    namespace: 'ns',
    name: 'alone',
    virtual: false,
    beingDeleted: false,
    deletingDependents: false,
  };

  test('the whole graph lists them after the graphology nodes, with no edges', async () => {
    const v = JSON.parse((await get(`${s.url}?format=json`)).body) as JsonView;
    expect(v.nodes.map((n) => n.uid)).toEqual(['o', 'd', 's']);
    expect(v.nodes[2]).toEqual(alone);
    expect(v.edges).toEqual([
      { owner: 'o', dependent: 'd', controller: true, blockOwnerDeletion: true },
    ]);
    const uids: string[] = [];
    let token: string | undefined;
    do {
      const a = await get(
        `${s.url}?format=json&limit=2${token ? `&continue=${encodeURIComponent(token)}` : ''}`,
      );
      const page = JSON.parse(a.body) as JsonView;
      uids.push(...page.nodes.map((n) => n.uid));
      token = page.continue;
    } while (token);
    expect(uids).toEqual(['o', 'd', 's']);
  });

  test('the neighbourhood of one is that object alone (not a 404)', async () => {
    const a = await get(`${s.url}?format=json&uid=s`);
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body)).toEqual({ nodes: [alone], edges: [] });
    const dot = await get(`${s.url}?uid=s`);
    expect(dot.body).toBe(
      'digraph full {\n  "s" [label="uid=s\nnamespace=ns\nSecret.v1/alone"];\n}\n',
    );
  });
});
