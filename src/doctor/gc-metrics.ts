// `kubegc doctor --gc-metrics URL`: the view of a running kubegc controller
// beside the cluster scan. One GET of its /metrics (HTTPS behind
// TokenReview/SubjectAccessReview, so with a bearer token), from which the
// work queues by lane are read: how much user work waits and for how long,
// how big the housekeeping backlog is, and which requests wait for the
// client-side rate limiter. A scan finds what is leaked; this says whether
// the GC is busy collecting it, or behind on what users asked for.
import http from 'node:http';
import https from 'node:https';
import { LANES, type Lane } from '../api/lanes.ts';

export interface GcLaneView {
  /** The work queue (`garbage_collector_attempt_to_delete`, ...). */
  queue: string;
  lane: Lane;
  /** Keys waiting for a worker in that lane. */
  waiting: number;
  /** How long the oldest of them has waited there (0: none waits). */
  oldestWaitingSeconds: number;
}

export interface GcView {
  url: string;
  /** Whether that replica leads (only the leader's queues are drained); null if it does not say. */
  leader: boolean | null;
  lanes: GcLaneView[];
  /** Requests waiting for a token of its client-side rate limiter, by lane; null if it does not say. */
  rateLimited: Record<Lane, number> | null;
  /** Why it could not be read (then nothing else is known). */
  error?: string;
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of the Prometheus text format (comments and malformed lines skipped). */
export function parsePrometheusText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] ?? ''] = (l[2] ?? '').replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1] ?? '', labels, value: Number(m[3]) });
  }
  return out;
}

function isLane(s: string | undefined): s is Lane {
  return s === 'user' || s === 'housekeeping';
}

/** What a running controller's /metrics says about its lanes. */
export function parseGcMetrics(url: string, text: string): GcView {
  const all = parsePrometheusText(text);
  const leader = all.find((s) => s.name === 'kubegc_leader');
  const lanes = new Map<string, GcLaneView>();
  const laneOf = (s: Sample): GcLaneView | undefined => {
    const queue = s.labels.name;
    const lane = s.labels.lane;
    if (queue === undefined || !isLane(lane)) return undefined;
    const key = `${queue}/${lane}`;
    let v = lanes.get(key);
    if (!v) lanes.set(key, (v = { queue, lane, waiting: 0, oldestWaitingSeconds: 0 }));
    return v;
  };
  let rateLimited: Record<Lane, number> | null = null;
  for (const s of all) {
    if (s.name === 'kubegc_workqueue_lane_depth') {
      const v = laneOf(s);
      if (v) v.waiting = s.value;
    } else if (s.name === 'kubegc_workqueue_lane_oldest_seconds') {
      const v = laneOf(s);
      if (v) v.oldestWaitingSeconds = s.value;
    } else if (s.name === 'kubegc_api_rate_limited_requests' && isLane(s.labels.lane)) {
      rateLimited ??= { user: 0, housekeeping: 0 };
      rateLimited[s.labels.lane] = s.value;
    }
  }
  const ordered = [...lanes.values()].sort(
    (a, b) => a.queue.localeCompare(b.queue) || LANES.indexOf(a.lane) - LANES.indexOf(b.lane),
  );
  return { url, leader: leader ? leader.value === 1 : null, lanes: ordered, rateLimited };
}

export interface GcMetricsAccess {
  /** Sent as `Authorization: Bearer`; none when undefined. */
  token?: string;
  /** Skip verifying the serving certificate (kubegc's own is self-signed unless given one). */
  insecureSkipTlsVerify: boolean;
  timeoutMs?: number;
}

/** Reads `url` once; a failure is part of the view (`error`), never a failed scan. */
export async function readGcMetrics(url: string, access: GcMetricsAccess): Promise<GcView> {
  try {
    return parseGcMetrics(url, await get(new URL(url), access));
  } catch (err) {
    return { url, leader: null, lanes: [], rateLimited: null, error: (err as Error).message };
  }
}

function get(u: URL, access: GcMetricsAccess): Promise<string> {
  const headers: Record<string, string> = { Accept: 'text/plain' };
  if (access.token) headers.Authorization = `Bearer ${access.token}`;
  const timeoutMs = access.timeoutMs ?? 10_000;
  // One request, on a connection of its own (agent: false): nothing to keep alive.
  return new Promise((resolve, reject) => {
    const onAnswer = (res: http.IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 200) resolve(body);
        else reject(new Error(`HTTP ${res.statusCode ?? 0}: ${body.trim().slice(0, 200)}`));
      });
    };
    const req =
      u.protocol === 'https:'
        ? https.request(
            u,
            { headers, agent: false, rejectUnauthorized: !access.insecureSkipTlsVerify },
            onAnswer,
          )
        : http.request(u, { headers, agent: false }, onAnswer);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
