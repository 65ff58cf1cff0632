// /debug/graph: the ownership graph as DOT (like upstream's debug handler:
// edges point from dependent to owner) or JSON, a page of the whole graph or
// one object's neighbourhood (its owners transitively up, its dependents
// transitively down).
//
// The answer is streamed: never built in memory, written in chunks of about
// 64 KiB, waiting for 'drain' when the client reads slowly and yielding to the
// event loop between chunks (and every few thousand nodes of work that writes
// nothing), so the propagator, timers and other requests keep running. A page
// holds at most `limit` nodes (default 10,000, at most 100,000); the only
// memory a request keeps is the list of its page's node keys (references to
// the graph's own strings) or, for a neighbourhood, the set of visited keys.
// It stops at once when the client goes away.
//
// Query:
//   format=dot|json  (default dot)
//   uid=UID          that object's neighbourhood instead of the whole graph;
//                    the traversal stops at `limit` nodes and the answer says
//                    it was truncated (JSON "truncated":true, DOT a comment)
//   limit=N          nodes per answer, 1..100000 (default 10000)
//   continue=TOKEN   whole graph only: the next page, from a previous answer's
//                    "continue" (JSON) or `// continue=TOKEN` line (DOT)
//
// Pages follow OwnershipGraph.uids() (graphology's nodes, then the objects in
// no ownership relation, which have no edges); each carries its nodes and
// the edges whose dependent is one of them, so on a graph that does not change,
// the pages partition its nodes and edges. Pages are a VIEW, NOT A SNAPSHOT:
// the graph keeps changing between pages and while one is streamed; the
// continue token is an offset in iteration order, so objects added, removed
// or changed meanwhile may be missed or repeated, an edge may name a node no
// page carried, and attributes are the ones current when each line is written.
import type http from 'node:http';
import type { NodeAttributes, OwnershipGraph } from '../graph/graph.ts';

/** The JSON view's shape (`format=json`), for its readers. */
export interface DebugGraphJson {
  nodes: {
    uid: string;
    apiVersion: string;
    kind: string;
    namespace: string;
    name: string;
    virtual: boolean;
    beingDeleted: boolean;
    deletingDependents: boolean;
  }[];
  edges: { owner: string; dependent: string; controller: boolean; blockOwnerDeletion: boolean }[];
  /** Whole-graph mode: more nodes remain; pass it back as `continue`. */
  continue?: string;
  /** Neighbourhood mode: cut at `limit`. */
  truncated?: boolean;
}

export const DEFAULT_LIMIT = 10_000;
export const MAX_LIMIT = 100_000;
/** Characters buffered before a chunk goes to `res.write` (node data is ASCII, so ~bytes). */
const CHUNK = 64 * 1024;
/** Nodes skipped, visited or scanned between two yields to the event loop when nothing is written. */
const STEP = 4096;

interface Query {
  format: 'dot' | 'json';
  uid: string | undefined;
  limit: number;
  /** Whole graph: how many nodes (in iteration order) earlier pages covered. */
  offset: number;
}

const TOKEN_PREFIX = 'kubegc-debug-graph/v1:';

function encodeContinue(offset: number): string {
  return Buffer.from(`${TOKEN_PREFIX}${offset}`, 'latin1').toString('base64url');
}

function decodeContinue(token: string): number | undefined {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(token)) return undefined;
  const m = /^kubegc-debug-graph\/v1:(0|[1-9][0-9]{0,14})$/.exec(
    Buffer.from(token, 'base64url').toString('latin1'),
  );
  return m ? Number(m[1]) : undefined;
}

function parseQuery(params: URLSearchParams): Query | { error: string } {
  const format = params.get('format') ?? 'dot';
  if (format !== 'dot' && format !== 'json') return { error: 'format must be dot or json' };
  const uid = params.get('uid') ?? undefined;
  const limitText = params.get('limit');
  let limit = DEFAULT_LIMIT;
  if (limitText !== null) {
    limit = /^[0-9]{1,7}$/.test(limitText) ? Number(limitText) : NaN;
    if (!(limit >= 1 && limit <= MAX_LIMIT))
      return { error: `limit must be a whole number of nodes from 1 to ${MAX_LIMIT}` };
  }
  // An empty continue means the first page, as in Kubernetes list calls.
  const token = params.get('continue') || undefined;
  let offset = 0;
  if (token !== undefined) {
    if (uid !== undefined)
      return { error: 'continue applies to the whole graph only, not to a uid neighbourhood' };
    const o = decodeContinue(token);
    if (o === undefined)
      return { error: 'invalid continue token: pass the one a previous answer gave' };
    offset = o;
  }
  return { format, uid, limit, offset };
}

const quote = (s: string): string => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
const str = JSON.stringify;
const bool = (b: boolean): string => (b ? 'true' : 'false');

function jsonNode(uid: string, a: NodeAttributes): string {
  return `{"uid":${str(uid)},"apiVersion":${str(a.apiVersion)},"kind":${str(a.kind)},"namespace":${str(a.namespace)},"name":${str(a.name)},"virtual":${bool(a.virtual)},"beingDeleted":${bool(a.beingDeleted)},"deletingDependents":${bool(a.deletingDependents)}}`;
}

function dotNode(uid: string, a: NodeAttributes): string {
  const label = `uid=${uid}\nnamespace=${a.namespace}\n${a.kind}.${a.apiVersion}/${a.name}${a.virtual ? '\n(virtual)' : ''}${a.deletingDependents ? '\n(deleting dependents)' : a.beingDeleted ? '\n(being deleted)' : ''}`;
  return `  ${quote(uid)} [label=${quote(label)}${a.virtual ? ' style=dashed' : ''}];\n`;
}

/**
 * Breadth-first from `uid`: its owners transitively up, then its dependents
 * transitively down, at most `limit` nodes (nearest first). Yields '' now and
 * then so the caller can give the event loop a turn.
 */
function* neighbourhood(
  graph: OwnershipGraph,
  uid: string,
  limit: number,
): Generator<string, { include: Set<string>; truncated: boolean }, undefined> {
  const include = new Set<string>([uid]);
  let truncated = false;
  let queue: string[] = [];
  const visit = (next: string): boolean => {
    if (include.has(next)) return false;
    if (include.size >= limit) {
      truncated = true;
      return true; // stops someInNeighbor / someOutNeighbor
    }
    include.add(next);
    queue.push(next);
    return false;
  };
  for (const up of [true, false]) {
    queue = [uid];
    for (let head = 0; head < queue.length && !truncated; head++) {
      if (head % STEP === STEP - 1) yield '';
      const u = queue[head] as string;
      // A node removed while we yielded has no neighbours any more.
      if (up) graph.someOwner(u, visit);
      else graph.someDependent(u, visit);
    }
  }
  return { include, truncated };
}

/**
 * The answer, in chunks of about CHUNK characters; '' marks a point where the
 * caller should yield to the event loop although there is nothing to write.
 * Lazy: every step runs when the caller asks for the next chunk, so it reads
 * the graph as it is then.
 */
function* render(graph: OwnershipGraph, q: Query): Generator<string, void, undefined> {
  const json = q.format === 'json';
  let buf = json ? '{"nodes":[' : 'digraph full {\n';
  let sep = '';
  /** The page's nodes, in order: the second pass writes the edges whose dependent they are. */
  let page: Iterable<string>;
  /** Neighbourhood mode: only edges whose owner is in it too. */
  let include: Set<string> | undefined;
  let tail = '';

  if (q.uid === undefined) {
    const it = graph.uids();
    let done = false;
    // Skip the earlier pages by iterating (no array of the graph's keys).
    for (let i = 0; i < q.offset; i++) {
      if (it.next().done) {
        done = true;
        break;
      }
      if (i % STEP === STEP - 1) yield '';
    }
    const keys: string[] = [];
    let taken = 0;
    while (!done) {
      const step = it.next();
      if (step.done) break;
      if (taken === q.limit) {
        // Something follows this page.
        const token = encodeContinue(q.offset + taken);
        tail = json ? `,"continue":${str(token)}` : `// continue=${token}\n`;
        break;
      }
      taken++;
      const uid = step.value;
      // Map iterators survive mutation; the entry is current when next()
      // returns it, but re-read so a node dropped and re-added is never stale.
      const a = graph.get(uid);
      if (!a) continue;
      keys.push(uid);
      buf += json ? sep + jsonNode(uid, a) : dotNode(uid, a);
      sep = ',';
      if (buf.length >= CHUNK) {
        yield buf;
        buf = '';
      } else if (taken % STEP === 0) yield '';
    }
    page = keys;
  } else {
    const n = yield* neighbourhood(graph, q.uid, q.limit);
    include = n.include;
    page = n.include;
    if (n.truncated)
      tail = json
        ? ',"truncated":true'
        : `// truncated: the neighbourhood has more than ${q.limit} nodes\n`;
    let count = 0;
    for (const uid of include) {
      const a = graph.get(uid);
      if (a) {
        buf += json ? sep + jsonNode(uid, a) : dotNode(uid, a);
        sep = ',';
      }
      if (buf.length >= CHUNK) {
        yield buf;
        buf = '';
      } else if (++count % STEP === 0) yield '';
    }
  }

  if (json) buf += '],"edges":[';
  sep = '';
  let count = 0;
  for (const dependent of page) {
    // In-edges: a node has few owners (its ownerReferences), however many dependents.
    graph.forEachOwnerEdge(dependent, (owner, e) => {
      if (include && !include.has(owner)) return;
      buf += json
        ? `${sep}{"owner":${str(owner)},"dependent":${str(dependent)},"controller":${bool(e.controller)},"blockOwnerDeletion":${bool(e.blockOwnerDeletion)}}`
        : `  ${quote(dependent)} -> ${quote(owner)}${e.blockOwnerDeletion ? ' [style=bold]' : ''};\n`;
      sep = ',';
    });
    if (buf.length >= CHUNK) {
      yield buf;
      buf = '';
    } else if (++count % STEP === 0) yield '';
  }
  yield json ? `${buf}]${tail}}` : `${buf}${tail}}\n`;
}

const TEXT = { 'content-type': 'text/plain' };

/**
 * GET /debug/graph, called by the server after authentication and
 * authorization. Resolves when the answer is complete or the client went
 * away; rejects only on a bug (the server then answers 500 or drops the
 * connection).
 */
export function debugGraphHandler(
  graph: OwnershipGraph,
): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> {
  return async (req, res) => {
    const q = parseQuery(new URL(req.url ?? '/', 'http://localhost').searchParams);
    if ('error' in q) {
      res.writeHead(400, TEXT).end(`${q.error}\n`);
      return;
    }
    if (q.uid !== undefined && !graph.has(q.uid)) {
      res.writeHead(404, TEXT).end(`no object with uid ${q.uid} in the graph\n`);
      return;
    }
    res.writeHead(200, {
      'content-type': q.format === 'json' ? 'application/json' : 'text/vnd.graphviz',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }

    let closed = false;
    const onClose = (): void => {
      closed = true;
    };
    res.once('close', onClose);
    const gone = (): boolean => closed || res.destroyed || req.socket.destroyed;
    try {
      // for-of: leaving the loop early (return) closes the generator, so no more work is done.
      for (const chunk of render(graph, q)) {
        if (gone()) return;
        if (chunk !== '' && !res.write(chunk)) {
          if (gone()) return;
          await drainOrClose(res);
          if (gone()) return;
        }
        await new Promise<void>((r) => setImmediate(r));
      }
      if (!gone()) res.end();
    } finally {
      res.off('close', onClose);
    }
  };
}

function drainOrClose(res: http.ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
