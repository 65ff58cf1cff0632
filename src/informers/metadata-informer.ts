// A metadata-only informer for one resource: a streaming watch-list (the
// objects as initial events of a watch, ended by a bookmark, as client-go's
// reflector does by default since 1.35), or a paginated LIST where the server
// refuses that, then WATCH from the list's resourceVersion with bookmarks;
// resumes after stream ends, lists again on 410 Gone, reconnects with backoff
// on errors and restarts a stream that has gone silent. It keeps no objects:
// only the set of UIDs it has reported, so that a re-list can report what
// vanished meanwhile.
import { type KubeClient } from '../api/client.ts';
import { ApiError } from '../api/errors.ts';
import { METADATA_ACCEPT, METADATA_LIST_ACCEPT } from '../api/request.ts';
import {
  decodePartialObjectMetadataList,
  decodeWatchFrame,
  isProtobufContentType,
  ProtobufDecodeError,
  PROTOBUF_METADATA_ACCEPT,
  PROTOBUF_METADATA_LIST_ACCEPT,
  type MetadataList,
  type WatchFrame,
} from '../api/protobuf-meta.ts';
import {
  collectionPath,
  groupResource,
  trimMeta,
  type ObjectMeta,
  type RawMeta,
  type ResourceInfo,
} from '../api/resources.ts';
import { KUBE_APISERVER_STORAGE } from '../api/discovery.ts';
import type { Logger } from '../log.ts';

export type InformerEvent =
  | { type: 'upsert'; resource: ResourceInfo; meta: ObjectMeta }
  | { type: 'delete'; resource: ResourceInfo; meta: ObjectMeta };

export interface InformerOptions {
  pageSize: number;
  /**
   * Ask for metadata as protobuf first (as client-go's metadata client
   * does), JSON as the server's fallback: decoded without JSON.parse and
   * without materialising managedFields. A resource whose protobuf answer
   * cannot be decoded uses JSON from then on.
   */
  protobuf: boolean;
  /**
   * List with a watch-list (watch, sendInitialEvents=true): one stream
   * instead of a page at a time, no whole page held as one string, and the
   * same connection goes on as the watch. Off, or refused by the server, it
   * is the paginated LIST.
   */
  watchList: boolean;
  /**
   * A watch-list whose stream stays silent this long before its
   * initial-events-end bookmark is given up for the paginated LIST: a server
   * that ignores sendInitialEvents would never send that bookmark.
   */
  watchListQuietMs: number;
  /**
   * A watch-list that has not ended its initial events this long after its
   * stream opened is given up for the paginated LIST, however busy the
   * stream: a server that ignores sendInitialEvents but streams events all
   * the time is never silent for watchListQuietMs.
   */
  watchListDeadlineMs: number;
  /** Server-side watch timeout range; each watch picks a random value in it (as client-go does). */
  minWatchTimeoutSec: number;
  /** A stream silent this long past its timeout is restarted. */
  watchdogGraceMs: number;
  maxBackoffMs: number;
  /**
   * Called for each watch line that is not a JSON event (the watch then
   * restarts from the last good resourceVersion); for the metrics.
   */
  onMalformedWatchEvent?: (groupResource: string) => void;
  /**
   * The storage this resource's resourceVersions count (see
   * resourceVersionStorage in src/api/discovery.ts); asked at each
   * caughtUp(). Default: kube-apiserver's own, which the GarbageCollector
   * never relies on (it always says).
   */
  storage?: () => string;
}

export const DEFAULT_INFORMER_OPTIONS: InformerOptions = {
  pageSize: 500,
  protobuf: true,
  watchList: true,
  watchListQuietMs: 10_000,
  // Two minutes: a watch-list is served from the watch cache and sends even
  // a large resource (100k objects, ~100 MB of metadata) in seconds to tens of
  // seconds, and each page of the LIST it replaces has the API server's 60 s
  // request timeout. It must also end before the server's own watch timeout
  // (minWatchTimeoutSec, 5 min and more), or a server that ignores
  // sendInitialEvents would end each stream first and every next round would
  // be a watch-list again.
  watchListDeadlineMs: 120_000,
  minWatchTimeoutSec: 300,
  watchdogGraceMs: 60_000,
  maxBackoffMs: 10_000,
};

class GoneError extends Error {}

/** A JSON list answer as the protobuf decoder gives it: trimmed metadata, in order. */
function jsonList(body: Buffer): MetadataList {
  const page = JSON.parse(body.toString('utf8')) as {
    metadata?: { resourceVersion?: string; continue?: string };
    items?: { metadata?: RawMeta }[];
  };
  const items: ObjectMeta[] = [];
  let dropped = 0;
  for (const item of page.items ?? []) {
    const meta = trimMeta(item.metadata);
    if (meta) items.push(meta);
    else dropped++;
  }
  return {
    items,
    resourceVersion: page.metadata?.resourceVersion ?? '',
    continue: page.metadata?.continue || undefined,
    ...(dropped > 0 ? { dropped } : {}),
  };
}

/** A metadata-only list page, protobuf or JSON as the Content-Type says (a request's `decode`). */
export function decodeMetadataList(body: Buffer, contentType: string | undefined): MetadataList {
  return isProtobufContentType(contentType)
    ? decodePartialObjectMetadataList(body)
    : jsonList(body);
}

/** A JSON watch line as the protobuf decoder gives a frame; null when it is no JSON event. */
function jsonWatchEvent(line: string): WatchFrame | null {
  let ev: unknown;
  try {
    ev = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof ev !== 'object' || ev === null) return null;
  const { type, object: obj } = ev as {
    type?: unknown;
    object?: { metadata?: RawMeta; code?: number; reason?: string; message?: string };
  };
  const frame: WatchFrame = { type: typeof type === 'string' ? type : '' };
  switch (frame.type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED': {
      const meta = trimMeta(obj?.metadata);
      if (meta) frame.meta = meta;
      break;
    }
    case 'BOOKMARK':
      if (obj?.metadata?.resourceVersion) frame.resourceVersion = obj.metadata.resourceVersion;
      frame.initialEventsEnd = obj?.metadata?.annotations?.[INITIAL_EVENTS_END] === 'true';
      break;
    case 'ERROR':
      frame.status = { code: obj?.code, reason: obj?.reason, message: obj?.message };
      break;
  }
  return frame;
}

/** The annotation on the bookmark that ends a watch-list's initial events. */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

/**
 * A watch-list the server will not serve: the request is invalid to it (the
 * WatchList gate off, a server that predates it: 400/422), or not
 * implemented. Auth, missing resources, 410, throttling and 5xx are the
 * ordinary failures they would be for a LIST.
 */
function refusesWatchList(err: unknown): boolean {
  if (!(err instanceof ApiError)) return false;
  const s = err.status;
  return s === 501 || (s >= 400 && s < 500 && ![401, 403, 404, 408, 410, 429].includes(s));
}

/**
 * Orders two resourceVersions of the same etcd (both decimal revisions, as
 * kube-apiserver gives them and KEP-5504 makes comparable); NaN when either is
 * not decimal, which no comparison accepts. It cannot tell two storages apart:
 * an aggregated API server's own counter may well be decimal, and its numbers
 * say nothing about etcd's (see MetadataInformer.caughtUp).
 */
export function compareResourceVersions(a: string | undefined, b: string | undefined): number {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return Number.NaN;
  const x = BigInt(a);
  const y = BigInt(b);
  return x === y ? 0 : x < y ? -1 : 1;
}

/** What an informer has reported of one resource: see MetadataInformer.known. */
export interface KnownObjects {
  uids: Set<string>;
}

export class MetadataInformer {
  readonly resource: ResourceInfo;
  private readonly client: KubeClient;
  private readonly sink: (e: InformerEvent) => void;
  private readonly log: Logger;
  private readonly opts: InformerOptions;
  /**
   * The UIDs reported and not yet reported deleted. Owned by the caller when
   * given, so that an informer replacing another for the same resource (a
   * new preferred version, a group back in discovery) inherits what its
   * predecessor reported, and its first LIST reports what was deleted while
   * nobody watched.
   */
  private readonly known: KnownObjects;
  private resourceVersion: string | undefined;
  /** The server refused a watch-list (or never ended one): list with pages from now on. */
  private pagedList: boolean;
  /** Metadata asked for as protobuf (see InformerOptions.protobuf). */
  private protobuf: boolean;
  private running = false;
  private abort: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private syncedOnce = false;
  private syncWaiters: (() => void)[] = [];
  /** Last time anything arrived on the stream (or a list finished); for the watchdog and health. */
  lastActivity = Date.now();
  /** Consecutive failures of list/watch; 0 while healthy. */
  failures = 0;
  /**
   * True from start until a watch stream opens from a known resourceVersion
   * (or a watch-list ends its initial events), and again from any stream end
   * (a failure, 410, a malformed line, a silent stream, or the server's
   * normal timeout) until the next one opens: while true, no stream is
   * delivering, so nothing can be concluded from what has been delivered.
   */
  private gap = true;
  lastError: string | undefined;
  /**
   * The last list or watch was refused (401/403: RBAC, or an expired
   * credential) and nothing has been allowed since. No retry repairs that, so
   * it counts as stalled at once, for the operator to see.
   */
  forbidden = false;

  constructor(
    client: KubeClient,
    resource: ResourceInfo,
    sink: (e: InformerEvent) => void,
    log: Logger,
    opts: Partial<InformerOptions> = {},
    known: KnownObjects = { uids: new Set() },
  ) {
    this.known = known;
    this.client = client;
    this.resource = resource;
    this.sink = sink;
    this.log = log;
    this.opts = { ...DEFAULT_INFORMER_OPTIONS, ...opts };
    this.pagedList = !this.opts.watchList;
    this.protobuf = this.opts.protobuf;
  }

  get synced(): boolean {
    return this.syncedOnce;
  }

  /**
   * No event, bookmark, list or normally ended stream for longer than two full
   * watch cycles plus the watchdog grace: the watch is stalled beyond what
   * the watchdog could repair (e.g. the API server keeps failing).
   */
  stalled(now = Date.now()): boolean {
    return (
      this.forbidden ||
      now - this.lastActivity >
        2 * (2 * this.opts.minWatchTimeoutSec * 1000) + this.opts.watchdogGraceMs
    );
  }

  /**
   * Has this informer delivered every event of its resource up to
   * resourceVersion `rv`? Only with a stream open (no gap) that continues
   * from what was delivered before, and only once it has delivered an event
   * or a bookmark, or finished a list, at or past `rv`. Time proves nothing:
   * an open watch can be behind (a busy stream, a replay, a watch cache that
   * lags). The orphan worker asks before it lets an Orphan-deleted owner go
   * (upstream #26120): a dependent it has not been shown would otherwise be
   * found later, its owner gone, and deleted.
   *
   * `rvStorage` is the storage `rv` counts (the owner's resource's, see
   * resourceVersionStorage). Unless it is this resource's, the answer is
   * false: the versions of an aggregated API server come from its own
   * counter, and a watch of it at "1000000" may not have delivered what was
   * created there a moment ago, whatever etcd's revision. A version that is
   * not decimal never counts either.
   */
  caughtUp(rv: string | undefined, rvStorage: string = KUBE_APISERVER_STORAGE): boolean {
    if (!this.syncedOnce || this.gap || rv === undefined) return false;
    if ((this.opts.storage?.() ?? KUBE_APISERVER_STORAGE) !== rvStorage) return false;
    return compareResourceVersions(this.resourceVersion, rv) >= 0;
  }

  /** Resolves once the first LIST has been delivered. */
  waitForSync(): Promise<void> {
    if (this.syncedOnce) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.gap = true;
    this.abort?.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    let backoff = 250;
    while (this.running) {
      try {
        const started = Date.now();
        if (this.resourceVersion === undefined && !this.pagedList) {
          // Lists and then goes on watching; a stream that ends before the
          // initial-events-end bookmark leaves resourceVersion unset, so the
          // next round lists again from scratch.
          try {
            await this.watch(undefined);
          } catch (err) {
            if (!refusesWatchList(err)) throw err;
            this.useListPages((err as Error).message);
            continue;
          }
        } else {
          if (this.resourceVersion === undefined) this.resourceVersion = await this.list();
          await this.watch(this.resourceVersion);
        }
        this.failures = 0;
        // A stream that ends at once, again and again, must not become a hot loop.
        if (Date.now() - started < 1000 && this.running) {
          await this.pause(backoff);
          backoff = Math.min(backoff * 2, this.opts.maxBackoffMs);
        } else backoff = 250;
      } catch (err) {
        this.gap = true;
        if (!this.running) break;
        if (err instanceof GoneError) {
          this.log.info('watch expired (410 Gone); listing again', {
            resource: this.resource.resource,
            group: this.resource.group,
          });
          this.resourceVersion = undefined;
          continue;
        }
        this.failures++;
        this.lastError = (err as Error).message;
        this.forbidden = err instanceof ApiError && (err.status === 401 || err.status === 403);
        this.log.warn('list/watch failed; retrying', {
          resource: this.resource.resource,
          group: this.resource.group,
          error: this.lastError,
          retryInMs: backoff,
        });
        await this.pause(backoff);
        backoff = Math.min(backoff * 2, this.opts.maxBackoffMs);
      }
    }
  }

  private useListPages(reason: string): void {
    this.pagedList = true;
    this.log.info('watch-list not served; listing with pages instead', {
      resource: this.resource.resource,
      group: this.resource.group,
      reason: reason.slice(0, 200),
    });
  }

  /** The first list is in: waitForSync() resolves. */
  private markSynced(): void {
    this.lastActivity = Date.now();
    this.forbidden = false;
    if (!this.syncedOnce) {
      this.syncedOnce = true;
      for (const w of this.syncWaiters.splice(0)) w();
    }
  }

  /**
   * Reports the deletes a completed list implies: what was known and is no
   * longer there. Known is everything ever handed to the sink and not
   * reported deleted, including what a list that did not complete delivered
   * (see sinkListed()), as client-go's Replace deletes all the store holds
   * that is not in the new list.
   */
  private listed(seen: Set<string>): void {
    for (const uid of this.known.uids) {
      if (!seen.has(uid))
        this.sink({ type: 'delete', resource: this.resource, meta: { uid, name: '' } });
    }
    this.known.uids = seen;
    this.markSynced();
  }

  /**
   * An object of a list in progress: known from now on, whether or not this
   * list completes, so that a later complete list without it reports it
   * deleted. (Known only once a list completed, an object delivered by a
   * broken list and deleted before the next one would stay in the graph,
   * alive, for ever.)
   */
  private sinkListed(meta: ObjectMeta): void {
    this.known.uids.add(meta.uid);
    this.sink({ type: 'upsert', resource: this.resource, meta });
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms * (0.8 + Math.random() * 0.4));
      this.abort = new AbortController();
      this.abort.signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** A full, paginated, metadata-only LIST; reports upserts and the deletes it implies. */
  private async list(): Promise<string> {
    const path = collectionPath(this.resource);
    const seen = new Set<string>();
    let cont: string | undefined;
    let rv = '';
    do {
      let page: MetadataList;
      try {
        page = await this.client.request<MetadataList>('GET', path, {
          accept: this.protobuf ? PROTOBUF_METADATA_LIST_ACCEPT : METADATA_LIST_ACCEPT,
          query: { limit: this.opts.pageSize, continue: cont },
          verb: 'LIST',
          decode: decodeMetadataList,
        });
      } catch (err) {
        // An expired continue token: start the list again from the top.
        if (err instanceof ApiError && err.status === 410 && cont) {
          cont = undefined;
          seen.clear();
          continue;
        }
        // Nothing of an undecodable page was delivered: list again, as JSON.
        if (err instanceof ProtobufDecodeError) {
          this.useJson(err.message);
          cont = undefined;
          seen.clear();
          continue;
        }
        throw err;
      }
      if (!this.running) return rv;
      for (const meta of page.items) {
        seen.add(meta.uid);
        this.sinkListed(meta);
      }
      rv = page.resourceVersion || rv;
      cont = page.continue || undefined;
    } while (cont);
    this.listed(seen);
    return rv;
  }

  /**
   * A line that is no JSON event (a proxy's error page, a truncated write):
   * skip it and what follows it on this stream, and watch again from the last
   * event that was understood, as client-go's reflector does after a decode error.
   */
  private malformed(line: string): void {
    this.lastError = 'malformed watch event';
    this.gap = true;
    this.log.warn('malformed watch event; watching again from the last good resourceVersion', {
      resource: this.resource.resource,
      group: this.resource.group,
      resourceVersion: this.resourceVersion,
      line: line.slice(0, 200),
    });
    this.opts.onMalformedWatchEvent?.(groupResource(this.resource));
  }

  /**
   * This resource's protobuf could not be decoded (a server that answers
   * another kind of object, a corrupt stream): JSON, which every server
   * serves, from now on. What was delivered before stays; the caller
   * restarts the list or watch, as after a malformed JSON line.
   */
  private useJson(reason: string): void {
    if (!this.protobuf) return;
    this.protobuf = false;
    this.log.warn('protobuf answer not understood; reading this resource as JSON from now on', {
      resource: this.resource.resource,
      group: this.resource.group,
      error: reason.slice(0, 300),
    });
  }

  /**
   * Watches from `fromVersion`; without one, as a watch-list: the server
   * sends every object as an ADDED event (a consistent snapshot, as a LIST
   * without resourceVersion is), then a bookmark annotated
   * k8s.io/initial-events-end at the snapshot's resourceVersion, then what
   * happens after it, on the same stream.
   */
  private async watch(fromVersion: string | undefined): Promise<void> {
    const st: WatchStream = {
      listing: fromVersion === undefined ? { seen: new Set() } : undefined,
      gone: false,
      abort: new AbortController(),
      started: Date.now(),
      timeoutSec: Math.round(this.opts.minWatchTimeoutSec * (1 + Math.random())),
    };
    this.abort = st.abort;
    // stop() may have come while the LIST was in flight: it aborted nothing
    // then, and a watch opened now would hold stop() for a whole watch cycle.
    if (!this.running) return;
    const watchdog = this.startWatchdog(st);
    const quiet = st.listing ? this.startWatchListDeadline(st) : undefined;
    try {
      await this.client.stream(
        collectionPath(this.resource),
        {
          accept: this.protobuf ? PROTOBUF_METADATA_ACCEPT : METADATA_ACCEPT,
          query: watchQuery(st, fromVersion),
          signal: st.abort.signal,
        },
        () => {
          // Allowed; but a watch-list has no gap-free view until its initial events are in.
          this.forbidden = false;
          // A watch from a known resourceVersion replays everything after
          // it: from here on, what it delivers continues what was delivered.
          if (this.gap && !st.listing) this.gap = false;
        },
        (line) => this.onJsonLine(st, line),
        (frame) => this.onProtobufFrame(st, frame),
      );
    } catch (err) {
      if (err instanceof ApiError && err.status === 410) throw new GoneError();
      // The stream stopped inside a frame, or sent one past the size limit: an event lost.
      if (err instanceof ProtobufDecodeError) {
        this.malformed(`(protobuf stream) ${err.message}`);
        this.useJson(err.message);
      } else throw err;
    } finally {
      clearInterval(watchdog);
      clearInterval(quiet);
    }
    // No stream is delivering until the next one opens, however this one ended.
    this.gap = true;
    if (st.gone) throw new GoneError();
    // A stream that ran to its end (server timeout) shows the resource is being watched.
    if (!st.abort.signal.aborted) this.lastActivity = Date.now();
  }

  /** Restarts a stream that has said nothing (not even a bookmark) well past its timeout. */
  private startWatchdog(st: WatchStream): NodeJS.Timeout {
    const watchdog = setInterval(
      () => {
        if (
          Date.now() - Math.max(st.started, this.lastActivity) >
          st.timeoutSec * 1000 + this.opts.watchdogGraceMs
        ) {
          this.gap = true;
          this.log.warn('watch stream silent; restarting it', {
            resource: this.resource.resource,
            group: this.resource.group,
          });
          st.abort.abort();
        }
      },
      Math.min(this.opts.watchdogGraceMs, 30_000),
    );
    watchdog.unref();
    return watchdog;
  }

  /**
   * A watch-list whose initial-events-end bookmark does not come (a server
   * without the feature sends the events and then nothing): paged LISTs instead.
   */
  private startWatchListDeadline(st: WatchStream): NodeJS.Timeout {
    const quietMs = this.opts.watchListQuietMs;
    const deadlineMs = this.opts.watchListDeadlineMs;
    const quiet = setInterval(
      () => {
        if (!st.listing) return;
        const now = Date.now();
        if (now - st.started > deadlineMs)
          this.useListPages(`no initial-events-end bookmark within ${deadlineMs} ms`);
        else if (now - Math.max(st.started, this.lastActivity) > quietMs)
          this.useListPages(`no initial-events-end bookmark after ${quietMs} ms of silence`);
        else return;
        st.abort.abort();
      },
      Math.max(10, Math.min(quietMs / 4, deadlineMs / 4, 1000)),
    );
    quiet.unref();
    return quiet;
  }

  private onJsonLine(st: WatchStream, line: string): void {
    this.lastActivity = Date.now();
    if (st.gone) return;
    const ev = jsonWatchEvent(line);
    if (!ev) {
      this.malformed(line);
      st.abort.abort();
      return;
    }
    this.onEvent(st, ev);
  }

  private onProtobufFrame(st: WatchStream, frame: Uint8Array): void {
    this.lastActivity = Date.now();
    if (st.gone) return;
    let ev: WatchFrame;
    try {
      ev = decodeWatchFrame(frame);
    } catch (err) {
      if (!(err instanceof ProtobufDecodeError)) throw err;
      this.malformed(`(protobuf frame of ${frame.length} bytes) ${err.message}`);
      this.useJson(err.message);
      st.abort.abort();
      return;
    }
    this.onEvent(st, ev);
  }

  private onEvent(st: WatchStream, ev: WatchFrame): void {
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED':
      case 'DELETED':
        if (ev.meta) this.onObjectEvent(st, ev.type, ev.meta);
        return;
      case 'BOOKMARK':
        this.onBookmark(st, ev);
        return;
      case 'ERROR':
        this.gap = true;
        if (ev.status?.code === 410) st.gone = true;
        else this.lastError = ev.status?.message;
        st.abort.abort();
        return;
    }
  }

  private onObjectEvent(
    st: WatchStream,
    type: 'ADDED' | 'MODIFIED' | 'DELETED',
    meta: ObjectMeta,
  ): void {
    if (st.listing) {
      // Initial events come in key order, not resourceVersion order:
      // none of theirs is a point to resume from.
      if (type === 'DELETED') {
        st.listing.seen.delete(meta.uid);
        this.known.uids.delete(meta.uid);
        this.sink({ type: 'delete', resource: this.resource, meta });
      } else {
        st.listing.seen.add(meta.uid);
        this.sinkListed(meta);
      }
      return;
    }
    if (meta.resourceVersion) this.resourceVersion = meta.resourceVersion;
    if (type === 'DELETED') this.known.uids.delete(meta.uid);
    else this.known.uids.add(meta.uid);
    this.sink({ type: type === 'DELETED' ? 'delete' : 'upsert', resource: this.resource, meta });
  }

  private onBookmark(st: WatchStream, ev: WatchFrame): void {
    const rv = ev.resourceVersion;
    if (st.listing) {
      // Only the bookmark that ends the initial events ends the list.
      if (!ev.initialEventsEnd || !rv) return;
      const { seen } = st.listing;
      st.listing = undefined;
      this.resourceVersion = rv;
      this.listed(seen);
      this.gap = false;
      return;
    }
    if (rv) this.resourceVersion = rv;
  }
}

/** One watch stream's own state, shared by its callbacks. */
interface WatchStream {
  /** While set, the stream is still delivering a watch-list's initial events. */
  listing: { seen: Set<string> } | undefined;
  /** The server said 410 Gone: a new list is needed. */
  gone: boolean;
  abort: AbortController;
  started: number;
  timeoutSec: number;
}

function watchQuery(
  st: WatchStream,
  fromVersion: string | undefined,
): Record<string, string | number | boolean | undefined> {
  return st.listing
    ? {
        watch: true,
        sendInitialEvents: true,
        resourceVersionMatch: 'NotOlderThan',
        allowWatchBookmarks: true,
        timeoutSeconds: st.timeoutSec,
      }
    : {
        watch: true,
        allowWatchBookmarks: true,
        resourceVersion: fromVersion,
        timeoutSeconds: st.timeoutSec,
      };
}
