// Who may read what kubegc serves on its metrics port: delegated
// authentication and authorization, as kube-controller-manager's secure port
// and controller-runtime's metrics filter do. The bearer token goes to the API
// server in a TokenReview; the user it names must be allowed `get` on the
// non-resource URL (/metrics, /debug/graph) by a SubjectAccessReview.
// Answers are cached briefly (10 s each, kube-controller-manager's defaults)
// in bounded LRU maps, keyed by a hash: a flood of random tokens costs API
// calls, not memory, and the tokens themselves are never kept.
import { TtlLru } from '../ttl-lru.ts';
import { createHash } from 'node:crypto';
import type { KubeClient } from '../../api/client.ts';

export interface ReviewedUser {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export interface TokenReviewResult {
  authenticated: boolean;
  user?: ReviewedUser;
  /** The authenticator's reason for a rejection, shown in kubegc's log only. */
  error?: string;
}

export interface AccessReviewResult {
  allowed: boolean;
  reason?: string;
}

/** The two API calls, behind an interface so the cache logic is unit-testable. */
export interface ReviewApi {
  tokenReview(token: string): Promise<TokenReviewResult>;
  accessReview(user: ReviewedUser, path: string, verb: string): Promise<AccessReviewResult>;
}

export type AuthOutcome =
  | { status: 200; user: string }
  | { status: 401; message: string }
  | { status: 403; message: string; user: string }
  /** The API server could not be asked; nothing is cached, the next request asks again. */
  | { status: 503; message: string };

export interface DelegatedAuthOptions {
  tokenTtlMs: number;
  allowedTtlMs: number;
  deniedTtlMs: number;
  /** Entries per cache; the least recently used goes first. */
  maxEntries: number;
  now?: () => number;
}

export const DEFAULT_DELEGATED_AUTH_OPTIONS: DelegatedAuthOptions = {
  tokenTtlMs: 10_000,
  allowedTtlMs: 10_000,
  deniedTtlMs: 10_000,
  maxEntries: 4096,
};

const hash = (text: string): string => createHash('sha256').update(text).digest('base64');

/** `Authorization: Bearer <token>` → the token; anything else → undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

export class DelegatedAuth {
  private readonly tokens: TtlLru<TokenReviewResult>;
  private readonly access: TtlLru<AccessReviewResult>;
  /** Identical reviews in flight share one API call (every scrape of several replicas at once). */
  private readonly inflight = new Map<string, Promise<unknown>>();
  private readonly opts: DelegatedAuthOptions;
  private readonly api: ReviewApi;

  constructor(api: ReviewApi, opts: Partial<DelegatedAuthOptions> = {}) {
    this.api = api;
    this.opts = { ...DEFAULT_DELEGATED_AUTH_OPTIONS, ...opts };
    const now = this.opts.now ?? Date.now;
    this.tokens = new TtlLru(this.opts.maxEntries, now);
    this.access = new TtlLru(this.opts.maxEntries, now);
  }

  /** Sizes of the two caches (for tests: they stay bounded). */
  get cached(): { tokens: number; access: number } {
    return { tokens: this.tokens.size, access: this.access.size };
  }

  private once<T>(key: string, call: () => Promise<T>): Promise<T> {
    const running = this.inflight.get(key) as Promise<T> | undefined;
    if (running) return running;
    const p = call().finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }

  async check(authorization: string | undefined, path: string, verb = 'get'): Promise<AuthOutcome> {
    const token = bearerToken(authorization);
    if (!token) return { status: 401, message: 'Unauthorized: a bearer token is required' };
    const tokenKey = hash(token);
    let review = this.tokens.get(tokenKey);
    if (!review) {
      try {
        review = await this.once(`t:${tokenKey}`, () => this.api.tokenReview(token));
      } catch (err) {
        return { status: 503, message: `cannot review the token: ${(err as Error).message}` };
      }
      this.tokens.set(tokenKey, review, this.opts.tokenTtlMs);
    }
    if (!review.authenticated || !review.user)
      return { status: 401, message: 'Unauthorized: the token was not accepted' };
    const user = review.user;
    const accessKey = hash(
      JSON.stringify([
        user.username,
        user.uid ?? '',
        [...(user.groups ?? [])].sort(),
        Object.entries(user.extra ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        path,
        verb,
      ]),
    );
    let decision = this.access.get(accessKey);
    if (!decision) {
      try {
        decision = await this.once(`a:${accessKey}`, () => this.api.accessReview(user, path, verb));
      } catch (err) {
        return { status: 503, message: `cannot review access: ${(err as Error).message}` };
      }
      this.access.set(
        accessKey,
        decision,
        decision.allowed ? this.opts.allowedTtlMs : this.opts.deniedTtlMs,
      );
    }
    if (!decision.allowed)
      return {
        status: 403,
        user: user.username,
        message: `Forbidden: user "${user.username}" cannot ${verb} path "${path}"${decision.reason ? ` (${decision.reason})` : ''}`,
      };
    return { status: 200, user: user.username };
  }
}

interface TokenReviewStatus {
  status?: { authenticated?: boolean; user?: ReviewedUser; error?: string };
}
interface AccessReviewStatus {
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

/** The ReviewApi over the API server (the client of kubegc's own service account). */
export function apiServerReviews(client: KubeClient): ReviewApi {
  return {
    async tokenReview(token) {
      const res = await client.request<TokenReviewStatus>(
        'POST',
        '/apis/authentication.k8s.io/v1/tokenreviews',
        {
          body: {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenReview',
            spec: { token },
          },
        },
      );
      const s = res.status ?? {};
      return { authenticated: s.authenticated === true, user: s.user, error: s.error };
    },
    async accessReview(user, path, verb) {
      const res = await client.request<AccessReviewStatus>(
        'POST',
        '/apis/authorization.k8s.io/v1/subjectaccessreviews',
        {
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: user.username,
              uid: user.uid,
              groups: user.groups,
              extra: user.extra,
              nonResourceAttributes: { path, verb },
            },
          },
        },
      );
      const s = res.status ?? {};
      return { allowed: s.allowed === true, reason: s.reason ?? s.evaluationError };
    },
  };
}
