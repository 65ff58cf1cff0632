// Test support for protobuf-meta.ts: an encoder that writes metadata lists,
// watch events and Statuses in the API server's wire format, the JSON form
// the server would send for the same object (Go's encoding/json rules for
// metav1 types), and seeded generators of random and of realistic metadata.
//
// The encoder follows what gogo-protobuf's generated MarshalToSizedBuffer
// writes (fields in ascending number order, non-pointer fields always, empty
// strings included), and can also write the same message the ways other
// valid encoders may: fields shuffled, empty fields left out, a message split
// across repeated occurrences (which a decoder must merge), earlier values of
// a scalar overridden by later ones, and unknown fields of every wire type.

export interface OwnerRefModel {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ManagedFieldsModel {
  manager: string;
  operation: string;
  apiVersion: string;
  time?: number;
  fieldsType: string;
  fieldsV1?: string;
  subresource?: string;
}

/** A Go metav1.ObjectMeta as a test models it. Timestamps are Unix seconds. */
export interface MetaModel {
  name: string;
  generateName: string;
  namespace: string;
  selfLink: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  /** undefined: the zero time (JSON null). */
  creationTimestamp?: number;
  /** undefined: a nil pointer (absent); 'zero': a pointer to the zero time (JSON null). */
  deletionTimestamp?: number | 'zero';
  /** Nanoseconds sent with deletionTimestamp, which metav1.Time drops. */
  deletionNanos?: number;
  deletionGracePeriodSeconds?: number;
  labels: [string, string][];
  annotations: [string, string][];
  ownerReferences: OwnerRefModel[];
  finalizers: string[];
  managedFields: ManagedFieldsModel[];
}

export function emptyMeta(over: Partial<MetaModel> = {}): MetaModel {
  return {
    name: '',
    generateName: '',
    namespace: '',
    selfLink: '',
    uid: '',
    resourceVersion: '',
    generation: 0,
    labels: [],
    annotations: [],
    ownerReferences: [],
    finalizers: [],
    managedFields: [],
    ...over,
  };
}

// ---------------------------------------------------------------------------
// Bytes

/** A growable byte buffer. */
export class Bytes {
  buf = new Uint8Array(64);
  length = 0;

  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
  }

  byte(b: number): this {
    this.room(1);
    this.buf[this.length++] = b;
    return this;
  }

  raw(bytes: Uint8Array): this {
    this.room(bytes.length);
    this.buf.set(bytes, this.length);
    this.length += bytes.length;
    return this;
  }

  /** A varint of a non-negative number (< 2^53) or of any bigint (two's complement, 64 bits). */
  varint(v: number | bigint): this {
    if (typeof v === 'number' && v >= 0 && v <= 0x7fffffff) {
      let n = v;
      while (n >= 0x80) {
        this.byte((n & 0x7f) | 0x80);
        n >>>= 7;
      }
      return this.byte(n);
    }
    let x = typeof v === 'bigint' ? BigInt.asUintN(64, v) : BigInt(v);
    if (x < 0n) throw new Error('negative varint');
    do {
      const b = Number(x & 0x7fn);
      x >>= 7n;
      this.byte(x ? b | 0x80 : b);
    } while (x);
    return this;
  }

  done(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

const utf8 = new TextEncoder();

export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;
export const SGROUP = 3;
export const EGROUP = 4;
export const I32 = 5;

/** One encoded field: its number (for ordering) and its bytes, tag included. */
export interface FieldBytes {
  n: number;
  bytes: Uint8Array;
}

function varintSize(v: bigint): number {
  let n = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    n++;
  }
  return n;
}

/** Writes a varint at `at`; returns the offset after it. */
function putVarint(out: Uint8Array, at: number, v: number | bigint): number {
  if (typeof v === 'number' && v >= 0 && v <= 0x7fffffff) {
    while (v >= 0x80) {
      out[at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    out[at++] = v;
    return at;
  }
  let x = BigInt.asUintN(64, BigInt(v));
  while (x >= 0x80n) {
    out[at++] = Number(x & 0x7fn) | 0x80;
    x >>= 7n;
  }
  out[at++] = Number(x);
  return at;
}

const sizeOf = (v: number | bigint): number =>
  typeof v === 'number' && v >= 0 && v < 0x80 ? 1 : varintSize(BigInt.asUintN(64, BigInt(v)));

/** A field, tag included, in a buffer of exactly its size (the encoder makes millions for the benchmark). */
export function tagged(
  n: number,
  wire: number,
  payload?: Uint8Array | number | bigint,
): FieldBytes {
  const tag = n * 8 + wire;
  let size = sizeOf(tag);
  if (wire === VARINT) size += sizeOf(payload as number | bigint);
  else if (payload instanceof Uint8Array)
    size += (wire === LEN ? sizeOf(payload.length) : 0) + payload.length;
  const out = new Uint8Array(size);
  let at = putVarint(out, 0, tag);
  if (wire === VARINT) putVarint(out, at, payload as number | bigint);
  else if (payload instanceof Uint8Array) {
    if (wire === LEN) at = putVarint(out, at, payload.length);
    out.set(payload, at);
  }
  return { n, bytes: out };
}

export const str = (n: number, s: string): FieldBytes => tagged(n, LEN, utf8.encode(s));
export const msg = (n: number, fields: FieldBytes[]): FieldBytes => tagged(n, LEN, join(fields));
export const vint = (n: number, v: number | bigint): FieldBytes => tagged(n, VARINT, v);

export function join(fields: readonly FieldBytes[]): Uint8Array {
  let size = 0;
  for (const f of fields) size += f.bytes.length;
  const out = new Uint8Array(size);
  let at = 0;
  for (const f of fields) {
    out.set(f.bytes, at);
    at += f.bytes.length;
  }
  return out;
}

// ---------------------------------------------------------------------------
// A seeded PRNG

export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 1;
  }
  /** mulberry32 */
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    const x = xs[Math.floor(this.next() * xs.length)];
    if (x === undefined) throw new Error('pick from an empty list');
    return x;
  }
}

// ---------------------------------------------------------------------------
// Encoding

export interface EncodeStyle {
  /** Leave out empty strings and zero numbers (valid proto2; gogo always writes them). */
  minimal?: boolean;
  /** With an Rng: shuffle field order, split messages, add overridden values and unknown fields. */
  rng?: Rng;
}

/** Interleaves fields randomly, keeping the relative order of each field number's occurrences. */
function shuffle(fields: FieldBytes[], rng: Rng): FieldBytes[] {
  const queues = new Map<number, FieldBytes[]>();
  for (const f of fields) {
    const q = queues.get(f.n);
    if (q) q.push(f);
    else queues.set(f.n, [f]);
  }
  const out: FieldBytes[] = [];
  const keys = [...queues.keys()];
  while (keys.length) {
    const i = Math.floor(rng.next() * keys.length);
    const q = queues.get(keys[i] ?? -1) ?? [];
    const f = q.shift();
    if (f) out.push(f);
    if (!q.length) keys.splice(i, 1);
  }
  return out;
}

/** Unknown fields of each wire type, groups (nested) included. */
export function unknownField(rng: Rng, numbers: readonly number[]): FieldBytes {
  const n = rng.pick(numbers);
  switch (rng.int(0, 4)) {
    case 0:
      return vint(n, rng.chance(0.5) ? rng.int(0, 300) : -1n);
    case 1:
      return tagged(n, I64, new Uint8Array(8).fill(rng.int(0, 255)));
    case 2:
      return tagged(n, I32, new Uint8Array(4).fill(rng.int(0, 255)));
    case 3:
      return tagged(
        n,
        LEN,
        new Uint8Array(rng.int(0, 40)).map(() => rng.int(0, 255)),
      );
    default: {
      // A group holding a varint, a nested group and bytes.
      const inner = join([
        vint(1, 7),
        tagged(2, SGROUP),
        str(3, 'in a group'),
        tagged(2, EGROUP),
        tagged(4, LEN, new Uint8Array([1, 2, 3])),
      ]);
      return { n, bytes: join([tagged(n, SGROUP), { n, bytes: inner }, tagged(n, EGROUP)]) };
    }
  }
}

/** Applies an EncodeStyle to a message's fields; `decoys` gives an earlier value a field number's last one overrides. */
function styled(
  fields: FieldBytes[],
  style: EncodeStyle,
  unknown: readonly number[],
  decoys: (n: number) => FieldBytes | undefined,
): FieldBytes[] {
  const rng = style.rng;
  if (!rng) return fields;
  let out = fields;
  // An earlier value of a scalar, which the real one (later) overrides.
  const withDecoys: FieldBytes[] = [];
  for (const f of out) {
    const d = rng.chance(0.15) ? decoys(f.n) : undefined;
    if (d) withDecoys.push(d);
    withDecoys.push(f);
  }
  out = withDecoys;
  if (rng.chance(0.7)) out = shuffle(out, rng);
  const extra = rng.chance(0.4) ? rng.int(1, 3) : 0;
  for (let i = 0; i < extra; i++) out.splice(rng.int(0, out.length), 0, unknownField(rng, unknown));
  return out;
}

function timeFields(seconds: number, nanos: number | undefined, style: EncodeStyle): FieldBytes[] {
  const f = [vint(1, BigInt(seconds))];
  if (nanos !== undefined) f.push(vint(2, BigInt(nanos)));
  return style.rng ? styled(f, style, [3, 9, 100], () => undefined) : f;
}

/** gogo writes a Time field always for a non-pointer, as an empty message for the zero time. */
function timeField(
  n: number,
  seconds: number | undefined,
  nanos: number | undefined,
  style: EncodeStyle,
): FieldBytes {
  return msg(n, seconds === undefined ? [] : timeFields(seconds, nanos, style));
}

function ownerRefFields(o: OwnerRefModel, style: EncodeStyle): FieldBytes[] {
  const f: FieldBytes[] = [];
  const s = (n: number, v: string) => {
    if (v || !style.minimal) f.push(str(n, v));
  };
  s(1, o.kind);
  s(3, o.name);
  s(4, o.uid);
  s(5, o.apiVersion);
  if (o.controller !== undefined) f.push(vint(6, o.controller ? 1 : 0));
  if (o.blockOwnerDeletion !== undefined) f.push(vint(7, o.blockOwnerDeletion ? 1 : 0));
  return styled(f, style, [2, 8, 9, 77], (n) =>
    n === 1 || n === 3 || n === 4 || n === 5
      ? str(n, 'decoy')
      : n === 6 || n === 7
        ? vint(n, 1)
        : undefined,
  );
}

function managedFieldsEntry(m: ManagedFieldsModel): FieldBytes[] {
  const f = [str(1, m.manager), str(2, m.operation), str(3, m.apiVersion)];
  f.push(timeField(4, m.time, undefined, {}));
  f.push(str(6, m.fieldsType));
  if (m.fieldsV1 !== undefined) f.push(msg(7, [str(1, m.fieldsV1)]));
  f.push(str(8, m.subresource ?? ''));
  return f;
}

const mapEntry = (n: number, k: string, v: string): FieldBytes => msg(n, [str(1, k), str(2, v)]);

export function objectMetaFields(m: MetaModel, style: EncodeStyle = {}): FieldBytes[] {
  const f: FieldBytes[] = [];
  const s = (n: number, v: string) => {
    if (v || !style.minimal) f.push(str(n, v));
  };
  s(1, m.name);
  s(2, m.generateName);
  s(3, m.namespace);
  s(4, m.selfLink);
  s(5, m.uid);
  s(6, m.resourceVersion);
  if (m.generation || !style.minimal) f.push(vint(7, m.generation));
  if (m.creationTimestamp !== undefined || !style.minimal)
    f.push(timeField(8, m.creationTimestamp, undefined, style));
  if (m.deletionTimestamp !== undefined)
    f.push(
      timeField(
        9,
        m.deletionTimestamp === 'zero' ? undefined : m.deletionTimestamp,
        m.deletionNanos,
        style,
      ),
    );
  if (m.deletionGracePeriodSeconds !== undefined) f.push(vint(10, m.deletionGracePeriodSeconds));
  // gogo writes map entries sorted by key.
  for (const [k, v] of [...m.labels].sort(byKey)) f.push(mapEntry(11, k, v));
  for (const [k, v] of [...m.annotations].sort(byKey)) f.push(mapEntry(12, k, v));
  for (const o of m.ownerReferences) f.push(msg(13, ownerRefFields(o, style)));
  for (const x of m.finalizers) f.push(str(14, x));
  for (const x of m.managedFields) f.push(msg(17, managedFieldsEntry(x)));
  return styled(f, style, [15, 16, 18, 99, 1000, 536870911], (n) => {
    if (n === 1 || n === 3 || n === 5 || n === 6) return str(n, 'decoy');
    if (n === 9) return msg(9, [vint(1, 12345)]);
    return undefined;
  });
}

function byKey(a: [string, string], b: [string, string]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

/** PartialObjectMetadata's fields; with an Rng, the metadata may be split over several occurrences. */
export function partialObjectMetadataFields(m: MetaModel, style: EncodeStyle = {}): FieldBytes[] {
  const fields = objectMetaFields(m, style);
  const rng = style.rng;
  if (!rng || fields.length < 2 || !rng.chance(0.3)) return [msg(1, fields)];
  // Split: a decoder merges the parts back (scalars: last wins; repeated: appended),
  // and a split keeps every field's order, decoys before the values overriding them.
  const cut = rng.int(1, fields.length - 1);
  return [msg(1, fields.slice(0, cut)), msg(1, fields.slice(cut))];
}

export interface ListModel {
  resourceVersion: string;
  continue?: string;
  remainingItemCount?: number;
  selfLink?: string;
  items: MetaModel[];
}

export function listFields(l: ListModel, style: EncodeStyle = {}): FieldBytes[] {
  const lm: FieldBytes[] = [];
  if (l.selfLink || !style.minimal) lm.push(str(1, l.selfLink ?? ''));
  if (l.resourceVersion || !style.minimal) lm.push(str(2, l.resourceVersion));
  if (l.continue || !style.minimal) lm.push(str(3, l.continue ?? ''));
  if (l.remainingItemCount !== undefined) lm.push(vint(4, BigInt(l.remainingItemCount)));
  const f: FieldBytes[] = [
    msg(
      1,
      styled(lm, style, [5, 6, 99], () => undefined),
    ),
  ];
  for (const it of l.items) f.push(msg(2, partialObjectMetadataFields(it, style)));
  return styled(f, style, [3, 4, 99], () => undefined);
}

const MAGIC = new Uint8Array([0x6b, 0x38, 0x73, 0x00]);

/** `k8s\0` + runtime.Unknown {typeMeta, raw, contentEncoding, contentType}, as the server writes it. */
export function envelope(
  apiVersion: string,
  kind: string,
  raw: Uint8Array,
  o: { contentEncoding?: string; contentType?: string; style?: EncodeStyle } = {},
): Uint8Array {
  const f = [
    msg(1, [str(1, apiVersion), str(2, kind)]),
    tagged(2, LEN, raw),
    str(3, o.contentEncoding ?? ''),
    str(4, o.contentType ?? ''),
  ];
  return new Bytes()
    .raw(MAGIC)
    .raw(join(o.style ? styled(f, o.style, [5, 6, 99], () => undefined) : f))
    .done();
}

export function encodeList(l: ListModel, style: EncodeStyle = {}): Uint8Array {
  return envelope('meta.k8s.io/v1', 'PartialObjectMetadataList', join(listFields(l, style)), {
    style,
  });
}

export function encodePartial(m: MetaModel, style: EncodeStyle = {}): Uint8Array {
  return envelope(
    'meta.k8s.io/v1',
    'PartialObjectMetadata',
    join(partialObjectMetadataFields(m, style)),
    {
      style,
    },
  );
}

export interface StatusModel {
  status: string;
  message: string;
  reason: string;
  code: number;
  details?: {
    name: string;
    kind: string;
    causes: { reason: string; message: string }[];
    retryAfterSeconds: number;
  };
}

export function encodeStatus(s: StatusModel, style: EncodeStyle = {}): Uint8Array {
  const f = [
    msg(1, [str(1, ''), str(2, ''), str(3, '')]),
    str(2, s.status),
    str(3, s.message),
    str(4, s.reason),
  ];
  if (s.details)
    f.push(
      msg(5, [
        str(1, s.details.name),
        str(2, ''),
        str(3, s.details.kind),
        ...s.details.causes.map((c) => msg(4, [str(1, c.reason), str(2, c.message), str(3, '')])),
        vint(5, s.details.retryAfterSeconds),
        str(6, ''),
      ]),
    );
  f.push(vint(6, BigInt(s.code)));
  return envelope('v1', 'Status', join(styled(f, style, [7, 99], () => undefined)), { style });
}

/** A watch frame's body: WatchEvent {type, object: RawExtension {raw}} (no magic of its own). */
export function watchEvent(
  type: string,
  object: Uint8Array | undefined,
  style: EncodeStyle = {},
): Uint8Array {
  const f = [str(1, type)];
  if (object) f.push(msg(2, [tagged(1, LEN, object)]));
  return join(styled(f, style, [3, 99], () => undefined));
}

/** Length-prefixes frames into a watch stream. */
export function frames(bodies: readonly Uint8Array[]): Uint8Array {
  const b = new Bytes();
  for (const body of bodies) {
    const n = body.length;
    b.byte((n >>> 24) & 0xff)
      .byte((n >>> 16) & 0xff)
      .byte((n >>> 8) & 0xff)
      .byte(n & 0xff);
    b.raw(body);
  }
  return b.done();
}

// ---------------------------------------------------------------------------
// The JSON form (Go encoding/json with metav1's tags)

/**
 * metav1.Time's JSON for years 0..9999: RFC3339, seconds, `Z`. Outside that
 * range tests state the expected text themselves.
 */
export function goTimeJson(seconds: number): string {
  const iso = new Date(seconds * 1000).toISOString();
  if (!/^\d{4}-/.test(iso)) throw new Error(`goTimeJson: year out of 0..9999 (${seconds})`);
  return iso.replace(/\.\d{3}Z$/, 'Z');
}

/** Go's zero time is null in JSON (metav1.Time.MarshalJSON). */
export function timeJson(seconds: number): string | null {
  return seconds === ZERO_TIME ? null : goTimeJson(seconds);
}

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function metaJson(m: MetaModel): { [k: string]: Json } {
  const o: { [k: string]: Json } = {};
  if (m.name) o.name = m.name;
  if (m.generateName) o.generateName = m.generateName;
  if (m.namespace) o.namespace = m.namespace;
  if (m.selfLink) o.selfLink = m.selfLink;
  if (m.uid) o.uid = m.uid;
  if (m.resourceVersion) o.resourceVersion = m.resourceVersion;
  if (m.generation) o.generation = m.generation;
  // A struct, not a pointer: always written, the zero time as null.
  o.creationTimestamp = m.creationTimestamp === undefined ? null : timeJson(m.creationTimestamp);
  if (m.deletionTimestamp !== undefined)
    o.deletionTimestamp = m.deletionTimestamp === 'zero' ? null : timeJson(m.deletionTimestamp);
  if (m.deletionGracePeriodSeconds !== undefined)
    o.deletionGracePeriodSeconds = m.deletionGracePeriodSeconds;
  // Duplicate map keys: the last entry wins, in Go's map as in a JS object.
  if (m.labels.length) o.labels = Object.fromEntries(m.labels);
  if (m.annotations.length) o.annotations = Object.fromEntries(m.annotations);
  if (m.ownerReferences.length)
    o.ownerReferences = m.ownerReferences.map((r) => {
      const x: { [k: string]: Json } = {
        apiVersion: r.apiVersion,
        kind: r.kind,
        name: r.name,
        uid: r.uid,
      };
      if (r.controller !== undefined) x.controller = r.controller;
      if (r.blockOwnerDeletion !== undefined) x.blockOwnerDeletion = r.blockOwnerDeletion;
      return x;
    });
  if (m.finalizers.length) o.finalizers = m.finalizers;
  if (m.managedFields.length)
    o.managedFields = m.managedFields.map((x) => {
      const e: { [k: string]: Json } = {
        manager: x.manager,
        operation: x.operation,
        apiVersion: x.apiVersion,
      };
      if (x.time !== undefined) e.time = timeJson(x.time);
      e.fieldsType = x.fieldsType;
      if (x.fieldsV1 !== undefined) e.fieldsV1 = JSON.parse(x.fieldsV1) as Json;
      if (x.subresource) e.subresource = x.subresource;
      return e;
    });
  return o;
}

export function listJson(l: ListModel): { [k: string]: Json } {
  const md: { [k: string]: Json } = {};
  if (l.selfLink) md.selfLink = l.selfLink;
  if (l.resourceVersion) md.resourceVersion = l.resourceVersion;
  if (l.continue) md.continue = l.continue;
  if (l.remainingItemCount !== undefined) md.remainingItemCount = l.remainingItemCount;
  return {
    kind: 'PartialObjectMetadataList',
    apiVersion: 'meta.k8s.io/v1',
    metadata: md,
    items: l.items.map((m) => ({
      kind: 'PartialObjectMetadata',
      apiVersion: 'meta.k8s.io/v1',
      metadata: metaJson(m),
    })),
  };
}

// ---------------------------------------------------------------------------
// Generators

/** Seconds of 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the years goTimeJson covers. */
export const YEAR_0 = -62167219200;
export const YEAR_9999_END = 253402300799;
/** Go's zero time (0001-01-01), which JSON writes as null. */
export const ZERO_TIME = -62135596800;

const PIECES = [
  'a',
  'web',
  'kube-system',
  'default',
  'x'.repeat(30),
  'ünï',
  '日本',
  '✓',
  '😀',
  'e\u0301',
  '-',
  '.',
  '/',
  '0',
  '"',
  '\\',
  '\n',
  ' ',
];

function randomString(rng: Rng, allowEmpty = true): string {
  if (allowEmpty && rng.chance(0.15)) return '';
  let s = '';
  const parts = rng.int(1, 4);
  for (let i = 0; i < parts; i++) s += rng.pick(PIECES);
  if (rng.chance(0.3)) s += String(rng.int(0, 99999));
  return s;
}

function randomUid(rng: Rng): string {
  const h = (n: number) =>
    Array.from({ length: n }, () => '0123456789abcdef'[rng.int(0, 15)]).join('');
  return `${h(8)}-${h(4)}-4${h(3)}-${h(4)}-${h(12)}`;
}

function randomTime(rng: Rng): number {
  const r = rng.next();
  if (r < 0.05) return 0;
  if (r < 0.1) return YEAR_0 + rng.int(0, 86400 * 800);
  if (r < 0.15) return YEAR_9999_END - rng.int(0, 86400 * 800);
  if (r < 0.2) return rng.int(-86400 * 365, 86400 * 365);
  let t = rng.int(YEAR_0, YEAR_9999_END);
  if (t === ZERO_TIME) t++;
  return t;
}

export function randomOwnerRef(rng: Rng): OwnerRefModel {
  const r: OwnerRefModel = {
    apiVersion: rng.pick(['v1', 'apps/v1', 'example.kubegc.io/v1', '', 'ünï/v1']),
    kind: rng.pick(['ReplicaSet', 'ConfigMap', 'Widget', '', 'Ünï']),
    name: randomString(rng),
    uid: rng.chance(0.9) ? randomUid(rng) : randomString(rng),
  };
  if (rng.chance(0.5)) r.controller = rng.chance(0.5);
  if (rng.chance(0.5)) r.blockOwnerDeletion = rng.chance(0.5);
  return r;
}

function randomPairs(rng: Rng, max: number): [string, string][] {
  const n = rng.chance(0.4) ? 0 : rng.int(1, max);
  return Array.from({ length: n }, (): [string, string] => [
    rng.chance(0.1) ? 'k8s.io/initial-events-end' : randomString(rng),
    rng.chance(0.2) ? 'true' : randomString(rng),
  ]);
}

export function randomManagedFields(rng: Rng, n: number): ManagedFieldsModel[] {
  return Array.from({ length: n }, () => {
    const keys = Array.from(
      { length: rng.int(1, 12) },
      (_, i) => `"f:${randomString(rng, false).replace(/["\\\n]/g, '')}${i}":{}`,
    );
    const m: ManagedFieldsModel = {
      manager: rng.pick(['kubectl', 'kube-controller-manager', 'helm']),
      operation: rng.pick(['Update', 'Apply']),
      apiVersion: 'v1',
      fieldsType: 'FieldsV1',
      fieldsV1: `{"f:metadata":{${keys.join(',')}}}`,
    };
    if (rng.chance(0.8)) m.time = randomTime(rng);
    if (rng.chance(0.2)) m.subresource = 'status';
    return m;
  });
}

/** Metadata with every field's presence random, strings from ASCII to emoji. */
export function randomMeta(rng: Rng): MetaModel {
  const m = emptyMeta({
    name: rng.chance(0.95) ? randomString(rng) : '',
    generateName: rng.chance(0.2) ? randomString(rng) : '',
    namespace: rng.chance(0.7) ? randomString(rng) : '',
    selfLink: rng.chance(0.1) ? `/api/v1/${randomString(rng)}` : '',
    uid: rng.chance(0.93) ? randomUid(rng) : rng.chance(0.5) ? randomString(rng) : '',
    resourceVersion: rng.chance(0.9) ? String(rng.int(1, 2 ** 40)) : '',
    generation: rng.chance(0.5) ? rng.int(0, 2 ** 40) : 0,
    labels: randomPairs(rng, 5),
    annotations: randomPairs(rng, 4),
    ownerReferences: rng.chance(0.5)
      ? Array.from({ length: rng.int(1, 4) }, () => randomOwnerRef(rng))
      : [],
    finalizers: rng.chance(0.4)
      ? Array.from({ length: rng.int(1, 3) }, () =>
          rng.pick(['kubernetes', 'foregroundDeletion', 'example.com/hold', '', 'ünï/✓']),
        )
      : [],
    managedFields: rng.chance(0.6) ? randomManagedFields(rng, rng.int(1, 3)) : [],
  });
  if (rng.chance(0.9)) m.creationTimestamp = randomTime(rng);
  const d = rng.next();
  if (d < 0.3) m.deletionTimestamp = randomTime(rng);
  else if (d < 0.35) m.deletionTimestamp = 'zero';
  if (m.deletionTimestamp !== undefined && rng.chance(0.3)) m.deletionNanos = rng.int(0, 999999999);
  if (rng.chance(0.2)) m.deletionGracePeriodSeconds = rng.int(0, 30);
  return m;
}

/**
 * Metadata like a Deployment's pods: a namespace of 50, a ReplicaSet owner,
 * labels, a last-applied annotation on some, managedFields from two managers.
 */
export function realisticMeta(i: number, rng: Rng): MetaModel {
  const ns = `team-${i % 50}`;
  const app = `app-${(i >> 6) % 400}`;
  const rsHash = (((i >> 6) * 2654435761) >>> 0).toString(16).slice(0, 8);
  const rs = `${app}-${rsHash}`;
  const fieldsV1 = (keys: string[]) =>
    JSON.stringify({
      'f:metadata': {
        'f:generateName': {},
        'f:labels': Object.fromEntries(['.', ...keys].map((k) => [k === '.' ? '.' : `f:${k}`, {}])),
        'f:ownerReferences': { '.': {}, [`k:{"uid":"${rsHash}"}`]: {} },
      },
      'f:spec': Object.fromEntries(
        ['containers', 'dnsPolicy', 'enableServiceLinks', 'restartPolicy', 'schedulerName'].map(
          (k) => [`f:${k}`, {}],
        ),
      ),
    });
  return emptyMeta({
    name: `${rs}-${i.toString(36).padStart(5, '0')}`,
    generateName: `${rs}-`,
    namespace: ns,
    uid: randomUid(rng),
    resourceVersion: String(100000 + i),
    creationTimestamp: 1780000000 + i,
    labels: [
      ['app', app],
      ['pod-template-hash', rsHash],
      ['team', ns],
      ['tier', i % 3 ? 'backend' : 'frontend'],
    ],
    annotations: i % 4 === 0 ? [['kubectl.kubernetes.io/restartedAt', '2026-01-01T00:00:00Z']] : [],
    ownerReferences: [
      {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        name: rs,
        uid: `${rsHash}-0000-4000-8000-${rsHash}0000`,
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
    finalizers: i % 10 === 0 ? ['example.com/protect'] : [],
    managedFields: [
      {
        manager: 'kube-controller-manager',
        operation: 'Update',
        apiVersion: 'v1',
        time: 1780000000 + i,
        fieldsType: 'FieldsV1',
        fieldsV1: fieldsV1(['app', 'pod-template-hash', 'team', 'tier']),
      },
      {
        manager: 'kubelet',
        operation: 'Update',
        apiVersion: 'v1',
        time: 1780000100 + i,
        fieldsType: 'FieldsV1',
        fieldsV1: JSON.stringify({
          'f:status': {
            'f:conditions': { 'k:{"type":"Ready"}': { '.': {}, 'f:status': {}, 'f:type': {} } },
            'f:containerStatuses': {},
            'f:hostIP': {},
            'f:phase': {},
            'f:podIP': {},
            'f:startTime': {},
          },
        }),
        subresource: 'status',
      },
    ],
  });
}
