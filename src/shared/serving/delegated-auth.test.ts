import {
  bearerToken,
  DelegatedAuth,
  type AccessReviewResult,
  type ReviewApi,
  type ReviewedUser,
  type TokenReviewResult,
} from './delegated-auth.ts';

/** A fake API server: tokens map to users, users to the paths they may get; counts calls. */
function fakeApi(
  tokens: Record<string, ReviewedUser>,
  allowed: Record<string, string[]>,
): ReviewApi & { calls: { token: number; access: number }; fail: boolean } {
  const api = {
    calls: { token: 0, access: 0 },
    fail: false,
    tokenReview(token: string): Promise<TokenReviewResult> {
      api.calls.token++;
      if (api.fail) return Promise.reject(new Error('connection refused'));
      const user = tokens[token];
      return Promise.resolve(
        user ? { authenticated: true, user } : { authenticated: false, error: 'invalid' },
      );
    },
    accessReview(user: ReviewedUser, path: string, verb: string): Promise<AccessReviewResult> {
      api.calls.access++;
      if (api.fail) return Promise.reject(new Error('connection refused'));
      const ok = verb === 'get' && (allowed[user.username] ?? []).includes(path);
      return Promise.resolve(ok ? { allowed: true } : { allowed: false, reason: 'no rule' });
    },
  };
  return api;
}

const users = {
  'reader-token': { username: 'system:serviceaccount:monitoring:prometheus', groups: ['g'] },
  'other-token': { username: 'system:serviceaccount:default:default' },
};
const perms = { 'system:serviceaccount:monitoring:prometheus': ['/metrics'] };

test('bearer tokens are taken only from a well-formed Authorization header', () => {
  expect(bearerToken('Bearer abc.def')).toBe('abc.def');
  expect(bearerToken('bearer abc')).toBe('abc');
  expect(bearerToken(undefined)).toBeUndefined();
  expect(bearerToken('Basic dXNlcjpwYXNz')).toBeUndefined();
  expect(bearerToken('Bearer ')).toBeUndefined();
  expect(bearerToken('Bearer a b')).toBeUndefined();
});

test('no token or a token the API server rejects: 401; a valid token without the permission: 403; with it: 200', async () => {
  const auth = new DelegatedAuth(fakeApi(users, perms));
  expect((await auth.check(undefined, '/metrics')).status).toBe(401);
  expect((await auth.check('Bearer nope', '/metrics')).status).toBe(401);
  const denied = await auth.check('Bearer other-token', '/metrics');
  expect(denied).toMatchObject({ status: 403, user: 'system:serviceaccount:default:default' });
  expect(denied.status === 403 && denied.message).toContain('cannot get path "/metrics"');
  expect(await auth.check('Bearer reader-token', '/metrics')).toEqual({
    status: 200,
    user: 'system:serviceaccount:monitoring:prometheus',
  });
  // /debug/graph needs a permission of its own.
  expect((await auth.check('Bearer reader-token', '/debug/graph')).status).toBe(403);
});

test('answers are cached for their TTL, then asked again', async () => {
  let now = 1_000_000;
  const api = fakeApi(users, perms);
  const auth = new DelegatedAuth(api, {
    tokenTtlMs: 10_000,
    allowedTtlMs: 10_000,
    deniedTtlMs: 5_000,
    now: () => now,
  });
  for (let i = 0; i < 5; i++)
    expect((await auth.check('Bearer reader-token', '/metrics')).status).toBe(200);
  expect(api.calls).toEqual({ token: 1, access: 1 });
  await auth.check('Bearer other-token', '/metrics');
  expect(api.calls).toEqual({ token: 2, access: 2 });
  now += 6_000; // the denial expired, the allowed answer and both tokens did not
  await auth.check('Bearer other-token', '/metrics');
  await auth.check('Bearer reader-token', '/metrics');
  expect(api.calls).toEqual({ token: 2, access: 3 });
  now += 5_000; // everything expired
  await auth.check('Bearer reader-token', '/metrics');
  expect(api.calls).toEqual({ token: 3, access: 4 });
});

test('a permission revoked is seen once the allowed answer expires', async () => {
  let now = 0;
  const allowed: Record<string, string[]> = { ...perms };
  const auth = new DelegatedAuth(fakeApi(users, allowed), { now: () => now });
  expect((await auth.check('Bearer reader-token', '/metrics')).status).toBe(200);
  allowed['system:serviceaccount:monitoring:prometheus'] = [];
  expect((await auth.check('Bearer reader-token', '/metrics')).status).toBe(200);
  now += 10_001;
  expect((await auth.check('Bearer reader-token', '/metrics')).status).toBe(403);
});

test('the API server unreachable: 503 and nothing cached', async () => {
  const api = fakeApi(users, perms);
  const auth = new DelegatedAuth(api);
  api.fail = true;
  expect((await auth.check('Bearer reader-token', '/metrics')).status).toBe(503);
  expect(auth.cached).toEqual({ tokens: 0, access: 0 });
  api.fail = false;
  expect((await auth.check('Bearer reader-token', '/metrics')).status).toBe(200);
});

test('a flood of distinct tokens keeps the caches bounded', async () => {
  const auth = new DelegatedAuth(fakeApi(users, perms), { maxEntries: 100 });
  for (let i = 0; i < 1000; i++) await auth.check(`Bearer random-${i}`, '/metrics');
  expect(auth.cached.tokens).toBe(100);
  // The least recently used went first; a recent one is still cached.
  await auth.check('Bearer reader-token', '/metrics');
  expect(auth.cached.tokens).toBe(100);
});

test('identical reviews in flight share one API call', async () => {
  const api = fakeApi(users, perms);
  const auth = new DelegatedAuth(api);
  const outcomes = await Promise.all(
    Array.from({ length: 20 }, () => auth.check('Bearer reader-token', '/metrics')),
  );
  expect(outcomes.every((o) => o.status === 200)).toBe(true);
  expect(api.calls).toEqual({ token: 1, access: 1 });
});

test('the access cache is keyed by the whole identity, not the name alone', async () => {
  const api = fakeApi(
    {
      a: { username: 'u', groups: ['readers'] },
      b: { username: 'u', groups: [] },
    },
    {},
  );
  const base = api.accessReview.bind(api);
  api.accessReview = (user, path, verb) =>
    user.groups?.includes('readers') ? Promise.resolve({ allowed: true }) : base(user, path, verb);
  const auth = new DelegatedAuth(api);
  expect((await auth.check('Bearer a', '/metrics')).status).toBe(200);
  expect((await auth.check('Bearer b', '/metrics')).status).toBe(403);
});
