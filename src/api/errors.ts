// What the API server answered when it did not say yes: ApiError (a non-2xx
// answer, or none: status 0) and the predicates callers decide on. A 404
// for a path is not a 404 for an object (isObjectNotFound says why).
import { decodeStatus, isProtobufContentType } from './protobuf-meta.ts';

/** A non-2xx answer from the API server (or no answer: status 0). */
export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly body: string;
  /** The server's Retry-After, in ms (a 429, or a 5xx that asks for one). */
  retryAfterMs: number | undefined;
  constructor(method: string, path: string, status: number, body: string, reason = '') {
    let message = body;
    let parsedReason = reason;
    try {
      const s = JSON.parse(body) as { message?: string; reason?: string };
      message = s.message ?? body;
      parsedReason = s.reason ?? reason;
    } catch {
      /* not a Status object */
    }
    super(
      `${method} ${path}: ${status || 'no response'}${parsedReason ? ` ${parsedReason}` : ''}: ${message.slice(0, 500)}`,
    );
    this.status = status;
    this.reason = parsedReason;
    this.body = body;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.status === 404;
}

/**
 * A 404 that says THIS object does not exist: the Status names it
 * (`details.name`). A 404 for the path itself ("the server could not find the
 * requested resource": a version no longer served, a CRD being updated, an
 * aggregated API gone) says nothing about the object, and a garbage collector
 * that took it for "the owner is gone" would delete live objects' dependents.
 */
export function isObjectNotFound(err: unknown, name: string): boolean {
  if (!(err instanceof ApiError) || err.status !== 404) return false;
  try {
    const s = JSON.parse(err.body) as { details?: { name?: string } };
    return s.details?.name === name;
  } catch {
    return false;
  }
}
export function isConflict(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409;
}

/**
 * The text of a non-2xx answer for ApiError: a Status in JSON as the server
 * sent it, or the protobuf Status one negotiated with protobuf first turned
 * into the same JSON (its code, reason and message), so that every caller
 * reads errors one way.
 */
export function errorBodyText(body: Buffer, contentType: string | undefined): string {
  if (!isProtobufContentType(contentType)) return body.toString('utf8');
  try {
    return JSON.stringify({ kind: 'Status', ...decodeStatus(body) });
  } catch {
    return `(an undecodable protobuf answer of ${body.length} bytes)`;
  }
}
