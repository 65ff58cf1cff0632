// `kubegc doctor` on a fake API server: the scan's listing (pagination, 410
// Expired, refused resources), and every finding the analysis draws from it.
import fs from 'node:fs/promises';
import { jest } from '@jest/globals';
import os from 'node:os';
import path from 'node:path';
import { ApiError } from '../api/errors.ts';
import { type RequestOptions } from '../api/request.ts';
import { collectionPath, type ResourceInfo } from '../api/resources.ts';
import { doctorCommand } from '../cli/doctor.ts';
import { UsageError } from '../cli/flags.ts';
import {
  FINDING_KINDS,
  RULES,
  analyze,
  exitCode,
  type BlockingCycle,
  type CrossNamespaceReference,
  type Finding,
  type LeakedDependent,
  type Report,
  type StuckDeletion,
  type TerminatingNamespace,
  type UnresolvableOwnerKind,
} from './analyze.ts';
import { buildIndex } from './index.ts';
import { renderText } from './render.ts';
import type { ItemMeta } from './snapshot.ts';
import { ScanError, scan, type ScanOptions } from './scan.ts';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const ago = (seconds: number): string =>
  new Date(NOW - seconds * 1000).toISOString().replace('.000Z', 'Z');
const HOLD = 'kubegc.test/hold';

const VERBS = ['list', 'watch', 'delete', 'get'];
function res(
  group: string,
  version: string,
  resource: string,
  kind: string,
  namespaced: boolean,
): ResourceInfo {
  return { group, version, resource, kind, namespaced, verbs: VERBS };
}
const R = {
  namespaces: res('', 'v1', 'namespaces', 'Namespace', false),
  configmaps: res('', 'v1', 'configmaps', 'ConfigMap', true),
  pods: res('', 'v1', 'pods', 'Pod', true),
  events: res('', 'v1', 'events', 'Event', true),
  deployments: res('apps', 'v1', 'deployments', 'Deployment', true),
  clusterroles: res('rbac.authorization.k8s.io', 'v1', 'clusterroles', 'ClusterRole', false),
  apiservices: res('apiregistration.k8s.io', 'v1', 'apiservices', 'APIService', false),
  widgets: res('example.com', 'v1', 'widgets', 'Widget', true),
};

interface FakeObject {
  metadata: ItemMeta & { name: string; uid: string; creationTimestamp: string };
  spec?: unknown;
  status?: unknown;
}

interface Made {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  namespace?: string;
}

let uidCounter = 0;

/** An API server in memory: aggregated discovery and paginated LISTs, with faults to order. */
class FakeApi {
  readonly resources: ResourceInfo[] = Object.values(R);
  readonly objects = new Map<ResourceInfo, FakeObject[]>();
  readonly requests: { method: string; path: string; query?: RequestOptions['query'] }[] = [];
  /** Resource path → HTTP status to answer every LIST of it with. */
  readonly refuse = new Map<string, number>();
  /** Resource path → how many continue-token pages answer 410 before one succeeds. */
  readonly expire = new Map<string, number>();
  failedGroups: string[] = [];
  discoveryDown = false;

  add(
    r: ResourceInfo,
    name: string,
    o: {
      namespace?: string;
      uid?: string;
      createdAgo?: number;
      deletingAgo?: number;
      finalizers?: string[];
      owners?: { owner: Made; block?: boolean; controller?: boolean }[];
      spec?: unknown;
      status?: unknown;
    } = {},
  ): Made {
    const uid = o.uid ?? `uid-${name}-${++uidCounter}`;
    const meta: FakeObject['metadata'] = {
      name,
      uid,
      creationTimestamp: ago(o.createdAgo ?? 86_400),
    };
    if (r.namespaced) meta.namespace = o.namespace ?? 'default';
    if (o.deletingAgo !== undefined) meta.deletionTimestamp = ago(o.deletingAgo);
    if (o.finalizers) meta.finalizers = o.finalizers;
    if (o.owners)
      meta.ownerReferences = o.owners.map((x) => ({
        apiVersion: x.owner.apiVersion,
        kind: x.owner.kind,
        name: x.owner.name,
        uid: x.owner.uid,
        ...(x.controller ? { controller: true } : {}),
        ...(x.block ? { blockOwnerDeletion: true } : {}),
      }));
    const list = this.objects.get(r) ?? [];
    list.push({ metadata: meta, spec: o.spec, status: o.status });
    this.objects.set(r, list);
    return {
      apiVersion: r.group ? `${r.group}/${r.version}` : r.version,
      kind: r.kind,
      name,
      uid,
      namespace: meta.namespace,
    };
  }

  /** Adds an owner reference after the fact (cycles need both ends to exist). */
  own(dependent: Made, owner: Made, block = true): void {
    for (const list of this.objects.values())
      for (const o of list)
        if (o.metadata.uid === dependent.uid)
          (o.metadata.ownerReferences ??= []).push({
            apiVersion: owner.apiVersion,
            kind: owner.kind,
            name: owner.name,
            uid: owner.uid,
            blockOwnerDeletion: block,
          });
  }

  namespace(name: string, o: Parameters<FakeApi['add']>[2] = {}): Made {
    return this.add(R.namespaces, name, { spec: { finalizers: ['kubernetes'] }, ...o });
  }

  private discovery(core: boolean): unknown {
    const groups = new Map<string, ResourceInfo[]>();
    for (const r of this.resources) {
      if ((r.group === '') !== core) continue;
      groups.set(r.group, [...(groups.get(r.group) ?? []), r]);
    }
    return {
      kind: 'APIGroupDiscoveryList',
      items: [...groups].map(([group, rs]) => ({
        metadata: { name: group },
        versions: [
          {
            version: rs[0]?.version,
            ...(this.failedGroups.includes(group) ? { freshness: 'Stale' } : {}),
            resources: rs.map((r) => ({
              resource: r.resource,
              responseKind: { group, version: r.version, kind: r.kind },
              scope: r.namespaced ? 'Namespaced' : 'Cluster',
              verbs: r.verbs,
            })),
          },
        ],
      })),
    };
  }

  async request<T>(method: string, p: string, o: RequestOptions = {}): Promise<T> {
    this.requests.push({ method, path: p, query: o.query });
    if (p === '/api' || p === '/apis') {
      if (this.discoveryDown)
        throw new ApiError(method, p, 0, 'connect ECONNREFUSED 127.0.0.1:6443');
      return this.discovery(p === '/api') as T;
    }
    for (const r of this.resources) {
      const all = collectionPath(r);
      const nsMatch = r.namespaced
        ? new RegExp(`^${collectionPath(r, 'NS').replace('NS', '([^/]+)')}$`).exec(p)
        : null;
      if (p !== all && !nsMatch) continue;
      const refused = this.refuse.get(all);
      if (refused)
        throw new ApiError(
          method,
          p,
          refused,
          JSON.stringify({ reason: 'Forbidden', message: `${r.resource} is forbidden` }),
        );
      const cont = o.query?.continue as string | undefined;
      const pending = this.expire.get(all) ?? 0;
      if (cont && pending > 0) {
        this.expire.set(all, pending - 1);
        throw new ApiError(method, p, 410, JSON.stringify({ reason: 'Expired' }));
      }
      const items = (this.objects.get(r) ?? []).filter(
        (x) => !nsMatch || x.metadata.namespace === decodeURIComponent(nsMatch[1] as string),
      );
      const limit = Number(o.query?.limit ?? items.length);
      const start = cont ? Number(cont) : 0;
      const page = items.slice(start, start + limit);
      const next = start + limit < items.length ? String(start + limit) : undefined;
      return { metadata: next ? { continue: next } : {}, items: page } as T;
    }
    throw new ApiError(method, p, 404, JSON.stringify({ reason: 'NotFound' }));
  }
}

/**
 * Every report these tests make, as JSON and as text, against the golden
 * files in testdata/golden/ (one per report): the analysis may be
 * restructured, its output stays byte for byte what it was (docs/doctor.md's
 * schema). UPDATE_GOLDEN=1 rewrites them, for a change meant to alter the output.
 */
const GOLDEN_DIR = path.join(import.meta.dirname, 'testdata', 'golden');
const reportsInTest = new Map<string, number>();
async function golden(r: Report): Promise<void> {
  const test = expect.getState().currentTestName ?? 'outside a test';
  const n = (reportsInTest.get(test) ?? 0) + 1;
  reportsInTest.set(test, n);
  const slug = test
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 100);
  const file = path.join(GOLDEN_DIR, `${slug}-${n}.txt`);
  const text = `${JSON.stringify(r, null, 2)}\n\n${renderText(r)}\n`;
  if (process.env.UPDATE_GOLDEN === '1') {
    await fs.mkdir(GOLDEN_DIR, { recursive: true });
    await fs.writeFile(file, text);
  } else expect(text).toBe(await fs.readFile(file, 'utf8'));
}

async function run(
  api: FakeApi,
  o: ScanOptions & { olderThanSeconds?: number } = {},
): Promise<Report> {
  const s = await scan(api, { now: () => NOW, ...o });
  const r = analyze(s, { now: NOW, olderThanSeconds: o.olderThanSeconds });
  await golden(r);
  return r;
}

function only<K extends Finding['kind']>(r: Report, kind: K): Extract<Finding, { kind: K }>[] {
  return r.findings.filter((f) => f.kind === kind) as Extract<Finding, { kind: K }>[];
}

function named(r: Report, name: string): Finding[] {
  return r.findings.filter((f) => f.object.name === name);
}

let api: FakeApi;
beforeEach(() => {
  api = new FakeApi();
  api.namespace('default');
});

describe('stuck in deletion', () => {
  test('the chain of blocking dependents down to the one held by a foreign finalizer', async () => {
    const owner = api.add(R.configmaps, 'owner', {
      deletingAgo: 3600,
      finalizers: ['foregroundDeletion'],
    });
    const mid = api.add(R.configmaps, 'mid', {
      deletingAgo: 3500,
      finalizers: ['foregroundDeletion'],
      owners: [{ owner, block: true }],
    });
    api.add(R.configmaps, 'holder', {
      deletingAgo: 3400,
      finalizers: [HOLD],
      owners: [{ owner: mid, block: true }],
    });
    // A non-blocking dependent does not hold anybody.
    api.add(R.configmaps, 'bystander', { finalizers: ['x.io/y'], owners: [{ owner }] });
    const r = await run(api);
    const f = named(r, 'owner')[0] as StuckDeletion;
    expect(f).toMatchObject({
      kind: 'stuck-deletion',
      object: { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: 'owner' },
      since: ago(3600),
      ageSeconds: 3600,
      sinceBasis: 'deletionTimestamp',
      reason: 'waiting-for-dependents',
      gcFinalizers: ['foregroundDeletion'],
      foreignFinalizers: [],
      blockingDependents: 1,
      dependents: 2,
      blockersTotal: 1,
    });
    expect(f.chain.map((x) => x.name)).toEqual(['owner', 'mid', 'holder']);
    expect(f.heldBy).toMatchObject({
      object: { name: 'holder' },
      finalizers: [HOLD],
      deleting: true,
      deletingSince: ago(3400),
    });
    expect(f.blockers[0]?.state).toBe('foreign-finalizer');
    expect(f.detail).toContain(`held by finalizer ${HOLD}`);
    // The holder itself: held by its own finalizer, for as long as it has been deleting.
    expect(named(r, 'holder')[0]).toMatchObject({
      kind: 'stuck-deletion',
      reason: 'foreign-finalizers',
      ageSeconds: 3400,
      heldBy: { object: { name: 'holder' }, finalizers: [HOLD] },
      chain: [{ name: 'holder' }],
    });
    // Oldest first.
    expect(only(r, 'stuck-deletion').map((x) => x.object.name)).toEqual(['owner', 'mid', 'holder']);
    expect(exitCode(r)).toBe(1);
  });

  test('a blocking dependent nobody deleted yet, and one with foregroundDeletion and nothing left below it', async () => {
    const a = api.add(R.configmaps, 'a', { deletingAgo: 60, finalizers: ['foregroundDeletion'] });
    api.add(R.configmaps, 'not-yet', { finalizers: [HOLD], owners: [{ owner: a, block: true }] });
    api.add(R.configmaps, 'b', { deletingAgo: 60, finalizers: ['foregroundDeletion'] });
    const r = await run(api);
    const fa = named(r, 'a')[0] as StuckDeletion;
    expect(fa.blockers[0]).toMatchObject({
      state: 'not-deleted',
      heldBy: { object: { name: 'not-yet' }, finalizers: [HOLD], deleting: false },
    });
    expect(named(r, 'b')[0]).toMatchObject({
      reason: 'foreground-no-blockers',
      blockers: [],
      heldBy: null,
    });
  });

  test('a cycle of blocking references among objects in foreground deletion is noted', async () => {
    const x = api.add(R.configmaps, 'x', { deletingAgo: 100, finalizers: ['foregroundDeletion'] });
    const y = api.add(R.configmaps, 'y', {
      deletingAgo: 90,
      finalizers: ['foregroundDeletion'],
      owners: [{ owner: x, block: true }],
    });
    api.own(x, y);
    const r = await run(api);
    const fx = named(r, 'x').find((f) => f.kind === 'stuck-deletion') as StuckDeletion;
    expect(fx.blockers[0]?.state).toBe('cycle');
    expect(fx.chain.map((o) => o.name)).toEqual(['x', 'y', 'x']);
    expect(fx.detail).toContain('a cycle of blocking references');
    expect(only(r, 'blocking-cycle')).toHaveLength(1);
  });

  test('orphan and graceful deletions, and many blockers capped with their total', async () => {
    const o = api.add(R.configmaps, 'orphaning', { deletingAgo: 10, finalizers: ['orphan'] });
    api.add(R.configmaps, 'kept', { owners: [{ owner: o }] });
    api.add(R.pods, 'terminating-pod', { deletingAgo: 5 });
    const held = api.add(R.configmaps, 'held-parent', { deletingAgo: 5, finalizers: [HOLD] });
    api.add(R.configmaps, 'child', { owners: [{ owner: held }] });
    const big = api.add(R.deployments, 'big', {
      deletingAgo: 20,
      finalizers: ['foregroundDeletion'],
    });
    for (let i = 0; i < 30; i++)
      api.add(R.pods, `p${String(i).padStart(2, '0')}`, {
        deletingAgo: 15,
        finalizers: i === 7 ? [HOLD] : undefined,
        owners: [{ owner: big, block: true }],
      });
    const r = await run(api);
    expect(named(r, 'orphaning')[0]).toMatchObject({ reason: 'orphaning', dependents: 1 });
    expect(named(r, 'terminating-pod')[0]).toMatchObject({ reason: 'graceful' });
    expect(named(r, 'held-parent')[0]).toMatchObject({
      reason: 'foreign-finalizers',
      dependents: 1,
      blockingDependents: 0,
    });
    const fb = named(r, 'big')[0] as StuckDeletion;
    expect(fb.blockingDependents).toBe(30);
    expect(fb.blockersTotal).toBe(30);
    expect(fb.blockers).toHaveLength(20);
    // The one held by a foreign finalizer comes first.
    expect(fb.heldBy?.object.name).toBe('p07');
  });
});

describe('terminating namespaces', () => {
  test('conditions that are True, what is left in it, and the unavailable APIServices', async () => {
    api.namespace('gone', {
      deletingAgo: 600,
      status: {
        phase: 'Terminating',
        conditions: [
          {
            type: 'NamespaceDeletionDiscoveryFailure',
            status: 'True',
            reason: 'DiscoveryFailed',
            message: 'Discovery failed for some groups, 1 failing: doctor.kubegc.test/v1alpha1',
          },
          {
            type: 'NamespaceDeletionContentFailure',
            status: 'False',
            reason: 'ContentDeleted',
            message: 'All content successfully deleted',
          },
          {
            type: 'NamespaceFinalizersRemaining',
            status: 'True',
            reason: 'SomeFinalizersRemain',
            message: `Some content in the namespace has finalizers remaining: ${HOLD} in 1 resource instances`,
          },
        ],
      },
    });
    api.add(R.configmaps, 'held', {
      namespace: 'gone',
      deletingAgo: 590,
      finalizers: [HOLD],
    });
    api.add(R.configmaps, 'plain', { namespace: 'gone' });
    api.add(R.apiservices, 'v1alpha1.doctor.kubegc.test', {
      spec: {
        group: 'doctor.kubegc.test',
        version: 'v1alpha1',
        service: { namespace: 'x', name: 'absent' },
      },
      status: {
        conditions: [
          {
            type: 'Available',
            status: 'False',
            reason: 'ServiceNotFound',
            message: 'service/absent in "x" is not present',
          },
        ],
      },
    });
    api.add(R.apiservices, 'v1.apps', {
      spec: { group: 'apps', version: 'v1' },
      status: { conditions: [{ type: 'Available', status: 'True' }] },
    });
    const r = await run(api);
    const f = only(r, 'terminating-namespace')[0] as TerminatingNamespace;
    expect(f).toMatchObject({
      object: { apiVersion: 'v1', kind: 'Namespace', name: 'gone' },
      since: ago(600),
      sinceBasis: 'deletionTimestamp',
      reason: 'NamespaceDeletionDiscoveryFailure',
      phase: 'Terminating',
      specFinalizers: ['kubernetes'],
      remainingTotal: 2,
      unavailableAPIServices: [
        {
          name: 'v1alpha1.doctor.kubegc.test',
          service: 'x/absent',
          reason: 'ServiceNotFound',
          message: 'service/absent in "x" is not present',
        },
      ],
    });
    expect(f.conditions.map((c) => c.type)).toEqual([
      'NamespaceDeletionDiscoveryFailure',
      'NamespaceFinalizersRemaining',
    ]);
    expect(f.remaining).toEqual([
      {
        resource: 'configmaps',
        apiVersion: 'v1',
        kind: 'ConfigMap',
        count: 2,
        deleting: 1,
        finalizers: { [HOLD]: 1 },
        examples: ['held', 'plain'],
      },
    ]);
    expect(f.detail).toContain('Discovery failed for some groups');
    expect(f.detail).toContain('v1alpha1.doctor.kubegc.test');
    // The namespace is not also a stuck-deletion; the object in it is.
    expect(only(r, 'stuck-deletion').map((x) => x.object.name)).toEqual(['held']);
    expect(r.unavailableAPIServices?.map((a) => a.name)).toEqual(['v1alpha1.doctor.kubegc.test']);
  });
});

describe('owners', () => {
  test('a dependent whose owners are all gone is leaked; one with a surviving owner is not', async () => {
    const alive = api.add(R.configmaps, 'alive');
    const ghost = { apiVersion: 'v1', kind: 'ConfigMap', name: 'ghost', uid: 'uid-gone' };
    api.add(R.configmaps, 'leak', {
      createdAgo: 7200,
      owners: [{ owner: ghost, controller: true }],
    });
    api.add(R.configmaps, 'half', { owners: [{ owner: ghost }, { owner: alive }] });
    api.add(R.configmaps, 'fine', { owners: [{ owner: alive }] });
    const r = await run(api);
    const leaks = only(r, 'leaked-dependent');
    expect(leaks).toHaveLength(1);
    expect(leaks[0]).toMatchObject({
      object: { kind: 'ConfigMap', namespace: 'default', name: 'leak' },
      since: ago(7200),
      ageSeconds: 7200,
      sinceBasis: 'creationTimestamp',
      reason: 'owners-gone',
      owners: [{ name: 'ghost', uid: 'uid-gone', state: 'absent', controller: true }],
    });
    expect(r.findings).toHaveLength(1);
  });

  test('an owner whose name exists with another UID is gone; a UID under another name is gone too', async () => {
    api.add(R.configmaps, 'reborn', { uid: 'uid-new' });
    api.add(R.configmaps, 'dep', {
      owners: [{ owner: { apiVersion: 'v1', kind: 'ConfigMap', name: 'reborn', uid: 'uid-old' } }],
    });
    const other = api.add(R.configmaps, 'other');
    api.add(R.configmaps, 'dep2', {
      owners: [{ owner: { ...other, name: 'not-its-name' } }],
    });
    // The same UID as a Deployment, named as a ConfigMap: the kind does not match.
    api.add(R.configmaps, 'dep3', {
      owners: [{ owner: { ...other, apiVersion: 'apps/v1', kind: 'Deployment' } }],
    });
    const r = await run(api);
    const byName = new Map(only(r, 'leaked-dependent').map((f) => [f.object.name, f]));
    expect(byName.get('dep')?.owners[0]).toMatchObject({ state: 'replaced', name: 'reborn' });
    expect(byName.get('dep')?.owners[0]?.detail).toContain('uid-new');
    expect(byName.get('dep2')?.owners[0]?.state).toBe('absent');
    expect(byName.get('dep3')?.owners[0]?.state).toBe('absent');
  });

  test('a cluster-scoped owner is found cluster-wide, and judged gone when it is', async () => {
    const role = api.add(R.clusterroles, 'admin-ish');
    api.add(R.configmaps, 'under-role', { namespace: 'default', owners: [{ owner: role }] });
    api.add(R.clusterroles, 'orphan-role', {
      owners: [{ owner: { ...role, name: 'gone-role', uid: 'uid-gone-role' } }],
    });
    const r = await run(api);
    expect(r.findings.map((f) => [f.kind, f.object.name])).toEqual([
      ['leaked-dependent', 'orphan-role'],
    ]);
  });

  test('an owner in a resource that was not listed (403) is never concluded absent', async () => {
    api.refuse.set(collectionPath(R.widgets), 403);
    const w = { apiVersion: 'example.com/v1', kind: 'Widget', name: 'w', uid: 'uid-w' };
    api.add(R.configmaps, 'owned-by-widget', { owners: [{ owner: w }] });
    const r = await run(api);
    expect(r.findings).toEqual([]);
    expect(r.notScanned).toEqual([
      {
        resource: 'widgets.example.com',
        error: expect.stringContaining('403') as unknown as string,
      },
    ]);
    expect(exitCode(r)).toBe(0);
    expect(renderText(r)).toContain('Not scanned (1)');
  });

  test('owner kinds of a group whose discovery failed, or of an unavailable APIService, are no conclusion', async () => {
    api.failedGroups = ['example.com'];
    api.add(R.configmaps, 'a', {
      owners: [{ owner: { apiVersion: 'example.com/v1', kind: 'Widget', name: 'w', uid: 'u1' } }],
    });
    api.add(R.apiservices, 'v1.broken.io', {
      spec: { group: 'broken.io', version: 'v1', service: { namespace: 'x', name: 'y' } },
      status: {
        conditions: [{ type: 'Available', status: 'False', reason: 'FailedDiscoveryCheck' }],
      },
    });
    api.add(R.configmaps, 'b', {
      owners: [{ owner: { apiVersion: 'broken.io/v1', kind: 'Thing', name: 't', uid: 'u2' } }],
    });
    const r = await run(api);
    expect(r.findings).toEqual([]);
    expect(r.notScanned.map((n) => n.resource)).toEqual(['*.example.com']);
  });

  test('a kind no API serves is its own finding, not a leak', async () => {
    api.add(R.configmaps, 'nothing-owned', {
      owners: [
        { owner: { apiVersion: 'nothing.kubegc.test/v1', kind: 'Nothing', name: 'n', uid: 'u' } },
      ],
    });
    const r = await run(api);
    expect(r.findings).toHaveLength(1);
    const f = r.findings[0] as UnresolvableOwnerKind;
    expect(f).toMatchObject({
      kind: 'unresolvable-owner-kind',
      object: { name: 'nothing-owned' },
      owners: [{ apiVersion: 'nothing.kubegc.test/v1', kind: 'Nothing', state: 'unresolvable' }],
    });
    expect(f.detail).toContain('no API serves Nothing in nothing.kubegc.test/v1');
  });

  test('cross-namespace references: an owner from another namespace, a namespaced owner of a cluster-scoped object', async () => {
    api.namespace('a');
    api.namespace('b');
    const inB = api.add(R.configmaps, 'owner-in-b', { namespace: 'b' });
    api.add(R.configmaps, 'dep-in-a', { namespace: 'a', owners: [{ owner: inB }] });
    api.add(R.clusterroles, 'role-owned-by-cm', { owners: [{ owner: inB }] });
    const r = await run(api);
    const cross = only(r, 'cross-namespace-reference');
    expect(cross.map((f) => [f.object.name, f.reason])).toEqual([
      ['role-owned-by-cm', 'namespaced-owner-of-cluster-scoped'],
      ['dep-in-a', 'other-namespace'],
    ]);
    expect((cross[1] as CrossNamespaceReference).owners[0]).toMatchObject({
      state: 'other-namespace',
      foundInNamespace: 'b',
    });
    // Found (elsewhere), so not reported as leaked too.
    expect(only(r, 'leaked-dependent')).toEqual([]);
  });

  test('a dependent created after the scan began is not judged (its owner may postdate its list)', async () => {
    const ghost = { apiVersion: 'v1', kind: 'ConfigMap', name: 'ghost', uid: 'uid-gone' };
    api.add(R.configmaps, 'newborn', { createdAgo: -5, owners: [{ owner: ghost }] });
    expect((await run(api)).findings).toEqual([]);
  });
});

describe('blocking cycles', () => {
  test('a ← b ← c ← a, every reference blocking; a non-blocking edge breaks the cycle', async () => {
    const a = api.add(R.configmaps, 'a', { createdAgo: 300 });
    const b = api.add(R.configmaps, 'b', { createdAgo: 200, owners: [{ owner: a, block: true }] });
    const c = api.add(R.configmaps, 'c', { createdAgo: 100, owners: [{ owner: b, block: true }] });
    api.own(a, c);
    const p = api.add(R.configmaps, 'p');
    const q = api.add(R.configmaps, 'q', { owners: [{ owner: p, block: true }] });
    api.own(p, q, false);
    const self = api.add(R.configmaps, 'self');
    api.own(self, self);
    const r = await run(api);
    const cycles = only(r, 'blocking-cycle');
    expect(cycles.map((f) => f.chain.map((x) => x.name))).toEqual([
      // Oldest first: self has existed for a day, the youngest of a, b, c for 100 s.
      ['self'],
      ['a', 'c', 'b'],
    ]);
    expect(cycles[1]).toMatchObject({
      object: { name: 'a' },
      members: 3,
      since: ago(100),
      sinceBasis: 'creationTimestamp',
    });
    expect((cycles[1] as BlockingCycle).detail).toContain(
      'ConfigMap default/a → ConfigMap default/c → ConfigMap default/b → ConfigMap default/a',
    );
  });
});

describe('--older-than and the namespace scope', () => {
  test('only what has been stuck or leaking at least that long', async () => {
    api.add(R.configmaps, 'old', { deletingAgo: 7200, finalizers: [HOLD] });
    api.add(R.configmaps, 'young', { deletingAgo: 300, finalizers: [HOLD] });
    const ghost = { apiVersion: 'v1', kind: 'ConfigMap', name: 'ghost', uid: 'uid-gone' };
    // Created long ago, deleted recently: stuck for 5 minutes, not for its age.
    api.add(R.configmaps, 'old-but-recently-deleted', {
      createdAgo: 90_000,
      deletingAgo: 300,
      finalizers: [HOLD],
    });
    api.add(R.configmaps, 'old-leak', { createdAgo: 90_000, owners: [{ owner: ghost }] });
    api.add(R.configmaps, 'young-leak', { createdAgo: 60, owners: [{ owner: ghost }] });
    const r = await run(api, { olderThanSeconds: 3600 });
    expect(r.findings.map((f) => f.object.name)).toEqual(['old', 'old-leak']);
    expect(r.summary.hiddenByOlderThan).toBe(3);
    expect(r.scope.olderThanSeconds).toBe(3600);
  });

  test('-n lists namespaced resources in that namespace only and reports only what is in it', async () => {
    api.namespace('shop');
    const role = api.add(R.clusterroles, 'r');
    api.add(R.configmaps, 'in-shop', {
      namespace: 'shop',
      deletingAgo: 10,
      finalizers: [HOLD],
      owners: [{ owner: role }],
    });
    api.add(R.configmaps, 'elsewhere', {
      namespace: 'default',
      deletingAgo: 10,
      finalizers: [HOLD],
    });
    const r = await run(api, { namespace: 'shop' });
    expect(r.findings.map((f) => f.object.name)).toEqual(['in-shop']);
    const lists = api.requests.filter((q) => q.path.includes('configmaps')).map((q) => q.path);
    expect(new Set(lists)).toEqual(new Set(['/api/v1/namespaces/shop/configmaps']));
    expect(
      api.requests.some((q) => q.path === '/apis/rbac.authorization.k8s.io/v1/clusterroles'),
    ).toBe(true);
    expect(r.scope.namespace).toBe('shop');
  });
});

describe('the scan', () => {
  test('pages of 500 with continue; a 410 Expired continue restarts that list without duplicates', async () => {
    for (let i = 0; i < 1234; i++) api.add(R.configmaps, `cm-${i}`);
    api.expire.set(collectionPath(R.configmaps), 1);
    const s = await scan(api, { now: () => NOW });
    let configmaps = 0;
    for (let i = 0; i < s.objects.length; i++)
      if (s.objects.name[i]?.startsWith('cm-')) configmaps++;
    expect(configmaps).toBe(1234);
    const pages = api.requests.filter((q) => q.path === '/api/v1/configmaps');
    // 2 pages, the 410, then 3 pages again.
    expect(pages.map((q) => q.query?.continue ?? '')).toEqual(['', '500', '', '500', '1000']);
    expect(pages.every((q) => q.query?.limit === 500)).toBe(true);
    expect(s.notScanned).toEqual([]);
  });

  test('a list that keeps expiring is not scanned, never half-counted', async () => {
    for (let i = 0; i < 1200; i++) api.add(R.configmaps, `cm-${i}`);
    api.expire.set(collectionPath(R.configmaps), 100);
    const s = await scan(api, { now: () => NOW, maxRestarts: 2 });
    expect(s.notScanned).toEqual([
      {
        resource: 'configmaps',
        error: expect.stringContaining('410 Expired') as unknown as string,
      },
    ]);
    expect(s.objects.name.some((n) => n.startsWith('cm-'))).toBe(false);
  });

  test('reads only (GET), never lists events, reads namespaces and APIServices in full', async () => {
    api.add(R.events, 'e1');
    await run(api);
    expect(new Set(api.requests.map((q) => q.method))).toEqual(new Set(['GET']));
    expect(api.requests.some((q) => q.path.includes('events'))).toBe(false);
    expect(api.requests.some((q) => q.path === '/api/v1/namespaces')).toBe(true);
    expect(api.requests.some((q) => q.path === '/apis/apiregistration.k8s.io/v1/apiservices')).toBe(
      true,
    );
  });

  test('finalizer lists are interned: one array for every object that has the same', async () => {
    api.add(R.configmaps, 'f1', { finalizers: [HOLD] });
    api.add(R.configmaps, 'f2', { finalizers: [HOLD] });
    const s = await scan(api, { now: () => NOW });
    const sets = [...s.objects.finalizers.values()];
    expect(sets).toHaveLength(2);
    expect(sets[0]).toBe(sets[1]);
  });

  test('an unreachable API server or a failed core discovery is a ScanError', async () => {
    api.discoveryDown = true;
    await expect(scan(api)).rejects.toThrow(ScanError);
    await expect(scan(api)).rejects.toThrow(/cannot reach the API server: .*ECONNREFUSED/);
    api.discoveryDown = false;
    api.failedGroups = [''];
    await expect(scan(api)).rejects.toThrow(/discovery failed for the core group/);
  });
});

/** One finding of every kind. */
function oneOfEachKind(api: FakeApi): void {
  const owner = api.add(R.configmaps, 'owner', {
    deletingAgo: 50,
    finalizers: ['foregroundDeletion'],
  });
  api.add(R.configmaps, 'holder', {
    deletingAgo: 40,
    finalizers: [HOLD],
    owners: [{ owner, block: true }],
  });
  api.namespace('gone', { deletingAgo: 30, status: { phase: 'Terminating' } });
  const ghost = { apiVersion: 'v1', kind: 'ConfigMap', name: 'ghost', uid: 'uid-gone' };
  api.add(R.configmaps, 'leak', { owners: [{ owner: ghost }] });
  api.namespace('other');
  const elsewhere = api.add(R.configmaps, 'elsewhere', { namespace: 'other' });
  api.add(R.configmaps, 'cross', { owners: [{ owner: elsewhere }] });
  api.add(R.configmaps, 'nothing', {
    owners: [{ owner: { apiVersion: 'no.pe/v1', kind: 'Nope', name: 'n', uid: 'u' } }],
  });
  const a = api.add(R.configmaps, 'cyc-a');
  const b = api.add(R.configmaps, 'cyc-b', { owners: [{ owner: a, block: true }] });
  api.own(a, b);
}

describe('the report', () => {
  const KEYS = ['kind', 'object', 'since', 'ageSeconds', 'sinceBasis', 'reason', 'detail'];
  test('JSON schema: the keys of the report and of every finding kind are stable', async () => {
    oneOfEachKind(api);
    const r = JSON.parse(JSON.stringify(await run(api))) as Record<string, unknown> & Report;
    expect(Object.keys(r)).toEqual([
      'schemaVersion',
      'scannedAt',
      'durationSeconds',
      'scope',
      'findings',
      'notScanned',
      'unavailableAPIServices',
      'summary',
    ]);
    expect(r.schemaVersion).toBe(1);
    expect(r.scannedAt).toBe(new Date(NOW).toISOString());
    expect(Object.keys(r.summary)).toEqual([
      'findings',
      'byKind',
      'hiddenByOlderThan',
      'notScanned',
      'objects',
      'resources',
    ]);
    expect(r.summary.byKind).toEqual({
      'stuck-deletion': 2,
      'terminating-namespace': 1,
      'leaked-dependent': 1,
      'cross-namespace-reference': 1,
      'unresolvable-owner-kind': 1,
      'blocking-cycle': 1,
    });
    const keysOf = (kind: string): string[][] =>
      r.findings.filter((f) => f.kind === kind).map((f) => Object.keys(f).sort());
    const extra: Record<string, string[]> = {
      'stuck-deletion': [
        'finalizers',
        'gcFinalizers',
        'foreignFinalizers',
        'blockingDependents',
        'dependents',
        'blockers',
        'blockersTotal',
        'chain',
        'heldBy',
      ],
      'terminating-namespace': [
        'phase',
        'finalizers',
        'specFinalizers',
        'conditions',
        'remaining',
        'remainingTotal',
        'unavailableAPIServices',
      ],
      'leaked-dependent': ['owners'],
      'cross-namespace-reference': ['owners'],
      'unresolvable-owner-kind': ['owners'],
      'blocking-cycle': ['chain', 'members'],
    };
    for (const [kind, keys] of Object.entries(extra)) {
      const found = keysOf(kind);
      expect(found.length).toBeGreaterThan(0);
      for (const k of found) expect(k).toEqual([...KEYS, ...keys].sort());
    }
    const stuck = r.findings.find((f) => f.object.name === 'owner') as StuckDeletion;
    expect(Object.keys(stuck.object)).toEqual(['apiVersion', 'kind', 'namespace', 'name', 'uid']);
    expect(Object.keys(stuck.blockers[0] ?? {}).sort()).toEqual(['chain', 'heldBy', 'state']);
    expect(Object.keys(stuck.heldBy ?? {}).sort()).toEqual([
      'deleting',
      'deletingSince',
      'finalizers',
      'object',
    ]);
    const leak = r.findings.find((f) => f.kind === 'leaked-dependent') as LeakedDependent;
    expect(Object.keys(leak.owners[0] ?? {}).sort()).toEqual([
      'apiVersion',
      'blockOwnerDeletion',
      'controller',
      'detail',
      'kind',
      'name',
      'state',
      'uid',
    ]);
    // Grouped by kind in a fixed order, oldest first within a kind.
    const order = r.findings.map((f) => f.kind);
    expect(order).toEqual([...order].sort((x, y) => KIND_ORDER.indexOf(x) - KIND_ORDER.indexOf(y)));
    const text = renderText(r);
    for (const t of [
      'Stuck in deletion (2)',
      'Namespaces stuck in Terminating (1)',
      'Leaked dependents',
      'Invalid cross-namespace owner references (1)',
      'Owner references to kinds no API serves (1)',
      'Cycles of blocking owner references (1)',
      `held by finalizer ${HOLD}`,
      '7 findings',
    ])
      expect(text).toContain(t);
  });

  test('exit status: 0 nothing found, 1 findings', async () => {
    const clean = await run(api);
    expect(exitCode(clean)).toBe(0);
    expect(renderText(clean)).toMatch(/^No findings \(cluster-wide; /);
    api.add(R.configmaps, 'stuck', { deletingAgo: 1, finalizers: [HOLD] });
    expect(exitCode(await run(api))).toBe(1);
  });
});

describe('each rule alone', () => {
  test('over the index, each rule makes the findings of its kind and no other, as analyze reports them', async () => {
    oneOfEachKind(api);
    const snapshot = await scan(api, { now: () => NOW });
    const report = analyze(snapshot, { now: NOW });
    for (const kind of FINDING_KINDS) {
      const alone = RULES[kind](buildIndex(snapshot, NOW));
      expect(alone.length).toBeGreaterThan(0);
      expect(alone.every((f) => f.kind === kind)).toBe(true);
      expect(JSON.stringify(alone)).toBe(
        JSON.stringify(report.findings.filter((f) => f.kind === kind)),
      );
    }
  });
});

const KIND_ORDER = [
  'stuck-deletion',
  'terminating-namespace',
  'leaked-dependent',
  'cross-namespace-reference',
  'unresolvable-owner-kind',
  'blocking-cycle',
];

describe('kubegc doctor command', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kubegc-doctor-'));
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  test('usage errors throw UsageError (exit 2 in main)', async () => {
    await expect(doctorCommand(['extra'])).rejects.toThrow(UsageError);
    await expect(doctorCommand(['--older-than', 'soon'])).rejects.toThrow(/invalid duration/);
    await expect(doctorCommand(['-o', 'yaml'])).rejects.toThrow(/must be text or json/);
    await expect(doctorCommand(['-n', 'Not_A_Namespace'])).rejects.toThrow(/not a valid namespace/);
    await expect(doctorCommand(['--kubeconfig', path.join(dir, 'none')])).rejects.toThrow(
      UsageError,
    );
  });

  test('an API server that cannot be reached: exit status 3', async () => {
    const kubeconfig = path.join(dir, 'kubeconfig');
    await fs.writeFile(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    const errors: string[] = [];
    const spy = jest.spyOn(console, 'error').mockImplementation((m: string) => void errors.push(m));
    try {
      expect(await doctorCommand(['--kubeconfig', kubeconfig])).toBe(3);
    } finally {
      spy.mockRestore();
    }
    expect(errors.join('\n')).toMatch(/the scan could not complete: cannot reach the API server/);
  });
});
