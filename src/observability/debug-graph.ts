// /debug/graph: the ownership graph as DOT (like upstream's debug handler:
// edges point from dependent to owner) or JSON, whole or one object's
// neighbourhood (its owners transitively up, its dependents transitively down).
import type { OwnershipGraph } from '../graph/graph.ts';
import type { Route } from './server.ts';

export interface GraphView {
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
}

function neighbourhood(graph: OwnershipGraph, uid: string): Set<string> {
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

export function graphView(graph: OwnershipGraph, uid?: string): GraphView | undefined {
  if (uid !== undefined && !graph.has(uid)) return undefined;
  const include = uid === undefined ? undefined : neighbourhood(graph, uid);
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

const quote = (s: string): string => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

export function toDot(view: GraphView): string {
  const lines = ['digraph full {'];
  for (const n of view.nodes) {
    const label = `uid=${n.uid}\nnamespace=${n.namespace}\n${n.kind}.${n.apiVersion}/${n.name}${n.virtual ? '\n(virtual)' : ''}${n.deletingDependents ? '\n(deleting dependents)' : n.beingDeleted ? '\n(being deleted)' : ''}`;
    lines.push(`  ${quote(n.uid)} [label=${quote(label)}${n.virtual ? ' style=dashed' : ''}];`);
  }
  for (const e of view.edges) {
    lines.push(
      `  ${quote(e.dependent)} -> ${quote(e.owner)}${e.blockOwnerDeletion ? ' [style=bold]' : ''};`,
    );
  }
  lines.push('}');
  return `${lines.join('\n')}\n`;
}

export function debugGraphRoute(graph: OwnershipGraph): Route {
  return (url) => {
    const format = url.searchParams.get('format') ?? 'dot';
    const uid = url.searchParams.get('uid') ?? undefined;
    if (format !== 'dot' && format !== 'json') {
      return { status: 400, contentType: 'text/plain', body: 'format must be dot or json\n' };
    }
    const view = graphView(graph, uid);
    if (!view)
      return {
        status: 404,
        contentType: 'text/plain',
        body: `no object with uid ${uid ?? ''} in the graph\n`,
      };
    return format === 'json'
      ? { status: 200, contentType: 'application/json', body: JSON.stringify(view) }
      : { status: 200, contentType: 'text/vnd.graphviz', body: toDot(view) };
  };
}
