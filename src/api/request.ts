// What one request to the API server carries (RequestOptions), the Accept
// headers of metadata-only reads, and what the transports answer: shared by
// the client (client.ts) and its HTTP/2 connection (http2-connection.ts).

export const METADATA_ACCEPT =
  'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';
export const METADATA_LIST_ACCEPT =
  'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  accept?: string;
  /** More headers (never replacing the client's own: authentication, User-Agent, Accept). */
  headers?: Record<string, string>;
  timeoutMs?: number;
  /**
   * Cancels the request: one not yet on the wire is never sent; one in
   * flight is reset (RST_STREAM CANCEL over HTTP/2, the socket destroyed over
   * HTTP/1.1) and rejects with an ApiError (status 0), never resolves.
   */
  signal?: AbortSignal;
  /** Label for the request metric (LIST, GET, ...); defaults to the HTTP method. */
  verb?: string;
  /**
   * Checked after the rate limiter and before every attempt (retries
   * included), and again after the auth headers are refreshed (an exec
   * plugin may take a while); throwing stops the request before it reaches
   * the wire. The leader-election write guard lives here, so that no write
   * waits in the token bucket, a header refresh or a Retry-After sleep and
   * then leaves after the lease is gone.
   */
  beforeSend?: () => void;
  /**
   * Retry a 429 (or a 5xx with Retry-After) after the time the server asks,
   * as client-go does (default true). False for a write whose decision may
   * not survive the wait: the caller gets the ApiError and decides again.
   */
  retryThrottled?: boolean;
  /**
   * Decodes a 2xx answer's body (default: JSON). Given with an Accept that
   * offers protobuf first: the server picks, and the Content-Type says which.
   */
  decode?: (body: Buffer, contentType: string | undefined) => unknown;
}

export interface InterceptedRequest {
  method: string;
  path: string;
  verb: string;
  query?: RequestOptions['query'];
  body?: unknown;
}

/** A request's headers and body, made once for all its attempts. */
export interface Prepared {
  headers: Record<string, string>;
  payload: string | undefined;
}

/** A whole answer, read into memory (not a watch). */
export interface Answer {
  status: number;
  retryAfter: string | undefined;
  contentType: string | undefined;
  body: Buffer;
}

export function abortedMessage(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return `aborted: ${reason instanceof Error ? reason.message : String(reason)}`;
}
