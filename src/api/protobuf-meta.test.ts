import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  FrameReader,
  MAX_FRAME_BYTES,
  PROTOBUF_METADATA_ACCEPT,
  PROTOBUF_METADATA_LIST_ACCEPT,
  ProtobufDecodeError,
  decodePartialObjectMetadataList,
  decodeStatus,
  decodeWatchFrame,
  isProtobufContentType,
  type MetadataList,
  type StatusSummary,
  type WatchFrame,
} from './protobuf-meta.ts';
import {
  Bytes,
  EGROUP,
  I32,
  I64,
  LEN,
  Rng,
  SGROUP,
  VARINT,
  YEAR_0,
  YEAR_9999_END,
  ZERO_TIME,
  emptyMeta,
  encodeList,
  encodePartial,
  encodeStatus,
  envelope,
  frames,
  join,
  listJson,
  metaJson,
  msg,
  objectMetaFields,
  randomMeta,
  realisticMeta,
  str,
  tagged,
  vint,
  watchEvent,
  type EncodeStyle,
  type ListModel,
  type MetaModel,
  type StatusModel,
} from './protobuf-meta.testing.ts';
import { trimMeta, type ObjectMeta, type RawMeta } from './resources.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'testdata', 'protobuf');

// ---------------------------------------------------------------------------
// What the JSON path yields: the oracle every decode is held to

/** What the informer's JSON path gets from a list body: trimMeta of each item, the list's metadata. */
function listFromJson(text: string): MetadataList {
  const page = JSON.parse(text) as {
    metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
    items?: { metadata?: RawMeta }[];
  };
  const trimmed = (page.items ?? []).map((i) => trimMeta(i.metadata));
  const out: MetadataList = {
    items: trimmed.filter((m): m is ObjectMeta => m !== undefined),
    resourceVersion: page.metadata?.resourceVersion ?? '',
  };
  if (page.metadata?.continue) out.continue = page.metadata.continue;
  if (page.metadata?.remainingItemCount !== undefined)
    out.remainingItemCount = page.metadata.remainingItemCount;
  // What a reader that concludes from absence must know: items left out.
  if (out.items.length < trimmed.length) out.dropped = trimmed.length - out.items.length;
  return out;
}

/** What the informer's JSON path reads from one watch line. */
function frameFromJson(line: string): WatchFrame {
  const ev = JSON.parse(line) as {
    type: string;
    object?: {
      metadata?: RawMeta & { annotations?: Record<string, string> };
      code?: number;
      reason?: string;
      message?: string;
    };
  };
  const obj = ev.object;
  switch (ev.type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED': {
      const meta = trimMeta(obj?.metadata);
      return meta ? { type: ev.type, meta } : { type: ev.type };
    }
    case 'BOOKMARK': {
      const out: WatchFrame = {
        type: ev.type,
        initialEventsEnd: obj?.metadata?.annotations?.['k8s.io/initial-events-end'] === 'true',
      };
      if (obj?.metadata?.resourceVersion) out.resourceVersion = obj.metadata.resourceVersion;
      return out;
    }
    case 'ERROR':
      return { type: ev.type, status: statusFromJson(obj ?? {}) };
    default:
      return { type: ev.type };
  }
}

function statusFromJson(s: { code?: number; reason?: string; message?: string }): StatusSummary {
  const out: StatusSummary = {};
  if (s.code) out.code = s.code;
  if (s.reason) out.reason = s.reason;
  if (s.message) out.message = s.message;
  return out;
}

const roundTrip = (v: unknown): string => JSON.stringify(v);

function expectDecodeError(f: () => unknown, pattern?: RegExp): ProtobufDecodeError {
  let caught: unknown;
  try {
    f();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ProtobufDecodeError);
  if (pattern) expect((caught as Error).message).toMatch(pattern);
  return caught as ProtobufDecodeError;
}

const meta = (over: Partial<MetaModel>): MetaModel =>
  emptyMeta({ name: 'n', uid: 'u-1', resourceVersion: '7', ...over });
const list = (items: MetaModel[], over: Partial<ListModel> = {}): ListModel => ({
  resourceVersion: '42',
  items,
  ...over,
});
const one = (m: MetaModel, style?: EncodeStyle): ObjectMeta | undefined =>
  decodePartialObjectMetadataList(encodeList(list([m]), style)).items[0];
const addedFrame = (m: MetaModel): Uint8Array => watchEvent('ADDED', encodePartial(m));

// ---------------------------------------------------------------------------
// A second, deliberately plain decoder (BigInt varints, a generic field list,
// recursion): fuzzed inputs must decode to the same thing, or fail in both.

class RefError extends Error {}

interface RefField {
  n: number;
  w: number;
  v: bigint;
  b: Uint8Array;
}

function refVarint(b: Uint8Array, pos: number): [bigint, number] {
  let v = 0n;
  for (let i = 0; i < 10; i++) {
    if (pos >= b.length) throw new RefError('truncated varint');
    const x = b[pos++] ?? 0;
    v |= BigInt(x & 0x7f) << BigInt(7 * i);
    if (x < 0x80) return [BigInt.asUintN(64, v), pos];
  }
  throw new RefError('long varint');
}

function refTag(b: Uint8Array, pos: number): [number, number, number] {
  const [t, p] = refVarint(b, pos);
  if (t > 0xffffffffn || t >> 3n === 0n) throw new RefError('bad tag');
  return [Number(t >> 3n), Number(t & 7n), p];
}

function refSkipValue(b: Uint8Array, w: number, pos: number): number {
  switch (w) {
    case VARINT:
      return refVarint(b, pos)[1];
    case I64:
    case I32: {
      const n = w === I64 ? 8 : 4;
      if (pos + n > b.length) throw new RefError('truncated fixed');
      return pos + n;
    }
    case LEN: {
      const [l, p] = refVarint(b, pos);
      if (l > BigInt(b.length - p)) throw new RefError('length');
      return p + Number(l);
    }
    default:
      throw new RefError('wire type');
  }
}

function refFields(b: Uint8Array): RefField[] {
  const out: RefField[] = [];
  let pos = 0;
  while (pos < b.length) {
    const [n, w, p] = refTag(b, pos);
    pos = p;
    if (w === SGROUP) {
      let depth = 1;
      while (depth > 0) {
        if (pos >= b.length) throw new RefError('group');
        const [, w2, p2] = refTag(b, pos);
        pos = p2;
        if (w2 === SGROUP) depth++;
        else if (w2 === EGROUP) depth--;
        else pos = refSkipValue(b, w2, pos);
      }
      out.push({ n, w, v: 0n, b: new Uint8Array() });
      continue;
    }
    const start = pos;
    pos = refSkipValue(b, w, pos);
    if (w === VARINT) out.push({ n, w, v: refVarint(b, start)[0], b: new Uint8Array() });
    else if (w === LEN) {
      const [, p3] = refVarint(b, start);
      out.push({ n, w, v: 0n, b: b.subarray(p3, pos) });
    } else out.push({ n, w, v: 0n, b: b.subarray(start, pos) });
  }
  return out;
}

const refText = new TextDecoder();
function refWire(f: RefField, w: number): RefField {
  if (f.w !== w) throw new RefError('wrong wire type');
  return f;
}
const refStr = (f: RefField): string => refText.decode(refWire(f, LEN).b);

/** Civil date from days since 1970 (H. Hinnant's algorithm), on BigInt: independent of Date. */
function refRfc3339(seconds: bigint): string {
  const fl = (a: bigint, b: bigint) => (a >= 0n ? a / b : -((-a + b - 1n) / b));
  const days = fl(seconds, 86400n);
  const sod = seconds - days * 86400n;
  const z = days + 719468n;
  const era = fl(z, 146097n);
  const doe = z - era * 146097n;
  const yoe = (doe - doe / 1460n + doe / 36524n - doe / 146096n) / 365n;
  const doy = doe - (365n * yoe + yoe / 4n - yoe / 100n);
  const mp = (5n * doy + 2n) / 153n;
  const d = doy - (153n * mp + 2n) / 5n + 1n;
  const m = mp < 10n ? mp + 3n : mp - 9n;
  const y = yoe + era * 400n + (m <= 2n ? 1n : 0n);
  const p2 = (x: bigint) => String(x).padStart(2, '0');
  const year = (y < 0n ? '-' : '') + String(y < 0n ? -y : y).padStart(4, '0');
  return `${year}-${p2(m)}-${p2(d)}T${p2(sod / 3600n)}:${p2((sod / 60n) % 60n)}:${p2(sod % 60n)}Z`;
}

function refTime(b: Uint8Array): string | undefined {
  let seconds = 0n;
  for (const f of refFields(b)) {
    if (f.n === 1) seconds = BigInt.asIntN(64, refWire(f, VARINT).v);
    else if (f.n === 2) refWire(f, VARINT);
    if (f.n === 1 && !Number.isSafeInteger(Number(seconds))) throw new RefError('seconds');
  }
  if (b.length === 0 || seconds === BigInt(ZERO_TIME)) return undefined;
  if (seconds > 8640000000000n || seconds < -8640000000000n) throw new RefError('range');
  return refRfc3339(seconds);
}

const REF_META_WIRE: Record<number, number> = {
  1: LEN,
  2: LEN,
  3: LEN,
  4: LEN,
  5: LEN,
  6: LEN,
  7: VARINT,
  8: LEN,
  9: LEN,
  10: VARINT,
  11: LEN,
  12: LEN,
  13: LEN,
  14: LEN,
  17: LEN,
};

interface RefAcc {
  name: string;
  uid: string;
  namespace: string;
  rv: string;
  deletion?: string;
  finalizers: string[];
  owners: ObjectMeta['ownerReferences'] & object;
  end: boolean;
}

function refMeta(b: Uint8Array, acc: RefAcc, bookmark: boolean): void {
  for (const f of refFields(b)) {
    const want = REF_META_WIRE[f.n];
    if (want === undefined) continue;
    refWire(f, want);
    if (f.n === 1) acc.name = refStr(f);
    else if (f.n === 3) acc.namespace = refStr(f);
    else if (f.n === 5) acc.uid = refStr(f);
    else if (f.n === 6) acc.rv = refStr(f);
    else if (f.n === 9) acc.deletion = refTime(f.b);
    else if (f.n === 14) acc.finalizers.push(refStr(f));
    else if (f.n === 13) {
      const o: Record<string, string | boolean> = { apiVersion: '', kind: '', name: '', uid: '' };
      const bools: Record<string, boolean> = {};
      for (const g of refFields(f.b)) {
        const key = { 1: 'kind', 3: 'name', 4: 'uid', 5: 'apiVersion' }[g.n];
        if (key) o[key] = refStr(g);
        else if (g.n === 6 || g.n === 7)
          bools[g.n === 6 ? 'controller' : 'blockOwnerDeletion'] = refWire(g, VARINT).v !== 0n;
      }
      if (bools.controller !== undefined) o.controller = bools.controller;
      if (bools.blockOwnerDeletion !== undefined) o.blockOwnerDeletion = bools.blockOwnerDeletion;
      acc.owners.push(o as unknown as NonNullable<ObjectMeta['ownerReferences']>[number]);
    } else if (f.n === 12 && bookmark) {
      let k = '';
      let v = '';
      for (const g of refFields(f.b)) {
        if (g.n === 1) k = refStr(g);
        else if (g.n === 2) v = refStr(g);
      }
      if (k === 'k8s.io/initial-events-end') acc.end = v === 'true';
    }
  }
}

function refPartial(b: Uint8Array, bookmark: boolean): RefAcc {
  const acc: RefAcc = {
    name: '',
    uid: '',
    namespace: '',
    rv: '',
    finalizers: [],
    owners: [],
    end: false,
  };
  for (const f of refFields(b)) if (f.n === 1) refMeta(refWire(f, LEN).b, acc, bookmark);
  return acc;
}

function refFinish(a: RefAcc): ObjectMeta | undefined {
  if (!a.uid || !a.name) return undefined;
  const o: ObjectMeta = { uid: a.uid, name: a.name };
  if (a.namespace) o.namespace = a.namespace;
  if (a.rv) o.resourceVersion = a.rv;
  if (a.deletion) o.deletionTimestamp = a.deletion;
  if (a.finalizers.length) o.finalizers = a.finalizers;
  if (a.owners.length) o.ownerReferences = a.owners;
  return o;
}

function refEnvelope(b: Uint8Array): { apiVersion: string; kind: string; raw: Uint8Array } {
  if (b.length < 4 || b[0] !== 0x6b || b[1] !== 0x38 || b[2] !== 0x73 || b[3] !== 0)
    throw new RefError('magic');
  if (b.length === 4) throw new RefError('empty');
  const e = {
    apiVersion: '',
    kind: '',
    raw: undefined as Uint8Array | undefined,
    enc: '',
    type: '',
  };
  for (const f of refFields(b.subarray(4))) {
    if (f.n < 1 || f.n > 4) continue;
    refWire(f, LEN);
    if (f.n === 1)
      for (const g of refFields(f.b)) {
        if (g.n === 1) e.apiVersion = refStr(g);
        else if (g.n === 2) e.kind = refStr(g);
      }
    else if (f.n === 2) e.raw = f.b;
    else if (f.n === 3) e.enc = refStr(f);
    else e.type = refStr(f);
  }
  if (!e.raw) throw new RefError('no raw');
  if (e.enc) throw new RefError('encoding');
  if (e.type && e.type !== 'application/vnd.kubernetes.protobuf') throw new RefError('type');
  return { apiVersion: e.apiVersion, kind: e.kind, raw: e.raw };
}

function refList(b: Uint8Array): MetadataList {
  const e = refEnvelope(b);
  if (e.apiVersion !== 'meta.k8s.io/v1' || e.kind !== 'PartialObjectMetadataList')
    throw new RefError('kind');
  const out: MetadataList = { items: [], resourceVersion: '' };
  let cont = '';
  let remaining: number | undefined;
  let dropped = 0;
  for (const f of refFields(e.raw)) {
    if (f.n === 1)
      for (const g of refFields(refWire(f, LEN).b)) {
        if (g.n >= 1 && g.n <= 3) {
          const s = refStr(g);
          if (g.n === 2) out.resourceVersion = s;
          if (g.n === 3) cont = s;
        } else if (g.n === 4) {
          remaining = Number(BigInt.asIntN(64, refWire(g, VARINT).v));
          if (!Number.isSafeInteger(remaining)) throw new RefError('remaining');
        }
      }
    else if (f.n === 2) {
      const m = refFinish(refPartial(refWire(f, LEN).b, false));
      if (m) out.items.push(m);
      else dropped++;
    }
  }
  if (cont) out.continue = cont;
  if (remaining !== undefined) out.remainingItemCount = remaining;
  if (dropped > 0) out.dropped = dropped;
  return out;
}

function refStatus(raw: Uint8Array): StatusSummary {
  let code = 0;
  let reason = '';
  let message = '';
  for (const f of refFields(raw)) {
    if (f.n >= 1 && f.n <= 5) {
      const s = refStr(f);
      if (f.n === 3) message = s;
      if (f.n === 4) reason = s;
    } else if (f.n === 6) code = Number(BigInt.asIntN(32, refWire(f, VARINT).v));
  }
  return statusFromJson({ code, reason, message });
}

function refWatch(b: Uint8Array): WatchFrame {
  let type = '';
  let raw: Uint8Array | undefined;
  for (const f of refFields(b)) {
    if (f.n === 1) type = refStr(f);
    else if (f.n === 2)
      for (const g of refFields(refWire(f, LEN).b)) if (g.n === 1) raw = refWire(g, LEN).b;
  }
  if (!['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR'].includes(type)) return { type };
  if (!raw) throw new RefError('no object');
  const e = refEnvelope(raw);
  if (type === 'ERROR') {
    if (e.kind !== 'Status' || !['v1', 'meta.k8s.io/v1'].includes(e.apiVersion))
      throw new RefError('kind');
    return { type, status: refStatus(e.raw) };
  }
  if (e.apiVersion !== 'meta.k8s.io/v1' || e.kind !== 'PartialObjectMetadata')
    throw new RefError('kind');
  const acc = refPartial(e.raw, type === 'BOOKMARK');
  if (type === 'BOOKMARK') {
    const out: WatchFrame = { type, initialEventsEnd: acc.end };
    if (acc.rv) out.resourceVersion = acc.rv;
    return out;
  }
  const m = refFinish(acc);
  return m ? { type, meta: m } : { type };
}

/** The decoder and the reference agree: same value, or both refuse. Anything but ProtobufDecodeError fails. */
function agree<T>(
  bytes: Uint8Array,
  mine: (b: Uint8Array) => T,
  ref: (b: Uint8Array) => T,
): 'ok' | 'error' {
  let want: { ok: T } | undefined;
  try {
    want = { ok: ref(bytes) };
  } catch (err) {
    if (!(err instanceof RefError)) throw err;
  }
  let got: { ok: T } | undefined;
  try {
    got = { ok: mine(bytes) };
  } catch (err) {
    if (!(err instanceof ProtobufDecodeError)) throw err;
  }
  expect(got).toEqual(want);
  return got ? 'ok' : 'error';
}

// ---------------------------------------------------------------------------

describe('decodePartialObjectMetadataList', () => {
  const full = meta({
    name: 'child',
    generateName: 'child-',
    namespace: 'ns',
    selfLink: '/api/v1/namespaces/ns/configmaps/child',
    generation: 3,
    creationTimestamp: 1780000000,
    deletionTimestamp: 1780000123,
    deletionGracePeriodSeconds: 0,
    labels: [['app', 'x']],
    annotations: [['a', 'b'.repeat(500)]],
    ownerReferences: [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        name: 'owner',
        uid: 'o-1',
        controller: true,
        blockOwnerDeletion: true,
      },
      { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'o-2' },
    ],
    finalizers: ['example.com/hold', 'foregroundDeletion'],
    managedFields: [
      {
        manager: 'kubectl',
        operation: 'Update',
        apiVersion: 'v1',
        time: 1780000000,
        fieldsType: 'FieldsV1',
        fieldsV1: '{"f:metadata":{"f:labels":{}}}',
      },
    ],
  });

  it('keeps what trimMeta keeps, and nothing else', () => {
    expect(one(full)).toEqual({
      uid: 'u-1',
      name: 'child',
      namespace: 'ns',
      resourceVersion: '7',
      deletionTimestamp: '2026-05-28T20:28:43Z',
      finalizers: ['example.com/hold', 'foregroundDeletion'],
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          name: 'owner',
          uid: 'o-1',
          controller: true,
          blockOwnerDeletion: true,
        },
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'o-2' },
      ],
    });
    expect(one(full)).toEqual(trimMeta(JSON.parse(roundTrip(metaJson(full))) as RawMeta));
  });

  it('reads the list metadata, with JSON omitempty presence', () => {
    const l = decodePartialObjectMetadataList(
      encodeList(list([full], { resourceVersion: '99', continue: 'tok', remainingItemCount: 0 })),
    );
    expect(l).toEqual({
      items: [one(full)],
      resourceVersion: '99',
      continue: 'tok',
      remainingItemCount: 0,
    });
    const bare = decodePartialObjectMetadataList(encodeList(list([], { resourceVersion: '' })));
    expect(bare).toEqual({ items: [], resourceVersion: '' });
    expect('continue' in bare || 'remainingItemCount' in bare).toBe(false);
    const minimal = decodePartialObjectMetadataList(encodeList(list([]), { minimal: true }));
    expect(minimal).toEqual({ items: [], resourceVersion: '42' });
  });

  it('gives booleans of owner references only when sent, false included', () => {
    const refs = one(
      meta({
        ownerReferences: [
          { apiVersion: 'v1', kind: 'K', name: 'a', uid: '1', controller: false },
          { apiVersion: 'v1', kind: 'K', name: 'b', uid: '2', blockOwnerDeletion: false },
          { apiVersion: '', kind: '', name: '', uid: '' },
        ],
      }),
      { minimal: true },
    )?.ownerReferences;
    expect(refs).toEqual([
      { apiVersion: 'v1', kind: 'K', name: 'a', uid: '1', controller: false },
      { apiVersion: 'v1', kind: 'K', name: 'b', uid: '2', blockOwnerDeletion: false },
      { apiVersion: '', kind: '', name: '', uid: '' },
    ]);
    expect(Object.keys(refs?.[0] ?? {})).not.toContain('blockOwnerDeletion');
    expect(Object.keys(refs?.[1] ?? {})).not.toContain('controller');
  });

  it('drops items trimMeta drops (no uid, no name) and leaves empty fields out', () => {
    const l = decodePartialObjectMetadataList(
      encodeList(
        list([
          meta({ uid: '' }),
          meta({ name: '' }),
          meta({ resourceVersion: '', finalizers: [''] }),
        ]),
      ),
    );
    expect(l.items).toEqual([{ uid: 'u-1', name: 'n', finalizers: [''] }]);
  });

  it('formats deletionTimestamp as metav1.Time does in JSON', () => {
    const at = (deletionTimestamp: MetaModel['deletionTimestamp'], deletionNanos?: number) =>
      one(meta({ deletionTimestamp, ...(deletionNanos === undefined ? {} : { deletionNanos }) }))
        ?.deletionTimestamp;
    expect(at(1780000123, 999_999_999)).toBe('2026-05-28T20:28:43Z'); // nanos dropped, not rounded
    expect(at(0)).toBe('1970-01-01T00:00:00Z');
    expect(at(-1)).toBe('1969-12-31T23:59:59Z');
    expect(at('zero')).toBeUndefined(); // a pointer to the zero time: JSON null
    expect(at(ZERO_TIME)).toBeUndefined();
    expect(at(ZERO_TIME + 1)).toBe('0001-01-01T00:00:01Z');
    expect(at(YEAR_0)).toBe('0000-01-01T00:00:00Z');
    expect(at(YEAR_0 - 1)).toBe('-0001-12-31T23:59:59Z'); // Go's appendInt, not toISOString's -000001
    expect(at(YEAR_9999_END)).toBe('9999-12-31T23:59:59Z');
    expect(at(YEAR_9999_END + 1)).toBe('10000-01-01T00:00:00Z');
    expect(at(undefined)).toBeUndefined();
    // A Timestamp with nanos only: seconds 0.
    const m = join([str(1, 'n'), str(5, 'u'), msg(9, [vint(2, 5)])]);
    const l = envelope(
      'meta.k8s.io/v1',
      'PartialObjectMetadataList',
      join([msg(2, [tagged(1, LEN, m)])]),
    );
    expect(decodePartialObjectMetadataList(l).items[0]?.deletionTimestamp).toBe(
      '1970-01-01T00:00:00Z',
    );
  });

  it('refuses timestamps no Date holds', () => {
    expectDecodeError(() => one(meta({ deletionTimestamp: 9e12 })), /out of the supported range/);
    expectDecodeError(() => one(meta({ deletionTimestamp: -9e12 })), /out of the supported range/);
    const huge = join([str(1, 'n'), str(5, 'u'), msg(9, [vint(1, 1n << 60n)])]);
    const l = envelope(
      'meta.k8s.io/v1',
      'PartialObjectMetadataList',
      join([msg(2, [tagged(1, LEN, huge)])]),
    );
    expectDecodeError(() => decodePartialObjectMetadataList(l), /seconds out of range/);
  });

  it('merges a message sent in parts, the last scalar winning, as gogo does', () => {
    const a = join([str(1, 'old'), str(5, 'u'), str(14, 'f1'), msg(9, [vint(1, 100)])]);
    const b = join([str(1, 'new'), str(14, 'f2'), msg(9, [vint(2, 3)]), str(3, 'ns')]);
    const raw = join([
      msg(2, [tagged(1, LEN, a), tagged(1, LEN, b)]),
      msg(1, [str(2, '1')]),
      msg(1, [str(3, 'c')]),
    ]);
    const l = decodePartialObjectMetadataList(
      envelope('meta.k8s.io/v1', 'PartialObjectMetadataList', raw),
    );
    // The second deletionTimestamp replaces the first whole (metav1.Time.Unmarshal): seconds 0.
    expect(l).toEqual({
      items: [
        {
          uid: 'u',
          name: 'new',
          namespace: 'ns',
          deletionTimestamp: '1970-01-01T00:00:00Z',
          finalizers: ['f1', 'f2'],
        },
      ],
      resourceVersion: '1',
      continue: 'c',
    });
  });

  it('skips unknown fields of every wire type, groups included', () => {
    const m = join([
      tagged(99, SGROUP),
      vint(1, 5),
      tagged(2, SGROUP),
      tagged(2, EGROUP),
      tagged(99, EGROUP),
      tagged(18, I64, new Uint8Array(8)),
      tagged(16, I32, new Uint8Array(4)),
      vint(15, -1n),
      str(1, 'n'),
      str(5, 'u'),
      tagged(536870911, LEN, new Uint8Array([0xff, 0xff])),
    ]);
    const l = envelope(
      'meta.k8s.io/v1',
      'PartialObjectMetadataList',
      join([msg(2, [tagged(1, LEN, m)])]),
    );
    expect(decodePartialObjectMetadataList(l).items).toEqual([{ uid: 'u', name: 'n' }]);
  });

  it('accepts an envelope that names protobuf as its content type', () => {
    const raw = join(objectMetaFields(meta({})));
    const l = envelope(
      'meta.k8s.io/v1',
      'PartialObjectMetadataList',
      join([msg(2, [tagged(1, LEN, raw)])]),
      {
        contentType: 'application/vnd.kubernetes.protobuf',
      },
    );
    expect(decodePartialObjectMetadataList(l).items).toHaveLength(1);
  });

  it('decodes non-ASCII strings and interns repeated ones', () => {
    const l = decodePartialObjectMetadataList(
      encodeList(
        list([
          meta({ name: '日本語-✓-😀', namespace: 'ünï', finalizers: ['ünï/✓'] }),
          meta({ name: 'x'.repeat(300), namespace: 'ünï', uid: 'u-2' }),
          meta({ name: 'b', namespace: 'team-a', uid: 'u-3' }),
          meta({ name: 'c', namespace: 'team-a', uid: 'u-4' }),
        ]),
      ),
    );
    expect(l.items.map((i) => [i.name, i.namespace])).toEqual([
      ['日本語-✓-😀', 'ünï'],
      ['x'.repeat(300), 'ünï'],
      ['b', 'team-a'],
      ['c', 'team-a'],
    ]);
    expect(l.items[0]?.finalizers).toEqual(['ünï/✓']);
  });

  it('replaces invalid UTF-8 by U+FFFD as JSON would show it', () => {
    const m = join([tagged(1, LEN, new Uint8Array([0x61, 0xff, 0x62])), str(5, 'u')]);
    const l = envelope(
      'meta.k8s.io/v1',
      'PartialObjectMetadataList',
      join([msg(2, [tagged(1, LEN, m)])]),
    );
    expect(decodePartialObjectMetadataList(l).items[0]?.name).toBe('a\ufffdb');
  });

  describe('refuses malformed input with a ProtobufDecodeError', () => {
    const good = encodeList(list([full]));
    const item = (fields: Uint8Array) =>
      envelope(
        'meta.k8s.io/v1',
        'PartialObjectMetadataList',
        join([msg(2, [tagged(1, LEN, fields)])]),
      );
    it.each<[string, () => Uint8Array, RegExp]>([
      ['empty input', () => new Uint8Array(), /too short/],
      ['no magic', () => new Uint8Array([0x6b, 0x38, 0x73, 0x01, 0]), /no k8s protobuf magic/],
      ['JSON', () => new TextEncoder().encode('{"kind":"PartialObjectMetadataList"}'), /magic/],
      [
        'an envelope without raw',
        () =>
          new Bytes()
            .raw(new Uint8Array([0x6b, 0x38, 0x73, 0]))
            .raw(join([msg(1, [str(1, 'meta.k8s.io/v1'), str(2, 'PartialObjectMetadataList')])]))
            .done(),
        /no object in the envelope \(PartialObjectMetadataList\)/,
      ],
      ['the magic alone', () => new Uint8Array([0x6b, 0x38, 0x73, 0x00]), /empty body/],
      [
        'another kind',
        () => envelope('v1', 'ConfigMapList', new Uint8Array()),
        /expected meta.k8s.io\/v1 PartialObjectMetadataList, got v1 ConfigMapList/,
      ],
      [
        'no type at all',
        () => envelope('', '', new Uint8Array()),
        /got \(no apiVersion\) \(no kind\)/,
      ],
      ['a single object', () => encodePartial(full), /got meta.k8s.io\/v1 PartialObjectMetadata\b/],
      [
        'gzip content encoding',
        () =>
          envelope('meta.k8s.io/v1', 'PartialObjectMetadataList', new Uint8Array(), {
            contentEncoding: 'gzip',
          }),
        /contentEncoding "gzip"/,
      ],
      [
        'JSON content type',
        () =>
          envelope('meta.k8s.io/v1', 'PartialObjectMetadataList', new Uint8Array(), {
            contentType: 'application/json',
          }),
        /contentType "application\/json" is not protobuf/,
      ],
      ['truncated', () => good.subarray(0, good.length - 3), /past the end|truncated/],
      ['a truncated varint', () => item(new Uint8Array([0x38, 0x80])), /truncated varint/],
      [
        'an 11-byte varint',
        () => item(new Uint8Array([0x38, ...new Array<number>(10).fill(0x80), 1])),
        /longer than 10 bytes/,
      ],
      [
        'a length past the end',
        () => item(new Uint8Array([0x0a, 0x05, 0x61])),
        /length 5 runs past the end/,
      ],
      [
        'a huge length',
        () => item(new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])),
        /runs past the end/,
      ],
      [
        'name as a varint',
        () => item(join([vint(1, 5)])),
        /ObjectMeta\.1: wire type varint, expected length-delimited/,
      ],
      [
        'generation as bytes',
        () => item(join([str(7, 'x')])),
        /ObjectMeta\.7: wire type length-delimited, expected varint/,
      ],
      ['managedFields as a varint', () => item(join([vint(17, 1)])), /ObjectMeta\.17/],
      [
        'labels as fixed32',
        () => item(join([tagged(11, I32, new Uint8Array(4))])),
        /ObjectMeta\.11/,
      ],
      ['controller as bytes', () => item(join([msg(13, [str(6, 'x')])])), /OwnerReference\.6/],
      ['timestamp seconds as bytes', () => item(join([msg(9, [str(1, 'x')])])), /Timestamp\.1/],
      ['field number 0', () => item(new Uint8Array([0x02, 0x00])), /field number 0/],
      ['wire type 6', () => item(new Uint8Array([0x7e])), /illegal wire type 6/],
      ['wire type 7', () => item(new Uint8Array([0x7f])), /illegal wire type 7/],
      [
        'a stray end-group',
        () => item(join([tagged(99, EGROUP)])),
        /end-group without a start-group/,
      ],
      [
        'an unterminated group',
        () => item(join([tagged(99, SGROUP), vint(1, 1)])),
        /unterminated group/,
      ],
      ['a truncated fixed64', () => item(new Uint8Array([0x99, 0x06, 1, 2])), /truncated fixed64/],
      ['a truncated fixed32', () => item(new Uint8Array([0x9d, 0x06, 1])), /truncated fixed32/],
      [
        'a tag past 32 bits',
        () => item(new Uint8Array([0x80, 0x80, 0x80, 0x80, 0x80, 0x01])),
        /field number out of range/,
      ],
      [
        'remainingItemCount past 2^53',
        () =>
          envelope(
            'meta.k8s.io/v1',
            'PartialObjectMetadataList',
            join([msg(1, [vint(4, 1n << 60n)])]),
          ),
        /remainingItemCount out of range/,
      ],
    ])('%s', (_name, bytes, pattern) => {
      const err = expectDecodeError(() => decodePartialObjectMetadataList(bytes()), pattern);
      expect(err.name).toBe('ProtobufDecodeError');
    });

    it('reports where: the offset of the bad byte', () => {
      const bytes = item(join([str(1, 'n'), vint(7, 1), tagged(7, LEN, new Uint8Array(1))]));
      const err = expectDecodeError(() => decodePartialObjectMetadataList(bytes));
      const tagAt = bytes.findIndex(
        (b, i) => b === 0x3a && bytes[i + 1] === 1 && bytes[i + 2] === 0,
      );
      expect(tagAt).toBeGreaterThan(0);
      expect(err.offset).toBe(tagAt);
      expect(err.message).toContain(`at byte ${tagAt}`);
    });

    it('refuses what is no Uint8Array', () => {
      expectDecodeError(
        () => decodePartialObjectMetadataList('k8s' as unknown as Uint8Array),
        /not a Uint8Array/,
      );
    });
  });
});

describe('decodeWatchFrame', () => {
  const m = meta({ namespace: 'ns', finalizers: ['f'], deletionTimestamp: 1780000000 });
  const bookmark = (annotations: [string, string][], rv = '500') =>
    watchEvent('BOOKMARK', encodePartial(emptyMeta({ resourceVersion: rv, annotations })));

  it('gives trimmed metadata for ADDED, MODIFIED and DELETED', () => {
    for (const type of ['ADDED', 'MODIFIED', 'DELETED'])
      expect(decodeWatchFrame(watchEvent(type, encodePartial(m)))).toEqual({
        type,
        meta: {
          uid: 'u-1',
          name: 'n',
          namespace: 'ns',
          resourceVersion: '7',
          deletionTimestamp: '2026-05-28T20:26:40Z',
          finalizers: ['f'],
        },
      });
    expect(decodeWatchFrame(watchEvent('ADDED', encodePartial(meta({ uid: '' }))))).toEqual({
      type: 'ADDED',
    });
  });

  it('reads a bookmark: its resourceVersion and only the initial-events-end annotation', () => {
    expect(decodeWatchFrame(bookmark([['k8s.io/initial-events-end', 'true']]))).toEqual({
      type: 'BOOKMARK',
      resourceVersion: '500',
      initialEventsEnd: true,
    });
    expect(decodeWatchFrame(bookmark([]))).toEqual({
      type: 'BOOKMARK',
      resourceVersion: '500',
      initialEventsEnd: false,
    });
    expect(
      decodeWatchFrame(bookmark([['k8s.io/initial-events-end', 'false']])).initialEventsEnd,
    ).toBe(false);
    expect(
      decodeWatchFrame(bookmark([['k8s.io/initial-events-end', 'True']])).initialEventsEnd,
    ).toBe(false);
    expect(
      decodeWatchFrame(bookmark([['k8s.io/initial-events-endx', 'true']])).initialEventsEnd,
    ).toBe(false);
    expect(
      decodeWatchFrame(
        bookmark([
          ['other', 'true'],
          ['k8s.io/initial-events-end', 'true'],
        ]),
      ).initialEventsEnd,
    ).toBe(true);
    // A repeated key: the last entry wins, as in Go's map.
    const twice = bookmark([
      ['k8s.io/initial-events-end', 'true'],
      ['k8s.io/initial-events-end', 'no'],
    ]);
    expect(decodeWatchFrame(twice).initialEventsEnd).toBe(false);
    expect(decodeWatchFrame(bookmark([], ''))).toEqual({
      type: 'BOOKMARK',
      initialEventsEnd: false,
    });
  });

  it('gives an ERROR event its Status', () => {
    const s: StatusModel = {
      status: 'Failure',
      message: 'too old resource version: 5 (247)',
      reason: 'Expired',
      code: 410,
      details: {
        name: '',
        kind: '',
        causes: [{ reason: 'X', message: 'y' }],
        retryAfterSeconds: 1,
      },
    };
    expect(decodeWatchFrame(watchEvent('ERROR', encodeStatus(s)))).toEqual({
      type: 'ERROR',
      status: { code: 410, reason: 'Expired', message: 'too old resource version: 5 (247)' },
    });
    const empty = encodeStatus({ status: '', message: '', reason: '', code: 0 });
    expect(decodeWatchFrame(watchEvent('ERROR', empty))).toEqual({ type: 'ERROR', status: {} });
    const negative = encodeStatus({ status: '', message: '', reason: '', code: -3 });
    expect(decodeWatchFrame(watchEvent('ERROR', negative)).status).toEqual({ code: -3 });
  });

  it('passes an unknown type through without reading its object', () => {
    expect(decodeWatchFrame(watchEvent('RESYNC', new Uint8Array([1, 2, 3])))).toEqual({
      type: 'RESYNC',
    });
    expect(decodeWatchFrame(new Uint8Array())).toEqual({ type: '' });
  });

  it.each<[string, () => Uint8Array, RegExp]>([
    [
      'an ADDED event without an object',
      () => watchEvent('ADDED', undefined),
      /ADDED event without an object/,
    ],
    ['an object without magic', () => watchEvent('ADDED', new TextEncoder().encode('{}')), /magic/],
    [
      'a Status in an ADDED event',
      () => watchEvent('ADDED', encodeStatus({ status: '', message: '', reason: '', code: 1 })),
      /expected meta.k8s.io\/v1 PartialObjectMetadata, got v1 Status/,
    ],
    [
      'metadata in an ERROR event',
      () => watchEvent('ERROR', encodePartial(m)),
      /expected v1 Status/,
    ],
    [
      'a list in a BOOKMARK',
      () => watchEvent('BOOKMARK', encodeList(list([]))),
      /got meta.k8s.io\/v1 PartialObjectMetadataList/,
    ],
    ['the type as a varint', () => join([vint(1, 3)]), /WatchEvent\.1/],
    ['raw as a varint', () => join([str(1, 'ADDED'), msg(2, [vint(1, 3)])]), /RawExtension\.1/],
  ])('refuses %s', (_name, bytes, pattern) => {
    expectDecodeError(() => decodeWatchFrame(bytes()), pattern);
  });
});

describe('decodeStatus', () => {
  it('reads code, reason and message; refuses other kinds', () => {
    expect(
      decodeStatus(
        encodeStatus({ status: 'Failure', message: 'm', reason: 'NotAcceptable', code: 406 }),
      ),
    ).toEqual({
      code: 406,
      reason: 'NotAcceptable',
      message: 'm',
    });
    expectDecodeError(() => decodeStatus(encodePartial(meta({}))), /expected v1 Status/);
  });
});

describe('content types and Accept headers', () => {
  it('recognises protobuf answers, watch streams included', () => {
    expect(isProtobufContentType('application/vnd.kubernetes.protobuf')).toBe(true);
    expect(isProtobufContentType('application/vnd.kubernetes.protobuf;stream=watch')).toBe(true);
    expect(isProtobufContentType('Application/VND.Kubernetes.Protobuf ; stream=watch')).toBe(true);
    expect(isProtobufContentType('application/json')).toBe(false);
    expect(isProtobufContentType('application/vnd.kubernetes.protobuf-x')).toBe(false);
    expect(isProtobufContentType(undefined)).toBe(false);
    expect(isProtobufContentType('')).toBe(false);
  });

  it('asks as client-go does: protobuf, then JSON of the same transform, then plain JSON', () => {
    expect(PROTOBUF_METADATA_LIST_ACCEPT.split(',')).toEqual([
      'application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1',
      'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1',
      'application/json',
    ]);
    expect(PROTOBUF_METADATA_ACCEPT.split(',')).toEqual([
      'application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      'application/json',
    ]);
  });
});

// ---------------------------------------------------------------------------

describe('property: protobuf decodes to what trimMeta makes of the JSON', () => {
  const styles = (rng: Rng): EncodeStyle => {
    const r = rng.next();
    return r < 0.3 ? {} : r < 0.5 ? { minimal: true } : { rng, minimal: rng.chance(0.5) };
  };

  it('lists: 3,000 random ones, server-style, minimal and shuffled', () => {
    const rng = new Rng(20260522);
    let items = 0;
    for (let i = 0; i < 3000; i++) {
      const l: ListModel = {
        resourceVersion: rng.chance(0.9) ? String(rng.int(1, 1e9)) : '',
        items: Array.from({ length: rng.int(0, 6) }, () => randomMeta(rng)),
      };
      if (rng.chance(0.3)) l.continue = rng.chance(0.8) ? `tok-${rng.int(0, 1e6)}` : '';
      if (rng.chance(0.3)) l.remainingItemCount = rng.int(-2, 1e6);
      if (rng.chance(0.1)) l.selfLink = '/api/v1/pods';
      const bytes = encodeList(l, styles(rng));
      const want = listFromJson(roundTrip(listJson(l)));
      expect(decodePartialObjectMetadataList(bytes)).toEqual(want);
      expect(refList(bytes)).toEqual(want);
      items += want.items.length;
    }
    expect(items).toBeGreaterThan(5000);
  });

  it('watch events: 3,000 random ones', () => {
    const rng = new Rng(7);
    for (let i = 0; i < 3000; i++) {
      const m = randomMeta(rng);
      const style = styles(rng);
      const type = rng.pick(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK']);
      const frame = watchEvent(type, encodePartial(m, style), style);
      const json = roundTrip({
        type,
        object: {
          kind: 'PartialObjectMetadata',
          apiVersion: 'meta.k8s.io/v1',
          metadata: metaJson(m),
        },
      });
      expect(decodeWatchFrame(frame)).toEqual(frameFromJson(json));
    }
  });
});

describe('fuzz: damaged input only ever fails with ProtobufDecodeError, and decodes as the reference does', () => {
  function mutate(b: Uint8Array, rng: Rng): Uint8Array {
    const out = Array.from(b);
    const edits = rng.int(1, 3);
    for (let e = 0; e < edits; e++) {
      const at = rng.int(0, Math.max(0, out.length - 1));
      switch (rng.int(0, 5)) {
        case 0:
          out[at] = rng.int(0, 255);
          break;
        case 1:
          out[at] = (out[at] ?? 0) ^ (1 << rng.int(0, 7));
          break;
        case 2:
          out.length = at;
          break;
        case 3:
          out.splice(at, 0, ...Array.from({ length: rng.int(1, 8) }, () => rng.int(0, 255)));
          break;
        case 4:
          out.splice(at, rng.int(1, 8));
          break;
        default:
          out.splice(at, 0, ...out.slice(at, at + rng.int(1, 20)));
      }
    }
    return new Uint8Array(out);
  }

  it('lists: 4,000 damaged copies', () => {
    const rng = new Rng(99);
    const seen = { ok: 0, error: 0 };
    const started = Date.now();
    for (let i = 0; i < 4000; i++) {
      const l: ListModel = {
        resourceVersion: '5',
        items: Array.from({ length: rng.int(1, 3) }, () => randomMeta(rng)),
      };
      const bytes = mutate(encodeList(l, rng.chance(0.5) ? { rng } : {}), rng);
      seen[agree(bytes, decodePartialObjectMetadataList, refList)]++;
    }
    // Both outcomes are exercised, and nothing took long (no runaway loop).
    expect(seen.ok).toBeGreaterThan(400);
    expect(seen.error).toBeGreaterThan(400);
    expect(Date.now() - started).toBeLessThan(60_000);
  });

  it('watch frames: 4,000 damaged copies', () => {
    const rng = new Rng(1234);
    const seen = { ok: 0, error: 0 };
    for (let i = 0; i < 4000; i++) {
      const type = rng.pick(['ADDED', 'BOOKMARK', 'ERROR', 'DELETED']);
      const object =
        type === 'ERROR'
          ? encodeStatus(
              {
                status: 'Failure',
                message: 'm',
                reason: 'Expired',
                code: 410,
                details: { name: 'x', kind: 'k', causes: [], retryAfterSeconds: 2 },
              },
              { rng },
            )
          : encodePartial(
              type === 'BOOKMARK'
                ? emptyMeta({
                    resourceVersion: '9',
                    annotations: [['k8s.io/initial-events-end', 'true']],
                  })
                : randomMeta(rng),
              { rng },
            );
      const bytes = mutate(watchEvent(type, object), rng);
      seen[agree(bytes, decodeWatchFrame, refWatch)]++;
    }
    expect(seen.ok).toBeGreaterThan(400);
    expect(seen.error).toBeGreaterThan(400);
  });

  it('random bytes after a valid envelope start, and every truncation of a list', () => {
    const rng = new Rng(5);
    for (let i = 0; i < 2000; i++) {
      const junk = new Uint8Array(rng.int(0, 64)).map(() => rng.int(0, 255));
      const bytes = envelope('meta.k8s.io/v1', 'PartialObjectMetadataList', junk);
      agree(bytes, decodePartialObjectMetadataList, refList);
      agree(junk, decodeWatchFrame, refWatch);
    }
    const whole = encodeList(list([randomMeta(new Rng(3)), randomMeta(new Rng(4))]));
    // The envelope ends with contentEncoding "" and contentType "" (2 bytes each): cut
    // off whole, what remains is a complete message still. Any other cut is an error.
    for (let n = 0; n < whole.length; n++) {
      const outcome = agree(whole.subarray(0, n), decodePartialObjectMetadataList, refList);
      expect(outcome).toBe(n === whole.length - 4 || n === whole.length - 2 ? 'ok' : 'error');
    }
  });
});

// ---------------------------------------------------------------------------

describe('FrameReader', () => {
  const bodies = [
    new Uint8Array([1, 2, 3]),
    new Uint8Array(),
    new Uint8Array(300).fill(7),
    new Uint8Array([9]),
  ];
  const stream = frames(bodies);
  const same = (got: Uint8Array[]) =>
    expect(got.map((f) => Array.from(f))).toEqual(bodies.map((b) => Array.from(b)));

  it('splits a stream pushed whole, zero-copy', () => {
    const r = new FrameReader();
    const got = r.push(stream);
    same(got);
    expect(got[0]?.buffer).toBe(stream.buffer);
    r.end();
  });

  it('splits at every split point', () => {
    for (let k = 0; k <= stream.length; k++) {
      const r = new FrameReader();
      same([...r.push(stream.subarray(0, k)), ...r.push(stream.subarray(k))]);
      expect(r.buffered).toBe(0);
      r.end();
    }
  });

  it('splits at every pair of split points, and byte by byte', () => {
    const small = frames([
      new Uint8Array([1, 2, 3]),
      new Uint8Array(),
      new Uint8Array([4, 5, 6, 7, 8]),
    ]);
    for (let i = 0; i <= small.length; i++)
      for (let j = i; j <= small.length; j++) {
        const r = new FrameReader();
        const got = [
          ...r.push(small.subarray(0, i)),
          ...r.push(small.subarray(i, j)),
          ...r.push(small.subarray(j)),
        ];
        expect(got.map((f) => Array.from(f))).toEqual([[1, 2, 3], [], [4, 5, 6, 7, 8]]);
      }
    const r = new FrameReader();
    const got: Uint8Array[] = [];
    for (let i = 0; i < stream.length; i++) got.push(...r.push(stream.subarray(i, i + 1)));
    same(got);
  });

  it('carries frames across random chunkings of real watch events', () => {
    const rng = new Rng(11);
    const events = Array.from({ length: 30 }, () => addedFrame(randomMeta(rng)));
    const s = frames(events);
    for (let round = 0; round < 200; round++) {
      const r = new FrameReader();
      const got: Uint8Array[] = [];
      for (let i = 0; i < s.length;) {
        const n = rng.int(0, 200);
        got.push(...r.push(s.subarray(i, i + n)));
        i += n;
      }
      expect(got.map((f) => decodeWatchFrame(f))).toEqual(events.map((f) => decodeWatchFrame(f)));
    }
  });

  it('refuses a frame over the limit, and keeps refusing', () => {
    const r = new FrameReader(1000);
    expect(r.push(frames([new Uint8Array(1000)]))).toHaveLength(1);
    const err = expectDecodeError(
      () => r.push(new Uint8Array([0, 0, 0x03, 0xe9])),
      /1001 bytes exceeds the 1000-byte limit/,
    );
    expect(err.offset).toBe(1004);
    expectDecodeError(() => r.push(new Uint8Array([0])), /exceeds/);
    expectDecodeError(
      () => new FrameReader().push(new Uint8Array([0xff, 0xff, 0xff, 0xff])),
      /4294967295 bytes exceeds the 67108864-byte limit/,
    );
    expect(MAX_FRAME_BYTES).toBe(64 * 1024 * 1024);
  });

  it('tells a stream that ended inside a frame', () => {
    const r = new FrameReader();
    r.push(stream.subarray(0, 2));
    expectDecodeError(() => r.end(), /inside a frame header \(2 of 4 bytes\)/);
    const r2 = new FrameReader();
    r2.push(stream.subarray(0, 5));
    expect(r2.buffered).toBe(5);
    expectDecodeError(() => r2.end(), /inside a 3-byte frame \(1 bytes of it read\)/);
  });
});

// ---------------------------------------------------------------------------

describe('golden: bytes a v1.35 kube-apiserver sent (testdata/protobuf, see its README)', () => {
  const read = (f: string) => fs.readFileSync(path.join(FIXTURES, f));
  const manifest = JSON.parse(read('manifest.json').toString()) as {
    file: string;
    contentType: string;
    status: number;
  }[];
  const contentType = (f: string) => manifest.find((m) => m.file === f)?.contentType;

  it.each(['configmaps', 'configmaps-page', 'widgets'])(
    'list %s: protobuf = trimMeta of the JSON',
    (name) => {
      expect(isProtobufContentType(contentType(`${name}.pb`))).toBe(true);
      expect(contentType(`${name}.json.txt`)).toBe('application/json');
      const got = decodePartialObjectMetadataList(read(`${name}.pb`));
      const want = listFromJson(read(`${name}.json.txt`).toString());
      expect(got).toEqual(want);
      expect(refList(read(`${name}.pb`))).toEqual(want);
      expect(got.items.length).toBeGreaterThan(1);
    },
  );

  it('the fixtures hold what they are meant to', () => {
    const cms = decodePartialObjectMetadataList(read('configmaps.pb')).items;
    const byName = new Map(cms.map((m) => [m.name, m]));
    expect(byName.get('doomed')).toMatchObject({
      finalizers: ['example.com/hold', 'foregroundDeletion'],
      ownerReferences: [{ kind: 'ConfigMap', name: 'owner', blockOwnerDeletion: true }],
    });
    expect(byName.get('doomed')?.deletionTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(byName.get('child-controller')?.ownerReferences?.[0]).toMatchObject({
      controller: true,
      blockOwnerDeletion: true,
    });
    expect(byName.get('child-plain')?.ownerReferences?.[1]).toMatchObject({
      kind: 'Widget',
      controller: false,
      blockOwnerDeletion: false,
    });
    const page = decodePartialObjectMetadataList(read('configmaps-page.pb'));
    expect(page.continue).toBeTruthy();
    expect(page.remainingItemCount).toBeGreaterThan(0);
    const widgets = decodePartialObjectMetadataList(read('widgets.pb')).items;
    expect(widgets.find((w) => w.name === 'w2')?.deletionTimestamp).toBeTruthy();
  });

  it.each(['configmaps-watch', 'widgets-watch', 'watch-error'])(
    'watch %s: each frame = the JSON line',
    (name) => {
      expect(contentType(`${name}.pb`)).toBe('application/vnd.kubernetes.protobuf;stream=watch');
      const want = read(`${name}.jsonl`).toString().split('\n').filter(Boolean).map(frameFromJson);
      const bytes = read(`${name}.pb`);
      for (const chunk of [bytes.length, 1, 7, 512]) {
        const r = new FrameReader();
        const got: WatchFrame[] = [];
        for (let i = 0; i < bytes.length; i += chunk)
          for (const f of r.push(bytes.subarray(i, i + chunk))) got.push(decodeWatchFrame(f));
        r.end();
        expect(got).toEqual(want);
      }
      for (const f of new FrameReader().push(bytes))
        expect(refWatch(f)).toEqual(decodeWatchFrame(f));
    },
  );

  it('the watch holds a watch-list: initial events, the initial-events-end bookmark, then changes', () => {
    const got = new FrameReader().push(read('configmaps-watch.pb')).map((f) => decodeWatchFrame(f));
    const end = got.findIndex((e) => e.type === 'BOOKMARK' && e.initialEventsEnd);
    expect(end).toBeGreaterThan(0);
    expect(got.slice(0, end).every((e) => e.type === 'ADDED')).toBe(true);
    expect(got.slice(end + 1).map((e) => e.type)).toEqual(
      expect.arrayContaining(['ADDED', 'MODIFIED', 'DELETED']),
    );
    const errors = new FrameReader().push(read('watch-error.pb')).map((f) => decodeWatchFrame(f));
    expect(errors).toEqual([
      { type: 'ERROR', status: expect.objectContaining({ code: 504, reason: 'Timeout' }) },
    ]);
  });

  it('a 406 for plain protobuf on a custom resource comes as a protobuf Status', () => {
    expect(manifest.find((m) => m.file === 'status-406.pb')).toMatchObject({
      status: 406,
      contentType: 'application/vnd.kubernetes.protobuf',
    });
    expect(decodeStatus(read('status-406.pb'))).toEqual(
      statusFromJson(JSON.parse(read('status-406.json.txt').toString())),
    );
  });

  it("the JSON fallback's full objects give the same metadata as the protobuf transform", () => {
    expect(contentType('widgets-fallback.json.txt')).toBe('application/json');
    expect(listFromJson(read('widgets-fallback.json.txt').toString()).items).toEqual(
      decodePartialObjectMetadataList(read('widgets.pb')).items,
    );
  });
});

describe('realistic metadata (as the benchmark uses)', () => {
  it('decodes to the JSON path result', () => {
    const rng = new Rng(1);
    const l: ListModel = {
      resourceVersion: '1',
      items: Array.from({ length: 200 }, (_, i) => realisticMeta(i, rng)),
    };
    expect(decodePartialObjectMetadataList(encodeList(l))).toEqual(
      listFromJson(roundTrip(listJson(l))),
    );
  });

  it('a varint writer that round-trips (the encoder the tests trust)', () => {
    for (const v of [0, 1, 127, 128, 300, 2 ** 31 - 1, 2 ** 31, 2 ** 53 - 1])
      expect(Array.from(new Bytes().varint(v).done()).length).toBe(
        Math.max(1, Math.ceil(Math.log2(v + 1) / 7)),
      );
    expect(Array.from(new Bytes().varint(-1n).done())).toEqual([
      ...new Array<number>(9).fill(0xff),
      1,
    ]);
  });
});
