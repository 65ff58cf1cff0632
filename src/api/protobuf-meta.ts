// A decoder for the API server's protobuf answers to metadata-only LISTs and
// watches (`Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadata…`).
//
// It walks the wire format by hand and materialises only what ObjectMeta
// keeps (resources.ts trimMeta): managedFields, labels, annotations and the
// rest are stepped over by their length, never decoded. What it yields for a
// message is what trimMeta yields for the JSON the server would have sent for
// the same object, field presence included (k8s.io/apimachinery encodes with
// gogo-protobuf; the rules that matter are spelled out where they are used).
//
// Wire format (k8s.io/apimachinery/pkg/runtime/serializer/protobuf):
// - a body is the magic `k8s\0` then a runtime.Unknown {typeMeta{apiVersion,
//   kind}=1, raw=2, contentEncoding=3, contentType=4}; raw holds the object.
// - a watch stream (`application/vnd.kubernetes.protobuf;stream=watch`) is
//   frames of a 4-byte big-endian length then a metav1.WatchEvent {type=1,
//   object=2 (RawExtension {raw=1})}, the event itself WITHOUT the magic, its
//   object's raw bytes WITH it (a `k8s\0` body as above).

import type { ObjectMeta, OwnerReference } from './resources.ts';

/** Malformed protobuf input. `offset` is the byte (in the decoded buffer or stream) where it went wrong. */
export class ProtobufDecodeError extends Error {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(offset >= 0 ? `protobuf: ${message} (at byte ${offset})` : `protobuf: ${message}`);
    this.name = 'ProtobufDecodeError';
    this.offset = offset;
  }
}

export const PROTOBUF_CONTENT_TYPE = 'application/vnd.kubernetes.protobuf';

/**
 * What client-go's metadata client sends (k8s.io/client-go/metadata): protobuf
 * first, then the JSON form of the same transform, then plain JSON for
 * servers (aggregated APIs) that serve neither.
 */
export const PROTOBUF_METADATA_LIST_ACCEPT =
  'application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,' +
  'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
export const PROTOBUF_METADATA_ACCEPT =
  'application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,' +
  'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

/**
 * True when a response's Content-Type names the protobuf encoding, with or
 * without parameters (a watch answers `…;stream=watch`); media types are
 * case-insensitive, as client-go's mime.ParseMediaType treats them.
 */
export function isProtobufContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const semi = contentType.indexOf(';');
  const media = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return media === PROTOBUF_CONTENT_TYPE;
}

export interface MetadataList {
  /** trimMeta of each item, in order; items trimMeta would drop (no uid or name) are left out. */
  items: ObjectMeta[];
  /** The list's resourceVersion; '' when the server sent none. */
  resourceVersion: string;
  /** Present only when non-empty (the JSON form omits an empty one). */
  continue?: string;
  /** Present when the server set it, 0 included (a pointer in Go). */
  remainingItemCount?: number;
  /**
   * How many items were left out for want of a uid or name; present only
   * when some were. A reader that concludes from what a list does not hold
   * (an owner absent from it) cannot use a list with holes.
   */
  dropped?: number;
}

/** The part of a metav1.Status the informer reads; each field only when the JSON form has it. */
export interface StatusSummary {
  code?: number;
  reason?: string;
  message?: string;
}

export interface WatchFrame {
  /** The event type as sent: ADDED, MODIFIED, DELETED, BOOKMARK, ERROR (others are passed through undecoded). */
  type: string;
  /** ADDED/MODIFIED/DELETED: trimMeta of the object's metadata; absent where trimMeta gives undefined. */
  meta?: ObjectMeta;
  /** BOOKMARK: the object's metadata.resourceVersion, when non-empty. */
  resourceVersion?: string;
  /** BOOKMARK: whether annotation k8s.io/initial-events-end is "true" (the end of a watch-list's initial events). */
  initialEventsEnd?: boolean;
  /** ERROR: the Status the server sent. */
  status?: StatusSummary;
}

// ---------------------------------------------------------------------------
// Reading the wire format

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const SGROUP = 3;
const EGROUP = 4;
const I32 = 5;

const WIRE_NAMES = ['varint', 'fixed64', 'length-delimited', 'start-group', 'end-group', 'fixed32'];

const INTERN_MAX_LEN = 128;
const INTERN_MAX_ENTRIES = 8192;
/**
 * Strings that repeat across objects (namespaces, owner references' kinds,
 * apiVersions, names and uids, finalizers) are interned: the informer keeps
 * every object's metadata, and one string per distinct value costs far less
 * than one per occurrence. Keyed by a hash of the bytes, checked byte by byte
 * on a hit, ASCII only (what these fields hold in practice); cleared when full
 * so it stays bounded whatever the input.
 */
const interned = new Map<number, string>();

class Reader {
  readonly buf: Uint8Array;
  /** The same bytes as a Buffer, for its string decoders. */
  private readonly text: Buffer;
  pos: number;
  /** The low and high 32 bits of the last varint read by varint64(). */
  lo = 0;
  hi = 0;
  /** Where the last tag read began, for error messages. */
  tagAt = 0;

  constructor(buf: Uint8Array, pos = 0) {
    this.buf = buf;
    this.text = Buffer.isBuffer(buf)
      ? buf
      : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    this.pos = pos;
  }

  fail(message: string, at: number = this.pos): never {
    throw new ProtobufDecodeError(message, at);
  }

  /** An unsigned varint as a number: exact up to 2^53, larger values only compare as large. */
  uvarint(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    if (pos < end) {
      const b = buf[pos] ?? 0;
      if (b < 0x80) {
        this.pos = pos + 1;
        return b;
      }
    }
    const start = pos;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) this.fail('truncated varint', start);
      const b = buf[pos++] ?? 0;
      value += (b & 0x7f) * scale;
      scale *= 128;
      if (b < 0x80) {
        this.pos = pos;
        return value;
      }
    }
    return this.fail('varint longer than 10 bytes', start);
  }

  /** A 64-bit varint into lo/hi (two's complement, as Go reads int64/int32/bool). */
  varint64(end: number): void {
    const buf = this.buf;
    const start = this.pos;
    let pos = start;
    let lo = 0;
    let hi = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (pos >= end) this.fail('truncated varint', start);
      const b = buf[pos++] ?? 0;
      const bits = b & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (shift - 32); // bits past 64 fall off, as Go's shift drops them
      if (b < 0x80) {
        this.pos = pos;
        this.lo = lo;
        this.hi = hi;
        return;
      }
    }
    this.fail('varint longer than 10 bytes', start);
  }

  /** A signed 64-bit varint; NaN when it is outside the range a number holds exactly. */
  int64(end: number): number {
    this.varint64(end);
    const value = (this.hi | 0) * 4294967296 + (this.lo >>> 0);
    return Number.isSafeInteger(value) ? value : NaN;
  }

  /** Reads a tag (its offset into tagAt); returns field number * 8 + wire type, or -1 at `end`. */
  tag(end: number): number {
    if (this.pos >= end) return -1;
    const at = (this.tagAt = this.pos);
    const t = this.uvarint(end);
    if (t > 0xffffffff) this.fail('field number out of range', at);
    if (t >>> 3 === 0) this.fail('field number 0', at);
    return t;
  }

  /** The length of a length-delimited field, checked against `end`. */
  len(end: number): number {
    const at = this.pos;
    const n = this.uvarint(end);
    if (n > end - this.pos)
      this.fail(`length ${n} runs past the end of its message (${end - this.pos} bytes left)`, at);
    return n;
  }

  /** Skips one field whose tag (at `tagAt`) has been read, as gogo's skipGenerated does. */
  skip(wire: number, end: number, tagAt: number): void {
    switch (wire) {
      case VARINT:
        this.uvarint(end);
        return;
      case I64:
        if (end - this.pos < 8) this.fail('truncated fixed64 field', tagAt);
        this.pos += 8;
        return;
      case LEN: {
        const n = this.len(end);
        this.pos += n;
        return;
      }
      case I32:
        if (end - this.pos < 4) this.fail('truncated fixed32 field', tagAt);
        this.pos += 4;
        return;
      case SGROUP:
        this.skipGroup(end, tagAt);
        return;
      case EGROUP:
        return this.fail('end-group without a start-group', tagAt);
      default:
        return this.fail(`illegal wire type ${wire}`, tagAt);
    }
  }

  /** Skips a (deprecated) group up to its matching end, by a depth count: linear, no recursion. */
  private skipGroup(end: number, tagAt: number): void {
    let depth = 1;
    while (depth > 0) {
      const at = this.pos;
      const t = this.tag(end);
      if (t === -1) this.fail('unterminated group', tagAt);
      const wire = t & 7;
      if (wire === SGROUP) depth++;
      else if (wire === EGROUP) depth--;
      else this.skip(wire, end, at);
    }
  }

  /** Checks that a known field came with the wire type its .proto declares, as gogo does. */
  expect(wire: number, want: number, field: number, message: string, tagAt: number): void {
    if (wire !== want)
      this.fail(
        `${message}.${field}: wire type ${WIRE_NAMES[wire] ?? wire}, expected ${WIRE_NAMES[want]}`,
        tagAt,
      );
  }

  /**
   * Buffer's UTF-8 decoder: 1.5x a TextDecoder's speed on strings this short,
   * and no subarray per string. Invalid bytes become U+FFFD, as they do in
   * the JSON Go's encoder writes.
   */
  str(start: number, end: number): string {
    return this.text.toString('utf8', start, end);
  }

  /** A string likely to repeat: the interned copy when there is one. */
  shared(start: number, end: number): string {
    const n = end - start;
    if (n > INTERN_MAX_LEN) return this.str(start, end);
    const buf = this.buf;
    let h = n;
    for (let i = start; i < end; i++) {
      const c = buf[i] ?? 0;
      if (c >= 0x80) return this.str(start, end);
      h = Math.imul(h ^ c, 0x01000193);
    }
    const hit = interned.get(h);
    if (hit !== undefined && hit.length === n) {
      let i = 0;
      while (i < n && hit.charCodeAt(i) === buf[start + i]) i++;
      if (i === n) return hit;
    }
    // ASCII, as just checked: Latin-1 copies it, faster than decoding UTF-8.
    const s = this.text.toString('latin1', start, end);
    if (interned.size >= INTERN_MAX_ENTRIES) interned.clear();
    interned.set(h, s);
    return s;
  }

  /** Whether bytes [start, end) are exactly `ascii` (ASCII only). */
  equals(start: number, end: number, ascii: string): boolean {
    if (end - start !== ascii.length) return false;
    const buf = this.buf;
    for (let i = 0; i < ascii.length; i++) if (buf[start + i] !== ascii.charCodeAt(i)) return false;
    return true;
  }
}

// ---------------------------------------------------------------------------
// Messages

const MAGIC = [0x6b, 0x38, 0x73, 0x00]; // "k8s\0"

interface Envelope {
  apiVersion: string;
  kind: string;
  rawStart: number;
  rawEnd: number;
}

/** runtime.Unknown after the magic; [start, end) spans the whole body. */
function envelope(r: Reader, start: number, end: number): Envelope {
  if (end - start < MAGIC.length) r.fail('too short for the k8s protobuf magic', start);
  for (let i = 0; i < MAGIC.length; i++)
    if (r.buf[start + i] !== MAGIC[i])
      r.fail('no k8s protobuf magic (expected the bytes 6b 38 73 00)', start);
  if (end - start === MAGIC.length) r.fail('empty body after the magic', start);
  r.pos = start + MAGIC.length;
  const env: Envelope = { apiVersion: '', kind: '', rawStart: -1, rawEnd: -1 };
  let encodingStart = 0;
  let encodingEnd = 0;
  let typeStart = 0;
  let typeEnd = 0;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field >= 1 && field <= 4) {
      r.expect(wire, LEN, field, 'runtime.Unknown', at);
      const n = r.len(end);
      const s = r.pos;
      r.pos += n;
      if (field === 1) typeMeta(r, s, s + n, env);
      else if (field === 2) {
        env.rawStart = s;
        env.rawEnd = s + n;
      } else if (field === 3) {
        encodingStart = s;
        encodingEnd = s + n;
      } else {
        typeStart = s;
        typeEnd = s + n;
      }
    } else r.skip(wire, end, at);
  }
  // Servers always send raw (an empty list's still holds its ListMeta); without it the
  // body was most likely cut short right after the type, not an empty object.
  if (env.rawStart === -1) r.fail(`no object in the envelope (${env.kind || 'no kind'})`, start);
  if (encodingEnd > encodingStart)
    r.fail(`unsupported contentEncoding "${r.str(encodingStart, encodingEnd)}"`, encodingStart);
  if (typeEnd > typeStart && !r.equals(typeStart, typeEnd, PROTOBUF_CONTENT_TYPE))
    r.fail(`embedded contentType "${r.str(typeStart, typeEnd)}" is not protobuf`, typeStart);
  return env;
}

/** runtime.TypeMeta: fields merge into `env` (a repeated message field merges, in gogo). */
function typeMeta(r: Reader, start: number, end: number, env: Envelope): void {
  r.pos = start;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field === 1 || field === 2) {
      r.expect(wire, LEN, field, 'runtime.TypeMeta', at);
      const n = r.len(end);
      const s = r.shared(r.pos, r.pos + n);
      r.pos += n;
      if (field === 1) env.apiVersion = s;
      else env.kind = s;
    } else r.skip(wire, end, at);
  }
  r.pos = end;
}

function expectKind(r: Reader, env: Envelope, apiVersions: readonly string[], kind: string): void {
  if (env.kind !== kind || !apiVersions.includes(env.apiVersion))
    r.fail(
      `expected ${apiVersions[0]} ${kind}, got ${env.apiVersion || '(no apiVersion)'} ${env.kind || '(no kind)'}`,
      env.rawStart,
    );
}

/**
 * ObjectMeta as it accumulates: a message field that appears twice merges
 * (scalars: the last wins; repeated fields: appended), so the same object
 * is filled across occurrences, as gogo's Unmarshal does.
 */
class MetaAcc {
  name = '';
  uid = '';
  namespace = '';
  resourceVersion = '';
  /** The deletionTimestamp as JSON shows it; undefined when absent or the zero time (JSON null). */
  deletion: string | undefined = undefined;
  finalizers: string[] | undefined = undefined;
  owners: OwnerReference[] | undefined = undefined;
  /** Only read for bookmarks: the value of annotation k8s.io/initial-events-end is "true". */
  initialEventsEnd = false;

  reset(): void {
    this.name = '';
    this.uid = '';
    this.namespace = '';
    this.resourceVersion = '';
    this.deletion = undefined;
    this.finalizers = undefined;
    this.owners = undefined;
    this.initialEventsEnd = false;
  }

  /** What trimMeta gives for the JSON form. */
  finish(): ObjectMeta | undefined {
    // JSON omits an empty name and uid, and trimMeta drops an object without either.
    if (!this.uid || !this.name) return undefined;
    const out: ObjectMeta = { uid: this.uid, name: this.name };
    if (this.namespace) out.namespace = this.namespace;
    if (this.resourceVersion) out.resourceVersion = this.resourceVersion;
    if (this.deletion) out.deletionTimestamp = this.deletion;
    if (this.finalizers) out.finalizers = this.finalizers;
    if (this.owners) out.ownerReferences = this.owners;
    return out;
  }
}

/**
 * Wire types of ObjectMeta's fields by number; -1: not a known field (15 and
 * 16 are retired; 17, managedFields, is checked on its own).
 */
const OBJECT_META_WIRE = [
  -1,
  LEN,
  LEN,
  LEN,
  LEN,
  LEN,
  LEN,
  VARINT,
  LEN,
  LEN,
  VARINT,
  LEN,
  LEN,
  LEN,
  LEN,
];
const OBJECT_META_MANAGED_FIELDS = 17;

const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

function objectMeta(r: Reader, start: number, end: number, acc: MetaAcc, bookmark: boolean): void {
  r.pos = start;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    const want = OBJECT_META_WIRE[field] ?? -1;
    if (want === -1) {
      if (field === OBJECT_META_MANAGED_FIELDS) r.expect(wire, LEN, field, 'ObjectMeta', at);
      r.skip(wire, end, at);
      continue;
    }
    r.expect(wire, want, field, 'ObjectMeta', at);
    if (wire === VARINT) {
      r.uvarint(end); // generation, deletionGracePeriodSeconds
      continue;
    }
    const n = r.len(end);
    const s = r.pos;
    const e = s + n;
    switch (field) {
      case 1:
        acc.name = r.str(s, e);
        break;
      case 3:
        acc.namespace = r.shared(s, e);
        break;
      case 5:
        acc.uid = r.str(s, e);
        break;
      case 6:
        acc.resourceVersion = r.str(s, e);
        break;
      case 9:
        acc.deletion = time(r, s, e);
        break;
      case 12:
        if (bookmark) annotation(r, s, e, acc);
        break;
      case 13:
        // Literals, not push onto []: V8 gives a pushed-to array room for 16.
        if (acc.owners) acc.owners.push(ownerReference(r, s, e));
        else acc.owners = [ownerReference(r, s, e)];
        break;
      case 14:
        if (acc.finalizers) acc.finalizers.push(r.shared(s, e));
        else acc.finalizers = [r.shared(s, e)];
        break;
      // 2 generateName, 4 selfLink, 8 creationTimestamp, 11 labels: not kept.
    }
    r.pos = e;
  }
}

/** Seconds from 0001-01-01 to 1970-01-01: Go's zero time, which JSON writes as null. */
const ZERO_TIME_UNIX = -62135596800;

/**
 * metav1.Time: a Timestamp {seconds=1, nanos=2}. metav1's Unmarshal keeps
 * whole seconds only (nanos are dropped: the JSON form never had them), an
 * empty message is the zero time, and each occurrence replaces the last.
 */
function time(r: Reader, start: number, end: number): string | undefined {
  r.pos = start;
  let seconds = 0;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field === 1 || field === 2) {
      r.expect(wire, VARINT, field, 'Timestamp', at);
      if (field === 1) {
        seconds = r.int64(end);
        if (Number.isNaN(seconds)) r.fail('timestamp seconds out of range', at);
      } else r.varint64(end);
    } else r.skip(wire, end, at);
  }
  if (end === start || seconds === ZERO_TIME_UNIX) return undefined;
  return rfc3339(seconds, r, start);
}

/** The largest |seconds| a Date holds; years beyond ±270,000 are no timestamp a server sets. */
const MAX_DATE_SECONDS = 8.64e12;

function pad2(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

/**
 * Formats as Go's time.RFC3339 in UTC: second precision, `Z`, the year
 * zero-padded to four digits, with a minus sign before year 0 and more digits
 * past 9999 (Go's appendInt), not Date.toISOString's six-digit `+`/`-` form.
 */
function rfc3339(seconds: number, r: Reader, at: number): string {
  if (Math.abs(seconds) > MAX_DATE_SECONDS) r.fail('timestamp out of the supported range', at);
  const d = new Date(seconds * 1000);
  const year = d.getUTCFullYear();
  const abs = Math.abs(year);
  const y = abs < 10 ? `000${abs}` : abs < 100 ? `00${abs}` : abs < 1000 ? `0${abs}` : `${abs}`;
  return (
    `${year < 0 ? '-' : ''}${y}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}` +
    `T${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())}Z`
  );
}

/** One annotations map entry {key=1, value=2}; a missing key or value is "", a later entry wins. */
function annotation(r: Reader, start: number, end: number, acc: MetaAcc): void {
  r.pos = start;
  let keyStart = 0;
  let keyEnd = 0;
  let valueStart = 0;
  let valueEnd = 0;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field === 1 || field === 2) {
      r.expect(wire, LEN, field, 'ObjectMeta.annotations entry', at);
      const n = r.len(end);
      if (field === 1) {
        keyStart = r.pos;
        keyEnd = r.pos + n;
      } else {
        valueStart = r.pos;
        valueEnd = r.pos + n;
      }
      r.pos += n;
    } else r.skip(wire, end, at);
  }
  if (r.equals(keyStart, keyEnd, INITIAL_EVENTS_END))
    acc.initialEventsEnd = r.equals(valueStart, valueEnd, 'true');
}

/**
 * OwnerReference {kind=1, name=3, uid=4, apiVersion=5, controller=6,
 * blockOwnerDeletion=7}. The four strings are always in the JSON form (no
 * omitempty); the booleans are pointers: present whenever sent, false included.
 */
function ownerReference(r: Reader, start: number, end: number): OwnerReference {
  r.pos = start;
  let apiVersion = '';
  let kind = '';
  let name = '';
  let uid = '';
  let controller: boolean | undefined;
  let blockOwnerDeletion: boolean | undefined;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    switch (field) {
      case 1:
      case 3:
      case 4:
      case 5: {
        r.expect(wire, LEN, field, 'OwnerReference', at);
        const n = r.len(end);
        const s = r.shared(r.pos, r.pos + n);
        r.pos += n;
        if (field === 1) kind = s;
        else if (field === 3) name = s;
        else if (field === 4) uid = s;
        else apiVersion = s;
        break;
      }
      case 6:
      case 7: {
        r.expect(wire, VARINT, field, 'OwnerReference', at);
        r.varint64(end);
        const b = r.lo !== 0 || r.hi !== 0;
        if (field === 6) controller = b;
        else blockOwnerDeletion = b;
        break;
      }
      default:
        r.skip(wire, end, at);
    }
  }
  // Same key order as the JSON form, so all references share few shapes.
  const ref: OwnerReference = { apiVersion, kind, name, uid };
  if (controller !== undefined) ref.controller = controller;
  if (blockOwnerDeletion !== undefined) ref.blockOwnerDeletion = blockOwnerDeletion;
  return ref;
}

/** PartialObjectMetadata {metadata=1}: every metadata occurrence merges into `acc`. */
function partialObjectMetadata(
  r: Reader,
  start: number,
  end: number,
  acc: MetaAcc,
  bookmark: boolean,
): void {
  r.pos = start;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field === 1) {
      r.expect(wire, LEN, field, 'PartialObjectMetadata', at);
      const n = r.len(end);
      const e = r.pos + n;
      objectMeta(r, r.pos, e, acc, bookmark);
      r.pos = e;
    } else r.skip(wire, end, at);
  }
}

const META_V1 = ['meta.k8s.io/v1'];
/** Status is registered unversioned: its apiVersion is "v1" in what servers send. */
const STATUS_VERSIONS = ['v1', 'meta.k8s.io/v1'];

/**
 * Decodes a metadata-only LIST's body (`Content-Type:
 * application/vnd.kubernetes.protobuf`): the magic, the runtime.Unknown
 * envelope, and a meta.k8s.io/v1 PartialObjectMetadataList in it. Any other
 * kind is refused rather than guessed at.
 */
export function decodePartialObjectMetadataList(bytes: Uint8Array): MetadataList {
  try {
    const r = reader(bytes);
    const env = envelope(r, 0, bytes.length);
    expectKind(r, env, META_V1, 'PartialObjectMetadataList');
    return partialObjectMetadataList(r, env.rawStart, env.rawEnd);
  } catch (err) {
    throw asDecodeError(err);
  }
}

function partialObjectMetadataList(r: Reader, start: number, end: number): MetadataList {
  const items: ObjectMeta[] = [];
  const acc = new MetaAcc();
  let resourceVersion = '';
  let cont = '';
  let remaining: number | undefined;
  let dropped = 0;
  r.pos = start;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field === 1 || field === 2) {
      r.expect(wire, LEN, field, 'PartialObjectMetadataList', at);
      const n = r.len(end);
      const s = r.pos;
      const e = s + n;
      if (field === 2) {
        acc.reset();
        partialObjectMetadata(r, s, e, acc, false);
        const meta = acc.finish();
        if (meta) items.push(meta);
        else dropped++;
      } else {
        // ListMeta {selfLink=1, resourceVersion=2, continue=3, remainingItemCount=4}; merges.
        r.pos = s;
        for (let u = r.tag(e); u !== -1; u = r.tag(e)) {
          const uat = r.tagAt;
          const f = u >>> 3;
          const w = u & 7;
          if (f >= 1 && f <= 3) {
            r.expect(w, LEN, f, 'ListMeta', uat);
            const m = r.len(e);
            if (f === 2) resourceVersion = r.str(r.pos, r.pos + m);
            else if (f === 3) cont = r.str(r.pos, r.pos + m);
            r.pos += m;
          } else if (f === 4) {
            r.expect(w, VARINT, f, 'ListMeta', uat);
            remaining = r.int64(e);
            if (Number.isNaN(remaining)) r.fail('remainingItemCount out of range', uat);
          } else r.skip(w, e, uat);
        }
      }
      r.pos = e;
    } else r.skip(wire, end, at);
  }
  const list: MetadataList = { items, resourceVersion };
  if (cont) list.continue = cont;
  if (remaining !== undefined) list.remainingItemCount = remaining;
  if (dropped > 0) list.dropped = dropped;
  return list;
}

/**
 * Decodes one watch frame (as FrameReader yields them): a metav1.WatchEvent
 * whose object is a `k8s\0` body. ADDED/MODIFIED/DELETED carry trimmed
 * metadata, BOOKMARK its resourceVersion and initial-events-end annotation,
 * ERROR the Status. An event without an object is malformed (client-go
 * fails to decode it too); an unknown type is returned with nothing else.
 */
export function decodeWatchFrame(frame: Uint8Array): WatchFrame {
  try {
    return watchFrame(frame);
  } catch (err) {
    throw asDecodeError(err);
  }
}

/** Reused across frames (decoding is synchronous): one less allocation per event. */
const frameAcc = new MetaAcc();

function watchFrame(frame: Uint8Array): WatchFrame {
  const r = reader(frame);
  const end = frame.length;
  let typeStart = -1;
  let typeEnd = -1;
  let rawStart = -1;
  let rawEnd = -1;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field === 1 || field === 2) {
      r.expect(wire, LEN, field, 'WatchEvent', at);
      const n = r.len(end);
      const s = r.pos;
      const e = s + n;
      if (field === 1) {
        typeStart = s;
        typeEnd = e;
      } else {
        // RawExtension {raw=1}; a second object field merges: its raw, if any, wins.
        for (let u = r.tag(e); u !== -1; u = r.tag(e)) {
          const uat = r.tagAt;
          const f = u >>> 3;
          const w = u & 7;
          if (f === 1) {
            r.expect(w, LEN, f, 'RawExtension', uat);
            const m = r.len(e);
            rawStart = r.pos;
            rawEnd = r.pos + m;
            r.pos += m;
          } else r.skip(w, e, uat);
        }
      }
      r.pos = e;
    } else r.skip(wire, end, at);
  }
  const type = typeStart === -1 ? '' : eventType(r, typeStart, typeEnd);
  const known =
    type === 'ADDED' ||
    type === 'MODIFIED' ||
    type === 'DELETED' ||
    type === 'BOOKMARK' ||
    type === 'ERROR';
  if (!known) return { type };
  if (rawStart === -1) r.fail(`${type} event without an object`, 0);
  const env = envelope(r, rawStart, rawEnd);
  if (type === 'ERROR') {
    expectKind(r, env, STATUS_VERSIONS, 'Status');
    return { type, status: status(r, env.rawStart, env.rawEnd) };
  }
  expectKind(r, env, META_V1, 'PartialObjectMetadata');
  const acc = frameAcc;
  acc.reset();
  const bookmark = type === 'BOOKMARK';
  partialObjectMetadata(r, env.rawStart, env.rawEnd, acc, bookmark);
  if (bookmark) {
    const out: WatchFrame = { type, initialEventsEnd: acc.initialEventsEnd };
    if (acc.resourceVersion) out.resourceVersion = acc.resourceVersion;
    return out;
  }
  const meta = acc.finish();
  return meta ? { type, meta } : { type };
}

const EVENT_TYPES = ['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR'];

function eventType(r: Reader, start: number, end: number): string {
  for (const t of EVENT_TYPES) if (r.equals(start, end, t)) return t;
  return r.str(start, end);
}

/**
 * Decodes a metav1.Status body (`k8s\0` envelope): what a server sends on an
 * error to a request whose Accept put protobuf first without a transform
 * (e.g. a 406 for a custom resource asked for plain protobuf).
 */
export function decodeStatus(bytes: Uint8Array): StatusSummary {
  try {
    const r = reader(bytes);
    const env = envelope(r, 0, bytes.length);
    expectKind(r, env, STATUS_VERSIONS, 'Status');
    return status(r, env.rawStart, env.rawEnd);
  } catch (err) {
    throw asDecodeError(err);
  }
}

/** Status {metadata=1, status=2, message=3, reason=4, details=5, code=6}: code/reason/message, omitted when empty as in JSON. */
function status(r: Reader, start: number, end: number): StatusSummary {
  let code = 0;
  let reason = '';
  let message = '';
  r.pos = start;
  for (let t = r.tag(end); t !== -1; t = r.tag(end)) {
    const at = r.tagAt;
    const field = t >>> 3;
    const wire = t & 7;
    if (field >= 1 && field <= 5) {
      r.expect(wire, LEN, field, 'Status', at);
      const n = r.len(end);
      if (field === 3) message = r.str(r.pos, r.pos + n);
      else if (field === 4) reason = r.str(r.pos, r.pos + n);
      r.pos += n;
    } else if (field === 6) {
      r.expect(wire, VARINT, field, 'Status', at);
      r.varint64(end);
      code = r.lo | 0; // int32: Go keeps the low 32 bits
    } else r.skip(wire, end, at);
  }
  const out: StatusSummary = {};
  if (code) out.code = code;
  if (reason) out.reason = reason;
  if (message) out.message = message;
  return out;
}

function reader(bytes: Uint8Array): Reader {
  if (!(bytes instanceof Uint8Array))
    throw new ProtobufDecodeError('input is not a Uint8Array', -1);
  return new Reader(bytes);
}

/** Whatever goes wrong inside (a RangeError on absurd input, say) surfaces as a ProtobufDecodeError. */
function asDecodeError(err: unknown): ProtobufDecodeError {
  if (err instanceof ProtobufDecodeError) return err;
  return new ProtobufDecodeError(`decoder failure: ${(err as Error)?.message ?? String(err)}`, -1);
}

// ---------------------------------------------------------------------------
// Watch stream framing

/** The largest watch frame accepted; a bigger length prefix means a corrupt stream (or no protobuf one). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

/**
 * Splits a protobuf watch stream into frames: a 4-byte big-endian length,
 * then that many bytes (k8s.io/apimachinery/pkg/util/framer), across any
 * chunk boundaries. A frame that lies inside one chunk is returned as a view
 * of it (no copy), so chunks must not be reused or changed by the caller
 * while their frames are in use; a frame split across chunks is assembled
 * into its own buffer.
 */
export class FrameReader {
  private readonly maxFrameBytes: number;
  private readonly header = new Uint8Array(4);
  private headerFill = 0;
  private body: Uint8Array | undefined;
  private bodyFill = 0;
  /** Stream offset of the next byte pushed, for error messages. */
  private offset = 0;
  private failure: ProtobufDecodeError | undefined;

  constructor(maxFrameBytes = MAX_FRAME_BYTES) {
    this.maxFrameBytes = maxFrameBytes;
  }

  /** Bytes held for an incomplete frame (its header included). */
  get buffered(): number {
    return this.body ? 4 + this.bodyFill : this.headerFill;
  }

  /** The frames completed by `chunk`, in order. Throws ProtobufDecodeError on an oversized frame, and again on any push after. */
  push(chunk: Uint8Array): Uint8Array[] {
    if (this.failure) throw this.failure;
    const frames: Uint8Array[] = [];
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      if (!this.body) {
        let length: number;
        const at = this.offset + i - this.headerFill;
        if (this.headerFill === 0 && n - i >= 4) {
          length =
            (((chunk[i] ?? 0) << 24) |
              ((chunk[i + 1] ?? 0) << 16) |
              ((chunk[i + 2] ?? 0) << 8) |
              (chunk[i + 3] ?? 0)) >>>
            0;
          i += 4;
        } else {
          while (this.headerFill < 4 && i < n) this.header[this.headerFill++] = chunk[i++] ?? 0;
          if (this.headerFill < 4) break;
          const h = this.header;
          length =
            (((h[0] ?? 0) << 24) | ((h[1] ?? 0) << 16) | ((h[2] ?? 0) << 8) | (h[3] ?? 0)) >>> 0;
          this.headerFill = 0;
        }
        if (length > this.maxFrameBytes) {
          this.failure = new ProtobufDecodeError(
            `watch frame of ${length} bytes exceeds the ${this.maxFrameBytes}-byte limit`,
            at,
          );
          throw this.failure;
        }
        if (n - i >= length) {
          frames.push(chunk.subarray(i, i + length));
          i += length;
          continue;
        }
        // A Buffer, so the decoder reads its strings without making a view of it.
        this.body = Buffer.allocUnsafe(length);
        this.bodyFill = 0;
      }
      const body = this.body;
      const take = Math.min(body.length - this.bodyFill, n - i);
      body.set(chunk.subarray(i, i + take), this.bodyFill);
      this.bodyFill += take;
      i += take;
      if (this.bodyFill === body.length) {
        frames.push(body);
        this.body = undefined;
      }
    }
    this.offset += n;
    return frames;
  }

  /** At the end of the stream: throws if it stopped inside a frame (a truncated stream). */
  end(): void {
    if (this.failure) throw this.failure;
    if (this.buffered > 0)
      throw new ProtobufDecodeError(
        this.body
          ? `stream ended inside a ${this.body.length}-byte frame (${this.bodyFill} bytes of it read)`
          : `stream ended inside a frame header (${this.headerFill} of 4 bytes)`,
        this.offset,
      );
  }
}
