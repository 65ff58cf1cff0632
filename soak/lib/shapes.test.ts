// The shape generator's seeded choices, and the webhook's: the same seed gives the same
// shapes; every name is legal for RBAC and needs escaping in a field selector; shared-UID
// references share exactly one UID.
import type { OwnerReference } from './kube.ts';
import { Prng } from './prng.ts';
import {
  ESCAPED,
  SHAPES,
  TAKE_AWAY,
  bogusName,
  escapedName,
  firstRound,
  isValidPathSegmentName,
  pickShape,
  sharedUidRefs,
  withKind,
  type Shape,
} from './shapes.ts';
import { DENIAL_CODES, decide, denialStatus } from './webhook.ts';

/** apimachinery's fields.EscapeValue. */
const escapeValue = (v: string): string =>
  v.replace(/\\/g, '\\\\').replace(/,/g, '\\,').replace(/=/g, '\\=');

const live: OwnerReference = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  name: 'owner',
  uid: 'U',
  controller: true,
};

describe('shapes', () => {
  test('the same seed picks the same shapes; every shape comes up', () => {
    const draw = (seed: number): Shape[] => {
      const p = new Prng(seed, 'shapes');
      return Array.from({ length: 400 }, () => pickShape(p));
    };
    expect(draw(1)).toEqual(draw(1));
    expect(draw(1)).not.toEqual(draw(2));
    // Every shape with a weight (gadgetCrdFlap is off for now).
    const on = Object.entries(SHAPES)
      .filter(([, w]) => w > 0)
      .map(([k]) => k);
    expect(new Set(draw(1))).toEqual(new Set(on));
  });

  test('the first round: every shape with a weight once, in an order the seed decides, the flaps last', () => {
    const round = (seed: number): Shape[] => firstRound(new Prng(seed, 'shapes/first-round'));
    const weighted = Object.entries(SHAPES)
      .filter(([, w]) => w > 0)
      .map(([k]) => k)
      .sort();
    expect([...round(1)].sort()).toEqual(weighted);
    expect(round(1)).toEqual(round(1));
    expect(round(1)).not.toEqual(round(2));
    // The flaps last: by then there are Gadgets and AggWidgets for them to take away.
    for (const seed of [1, 2, 3])
      expect(new Set(round(seed).slice(-TAKE_AWAY.length))).toEqual(new Set(TAKE_AWAY));
  });

  test('escaped names: legal RBAC names, each with a character a field selector must escape (or a space), seeded', () => {
    const draw = (): string[] => {
      const p = new Prng(5, 'names');
      return Array.from({ length: 300 }, () => escapedName(p, 'soak-role'));
    };
    const names = draw();
    expect(names).toEqual(draw());
    for (const n of names) {
      expect(isValidPathSegmentName(n)).toBe(true);
      expect(n.length).toBeLessThanOrEqual(253);
      expect(n.startsWith('soak-role')).toBe(true);
      expect(ESCAPED.some((c) => n.includes(c))).toBe(true);
    }
    // Across the draws, every special character, and names whose escaped form differs.
    for (const c of ESCAPED) expect(names.some((n) => n.includes(c))).toBe(true);
    expect(names.filter((n) => escapeValue(n) !== n).length).toBeGreaterThan(200);
    expect(new Set(names).size).toBe(names.length);
  });

  test('path segment names: . and .. and names with / or % are not legal', () => {
    for (const bad of ['.', '..', 'a/b', 'a%2Fb']) expect(isValidPathSegmentName(bad)).toBe(false);
    for (const ok of ['a,b', 'x=y', 'a\\b', 'a b', '...'])
      expect(isValidPathSegmentName(ok)).toBe(true);
  });

  test('shared-UID references: one UID, distinct names, at most one controller', () => {
    const p = new Prng(9, 'refs');
    for (let i = 0; i < 50; i++) {
      for (const variant of ['live+bogus', 'bogus+bogus'] as const) {
        const refs = sharedUidRefs(p, live, variant);
        expect(refs).toHaveLength(2);
        expect(new Set(refs.map((r) => r.uid))).toEqual(new Set(['U']));
        expect(new Set(refs.map((r) => r.name)).size).toBe(2);
        expect(refs.filter((r) => r.controller).length).toBeLessThanOrEqual(1);
        expect(refs.some((r) => r.name === 'owner')).toBe(variant === 'live+bogus');
      }
    }
    expect(bogusName(new Prng(1, 'x'))).toBe(bogusName(new Prng(1, 'x')));
    expect(
      withKind({ ...live, apiVersion: 'soak.kubegc.io/v1', kind: 'Widget' }, 'Secret'),
    ).toEqual({ ...live, apiVersion: 'v1', kind: 'Secret' });
  });
});

describe('the denying webhook', () => {
  const req = {
    uid: 'r',
    operation: 'DELETE',
    name: 'cm-x',
    namespace: 'soak-a',
    resource: { group: '', resource: 'configmaps' },
    kind: { kind: 'ConfigMap' },
    userInfo: { username: 'kcm-gc' },
  };

  test('refuses about the fraction asked, with every code, seeded', () => {
    const run = (seed: number): (number | undefined)[] => {
      const p = new Prng(seed, 'webhook');
      return Array.from({ length: 4000 }, () => decide(p, 0.1));
    };
    const a = run(1);
    expect(a).toEqual(run(1));
    const refused = a.filter((c) => c !== undefined);
    expect(refused.length).toBeGreaterThan(300);
    expect(refused.length).toBeLessThan(500);
    expect(new Set(refused)).toEqual(new Set(DENIAL_CODES));
    expect(run(2)).not.toEqual(a);
  });

  test('a 404 names the object as a real NotFound does; a 429 asks to retry', () => {
    expect(denialStatus(404, req)).toEqual({
      code: 404,
      reason: 'NotFound',
      message: 'configmaps "cm-x" not found',
      details: { name: 'cm-x', group: '', kind: 'configmaps' },
    });
    expect(denialStatus(429, req)).toMatchObject({
      code: 429,
      reason: 'TooManyRequests',
      details: { retryAfterSeconds: 1 },
    });
    expect(denialStatus(409, req)).toMatchObject({ code: 409, reason: 'Conflict' });
    expect(denialStatus(500, req)).toMatchObject({ code: 500, reason: 'InternalError' });
  });
});
