import {
  bytesToFree,
  DEFAULT_IMAGE_GC_POLICY,
  evictionOrder,
  imagesInUse,
  InvalidDiskCapacityError,
  lastUsersIndex,
  mayBeExpectedBack,
  planImageGc,
  protectionOf,
  recordsLoaded,
  spaceGoalReached,
  takeUntilFreed,
  updateImageRecords,
  usagePercent,
  validateImageGcPolicy,
  withExpectedBack,
  type Candidate,
  type ImageGcPlan,
  type ImageGcPolicy,
  type ImageInfo,
  type ImageRecord,
  type ProtectionContext,
} from './image-gc-policy.ts';
import { globMatcher, imageNames } from './image-refs.ts';
import type { NodePod } from './pods.ts';

const MIN = 60_000;
const policy = (p: Partial<ImageGcPolicy> = {}): ImageGcPolicy => ({
  ...DEFAULT_IMAGE_GC_POLICY,
  ...p,
});
const image = (id: string, tags: string[] = [], size = 100, pinned = false): ImageInfo => ({
  id,
  repoTags: tags,
  repoDigests: [],
  sizeBytes: size,
  pinned,
});

describe('validateImageGcPolicy (the kubelet rules)', () => {
  test.each<[string, Partial<ImageGcPolicy>, RegExp | undefined]>([
    ['defaults', {}, undefined],
    // v1.35's KubeletConfiguration validation: low must be less than high.
    [
      'low = high',
      { lowThresholdPercent: 85 },
      /--image-gc-low-threshold 85 must be less than --image-gc-high-threshold 85/,
    ],
    ['0 and 0', { highThresholdPercent: 0, lowThresholdPercent: 0 }, /must be less than/],
    ['100 and 100', { highThresholdPercent: 100, lowThresholdPercent: 100 }, /must be less than/],
    ['100 and 99', { highThresholdPercent: 100, lowThresholdPercent: 99 }, undefined],
    ['negative max age', { maxAgeMs: -1 }, /--image-maximum-gc-age must not be negative/],
    ['negative min age', { minAgeMs: -1 }, /--image-minimum-gc-age must not be negative/],
    [
      'high > 100',
      { highThresholdPercent: 101 },
      /--image-gc-high-threshold 101 must be between 0 and 100/,
    ],
    ['high < 0', { highThresholdPercent: -1 }, /--image-gc-high-threshold -1 must be between/],
    ['low < 0', { lowThresholdPercent: -5 }, /--image-gc-low-threshold -5 must be between/],
    [
      'low > high',
      { lowThresholdPercent: 90 },
      /low-threshold 90 must be less than --image-gc-high-threshold 85/,
    ],
    [
      'max age = min age',
      { maxAgeMs: 2 * MIN },
      /--image-maximum-gc-age \(120s\) must be greater than --image-minimum-gc-age \(120s\)/,
    ],
    ['max age < min age', { maxAgeMs: MIN }, /must be greater than/],
    ['max age off', { maxAgeMs: 0, minAgeMs: 10 * MIN }, undefined],
    ['max age > min age', { maxAgeMs: 3 * MIN }, undefined],
  ])('%s', (_name, p, problem) => {
    const problems = validateImageGcPolicy(policy(p));
    if (problem) expect(problems.join('\n')).toMatch(problem);
    else expect(problems).toEqual([]);
  });
});

describe('usagePercent', () => {
  test.each([
    [100, 100, 0],
    [100, 0, 100],
    [100, 15, 85],
    [100, 16, 84],
    // Integer math: 100 − floor(available×100/capacity).
    [1000, 155, 85],
    [1000, 159, 85],
    [1000, 151, 85],
    [3, 1, 67],
    // Available above capacity is clamped (reserved blocks, racing measurements).
    [100, 150, 0],
    // Beyond 2^53 / 100 bytes the arithmetic stays exact.
    [2 ** 52, 2 ** 50, 75],
  ])('capacity %d, available %d → %d%%', (capacityBytes, availableBytes, pct) => {
    expect(usagePercent({ capacityBytes, availableBytes })).toBe(pct);
  });

  test('capacity 0 is an InvalidDiskCapacity error', () => {
    expect(() => usagePercent({ capacityBytes: 0, availableBytes: 0 })).toThrow(
      InvalidDiskCapacityError,
    );
  });
});

describe('bytesToFree', () => {
  test.each([
    // capacity, available, high, low → bytes
    [1000, 500, 85, 80, 0], // 50% < 85%
    [1000, 151, 85, 80, 49], // 85% ≥ 85%: down to 80% → 200 available
    [1000, 150, 85, 80, 50],
    [1000, 0, 85, 80, 200],
    [1000, 160, 85, 80, 0], // 84%: below high
    [1000, 100, 90, 90, 0], // 90% ≥ 90%, low 90 → wants 100 available: 0
    [1000, 0, 0, 0, 1000], // high 0 always triggers; low 0 frees everything
    [1000, 1000, 0, 0, 0],
    [1000, 0, 100, 100, 0], // 100% ≥ 100 and low 100: nothing to free
  ])('capacity %d available %d high %d low %d → %d', (capacity, available, high, low, bytes) => {
    expect(
      bytesToFree(
        { capacityBytes: capacity, availableBytes: available },
        policy({ highThresholdPercent: high, lowThresholdPercent: low }),
      ),
    ).toBe(bytes);
  });
});

describe('imagesInUse and protectionOf', () => {
  const ctx = (over: Partial<ProtectionContext> = {}): ProtectionContext => ({
    inUse: new Set(),
    sandboxImages: new Set(['registry.k8s.io/pause:3.9']),
    pinnedImages: globMatcher(['*/critical/*', 'docker.io/library/keep:*']),
    ...over,
  });

  test.each<[string, ImageInfo, Partial<ProtectionContext>, string | undefined]>([
    ['unused, unpinned', image('sha256:a', ['example.com/app:1']), {}, undefined],
    [
      'used by ID (image_ref on containerd 1.6)',
      image('sha256:a', ['example.com/app:1']),
      { inUse: imagesInUse([{ image: 'example.com/app:1', imageRef: 'sha256:a', imageId: '' }]) },
      'in-use',
    ],
    [
      'used by image_id (CRI ≥ 1.31)',
      image('sha256:a'),
      {
        inUse: imagesInUse([
          { image: '', imageRef: 'example.com/app@sha256:d', imageId: 'sha256:a' },
        ]),
      },
      'in-use',
    ],
    [
      'used by a short tag only',
      image('sha256:a', ['docker.io/library/nginx:latest']),
      { inUse: imagesInUse([{ image: 'nginx', imageRef: '', imageId: '' }]) },
      'in-use',
    ],
    ['pinned by the runtime', image('sha256:a', [], 1, true), {}, 'pinned-by-runtime'],
    ['the sandbox image', image('sha256:p', ['registry.k8s.io/pause:3.9']), {}, 'sandbox-image'],
    [
      'the sandbox image named short',
      image('sha256:p', ['docker.io/library/pause:3.9']),
      { sandboxImages: new Set(['docker.io/library/pause:3.9']) },
      'sandbox-image',
    ],
    [
      'another pause tag is not the sandbox image',
      image('sha256:q', ['registry.k8s.io/pause:3.8']),
      {},
      undefined,
    ],
    ['glob */critical/*', image('sha256:c', ['example.com/critical/db:2']), {}, 'pinned-images'],
    ['glob on the normalized name', image('sha256:k', ['keep:1']), {}, 'pinned-images'],
    ['glob not matching', image('sha256:d', ['example.com/critic/db:2']), {}, undefined],
  ])('%s', (_name, img, over, reason) => {
    expect(protectionOf(img, ctx(over))?.reason).toBe(reason);
  });

  test('in use wins over every other reason', () => {
    const img = image('sha256:p', ['registry.k8s.io/pause:3.9'], 1, true);
    expect(protectionOf(img, ctx({ inUse: new Set(['sha256:p']) }))).toEqual({ reason: 'in-use' });
  });

  test('the matching pattern is reported', () => {
    expect(protectionOf(image('sha256:c', ['x.io/critical/a:1']), ctx())).toEqual({
      reason: 'pinned-images',
      pattern: '*/critical/*',
    });
  });
});

describe('updateImageRecords', () => {
  test('new images are detected now, used ones are used now, gone ones are dropped', () => {
    const previous = new Map<string, ImageRecord>([
      ['sha256:old', { firstDetectedMs: 100, lastUsedMs: 200 }],
      ['sha256:used', { firstDetectedMs: 100 }],
      ['sha256:gone', { firstDetectedMs: 50 }],
    ]);
    const next = updateImageRecords(
      previous,
      [image('sha256:old'), image('sha256:used'), image('sha256:new'), image('sha256:newused')],
      new Set(['sha256:used', 'sha256:newused']),
      1000,
    );
    expect(Object.fromEntries(next)).toEqual({
      'sha256:old': { firstDetectedMs: 100, lastUsedMs: 200 },
      'sha256:used': { firstDetectedMs: 100, lastUsedMs: 1000 },
      'sha256:new': { firstDetectedMs: 1000 },
      'sha256:newused': { firstDetectedMs: 1000, lastUsedMs: 1000 },
    });
    // The previous map is not modified.
    expect(previous.get('sha256:used')).toEqual({ firstDetectedMs: 100 });
  });
});

describe('the last user of an image (for images expected back)', () => {
  const owner = (kind: string, name: string) => ({
    apiVersion: kind === 'Job' ? 'batch/v1' : 'apps/v1',
    kind,
    name,
    uid: `${name}-uid`,
  });
  const pod = (p: Partial<NodePod> & { images: string[] }): NodePod => ({
    uid: `${p.images[0]}-${p.phase ?? 'Running'}`,
    phase: 'Running',
    evicted: false,
    ...p,
  });
  const pods: NodePod[] = [
    pod({
      namespace: 'shop',
      controller: owner('Job', 'nightly-29000000'),
      phase: 'Succeeded',
      images: ['nightly-tool:1'],
    }),
    pod({ namespace: 'shop', controller: owner('ReplicaSet', 'web-abc'), images: ['web:1'] }),
    // A terminated pod of another workload names web:1 too: the running one wins.
    pod({
      namespace: 'shop',
      controller: owner('Job', 'old-1'),
      phase: 'Failed',
      images: ['docker.io/library/web:1'],
    }),
    pod({ namespace: 'shop', images: ['bare:1'] }),
    pod({
      namespace: 'ops',
      controller: owner('DaemonSet', 'agent'),
      volumeImages: ['data:1'],
      images: [],
    }),
  ];
  const img = (id: string, tag: string) => image(id, [tag]);

  test("by any of the image's names: a controller's pod still running first, then a terminated one; null for a bare pod; undefined for none", () => {
    const of = lastUsersIndex(pods);
    const names = (tag: string) => imageNames(img('x', tag));
    expect(of(names('docker.io/library/web:1'))).toEqual({
      namespace: 'shop',
      owner: owner('ReplicaSet', 'web-abc'),
    });
    expect(of(names('docker.io/library/nightly-tool:1'))).toEqual({
      namespace: 'shop',
      owner: owner('Job', 'nightly-29000000'),
    });
    expect(of(names('docker.io/library/data:1'))?.owner.kind).toBe('DaemonSet');
    expect(of(names('docker.io/library/bare:1'))).toBeNull();
    expect(of(names('docker.io/library/nobody:1'))).toBeUndefined();
  });

  test('recorded while the image is in use, kept while it is not, cleared when a bare pod used it last', () => {
    const job = { namespace: 'shop', owner: owner('Job', 'nightly-29000000') };
    const images = [
      img('sha256:n', 'docker.io/library/nightly-tool:1'),
      img('sha256:b', 'docker.io/library/bare:1'),
      img('sha256:o', 'docker.io/library/other:1'),
    ];
    const first = updateImageRecords(
      new Map([
        ['sha256:b', { firstDetectedMs: 1, lastUsedMs: 5, lastUser: job }],
        ['sha256:o', { firstDetectedMs: 1, lastUsedMs: 5, lastUser: job }],
      ]),
      images,
      new Set(['docker.io/library/nightly-tool:1', 'docker.io/library/bare:1', 'sha256:o']),
      1000,
      lastUsersIndex(pods),
    );
    expect(Object.fromEntries(first)).toEqual({
      'sha256:n': { firstDetectedMs: 1000, lastUsedMs: 1000, lastUser: job },
      // In use by a pod without a controller: nothing will bring it back.
      'sha256:b': { firstDetectedMs: 1, lastUsedMs: 1000 },
      // In use by a container no listed pod names: the last user known stays.
      'sha256:o': { firstDetectedMs: 1, lastUsedMs: 1000, lastUser: job },
    });
    // Unused, the pods gone: the record keeps who used it last.
    const later = updateImageRecords(first, images, new Set(), 2000, lastUsersIndex([]));
    expect(later.get('sha256:n')).toEqual({
      firstDetectedMs: 1000,
      lastUsedMs: 1000,
      lastUser: job,
    });
  });
});

describe('withExpectedBack: out of the age pass, last in the space pass', () => {
  const HOUR = 3_600_000;
  const NOW = 100 * HOUR;
  const user = {
    namespace: 'shop',
    owner: { apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: 'c' },
  };
  const cand = (id: string, lastUsedHoursAgo: number, withUser = true): Candidate => ({
    image: image(id),
    record: {
      firstDetectedMs: 0,
      lastUsedMs: NOW - lastUsedHoursAgo * HOUR,
      ...(withUser ? { lastUser: user } : {}),
    },
  });
  // LRU order, as planImageGc gives it: the age list (past a 24h maximum age), then the space list.
  const plan = (): ImageGcPlan => ({
    protected: [],
    age: [cand('old-back', 50), cand('old', 40), cand('old-back-2', 30)],
    space: [cand('back', 10), cand('a', 8, false), cand('b', 5)],
    tooYoung: [],
  });
  const expected = new Map([
    ['old-back', 'CronJob shop/nightly'],
    ['old-back-2', 'Deployment shop/web'],
    ['back', 'CronJob shop/nightly'],
  ]);
  const ids = (cs: Candidate[]) => cs.map((c) => c.image.id);

  test('expected-back images leave the age list and go to the end of the space list, least recently used first among themselves', () => {
    const p = withExpectedBack(plan(), expected, NOW, 0);
    expect(ids(p.age)).toEqual(['old']);
    expect(ids(p.space)).toEqual(['a', 'b', 'old-back', 'old-back-2', 'back']);
    expect(p.expectedBack?.map((e) => [e.candidate.image.id, e.workload])).toEqual([
      ['old-back', 'CronJob shop/nightly'],
      ['old-back-2', 'Deployment shop/web'],
      ['back', 'CronJob shop/nightly'],
    ]);
  });

  test('--expected-back-max-unused: an image unused for longer is an ordinary candidate again', () => {
    const p = withExpectedBack(plan(), expected, NOW, 36 * HOUR);
    expect(ids(p.age)).toEqual(['old-back', 'old']);
    expect(ids(p.space)).toEqual(['a', 'b', 'old-back-2', 'back']);
    expect(mayBeExpectedBack(cand('x', 36), NOW, 36 * HOUR)).toBe(true);
    expect(mayBeExpectedBack(cand('x', 37), NOW, 36 * HOUR)).toBe(false);
    // No last user, or never used: nothing to ask about.
    expect(mayBeExpectedBack(cand('x', 1, false), NOW, 0)).toBe(false);
  });

  test('nothing expected back: the plan as it was', () => {
    const p = plan();
    expect(withExpectedBack(p, new Map(), NOW, 0)).toBe(p);
  });
});

const cand = (id: string, firstDetectedMs: number, lastUsedMs?: number, size = 100): Candidate => ({
  image: image(id, [], size),
  record: lastUsedMs === undefined ? { firstDetectedMs } : { firstDetectedMs, lastUsedMs },
});

describe('evictionOrder', () => {
  test('lastUsed ascending (never used first), then firstDetected ascending', () => {
    const order = evictionOrder([
      cand('used-late', 10, 500),
      cand('never-late', 300),
      cand('used-early', 20, 100),
      cand('never-early', 5),
      cand('used-early-detected-earlier', 1, 100),
    ]).map((c) => c.image.id);
    expect(order).toEqual([
      'never-early',
      'never-late',
      'used-early-detected-earlier',
      'used-early',
      'used-late',
    ]);
  });
});

describe('planImageGc', () => {
  const now = 1_000 * MIN;
  const records = new Map<string, ImageRecord>([
    ['sha256:stale', { firstDetectedMs: now - 100 * MIN, lastUsedMs: now - 90 * MIN }],
    ['sha256:old', { firstDetectedMs: now - 100 * MIN, lastUsedMs: now - 30 * MIN }],
    ['sha256:recent', { firstDetectedMs: now - 100 * MIN, lastUsedMs: now - 5 * MIN }],
    ['sha256:young', { firstDetectedMs: now - 1 * MIN }],
    ['sha256:inuse', { firstDetectedMs: now - 100 * MIN, lastUsedMs: now - 200 * MIN }],
    ['sha256:pause', { firstDetectedMs: now - 500 * MIN }],
  ]);
  const images = [
    image('sha256:recent'),
    image('sha256:young'),
    image('sha256:old'),
    image('sha256:stale'),
    image('sha256:inuse'),
    image('sha256:pause', ['registry.k8s.io/pause:3.9']),
    image('sha256:unknown'), // no record: detected now
  ];
  const protection: ProtectionContext = {
    inUse: new Set(['sha256:inuse']),
    sandboxImages: new Set(['registry.k8s.io/pause:3.9']),
    pinnedImages: globMatcher([]),
  };
  const plan = (p: Partial<ImageGcPolicy>) => {
    const r = planImageGc({ images, records, protection, nowMs: now, policy: policy(p) });
    return {
      protected: r.protected.map((x) => `${x.image.id}:${x.protection.reason}`),
      age: r.age.map((c) => c.image.id),
      space: r.space.map((c) => c.image.id),
      tooYoung: r.tooYoung.map((c) => c.image.id),
    };
  };

  test.each<[string, Partial<ImageGcPolicy>, ReturnType<typeof plan>]>([
    [
      'no max age: every old-enough unused image is a space candidate, LRU first',
      {},
      {
        protected: ['sha256:inuse:in-use', 'sha256:pause:sandbox-image'],
        age: [],
        space: ['sha256:stale', 'sha256:old', 'sha256:recent'],
        tooYoung: ['sha256:young', 'sha256:unknown'],
      },
    ],
    [
      'max age 60m: the stale image goes for age',
      { maxAgeMs: 60 * MIN },
      {
        protected: ['sha256:inuse:in-use', 'sha256:pause:sandbox-image'],
        age: ['sha256:stale'],
        space: ['sha256:old', 'sha256:recent'],
        tooYoung: ['sha256:young', 'sha256:unknown'],
      },
    ],
    [
      'max age 10m: unused for 30 and 90 minutes',
      { maxAgeMs: 10 * MIN },
      {
        protected: ['sha256:inuse:in-use', 'sha256:pause:sandbox-image'],
        age: ['sha256:stale', 'sha256:old'],
        space: ['sha256:recent'],
        tooYoung: ['sha256:young', 'sha256:unknown'],
      },
    ],
    [
      'min age 0: nothing is too young',
      { minAgeMs: 0 },
      {
        protected: ['sha256:inuse:in-use', 'sha256:pause:sandbox-image'],
        age: [],
        space: ['sha256:young', 'sha256:unknown', 'sha256:stale', 'sha256:old', 'sha256:recent'],
        tooYoung: [],
      },
    ],
  ])('%s', (_name, p, expected) => {
    expect(plan(p)).toEqual(expected);
  });

  test('a never-used image ages from its detection (max age counts from firstDetected)', () => {
    const r = planImageGc({
      images: [image('sha256:n')],
      records: new Map([['sha256:n', { firstDetectedMs: now - 61 * MIN }]]),
      protection,
      nowMs: now,
      policy: policy({ maxAgeMs: 60 * MIN }),
    });
    expect(r.age.map((c) => c.image.id)).toEqual(['sha256:n']);
  });

  test('records from the state file: the maximum age counts from the load at the earliest (the kubelet waits MaxAge after its GC starts)', () => {
    const DAY = 24 * 60 * MIN;
    const loadedAt = now - 60 * MIN;
    // Before the restart: one used 10 days ago, one never used and detected 10 days ago.
    const records = recordsLoaded(
      new Map<string, ImageRecord>([
        ['sha256:used', { firstDetectedMs: now - 20 * DAY, lastUsedMs: now - 10 * DAY }],
        ['sha256:never', { firstDetectedMs: now - 10 * DAY }],
      ]),
      loadedAt,
    );
    const at = (nowMs: number) =>
      planImageGc({
        images: [image('sha256:used'), image('sha256:never')],
        records,
        protection,
        nowMs,
        policy: policy({ maxAgeMs: DAY }),
      });
    // An hour after the start: neither goes for age; both are old enough for space.
    const early = at(now);
    expect(early.age).toEqual([]);
    expect(early.space.map((c) => c.image.id)).toEqual(['sha256:used', 'sha256:never']);
    // MaxAge after the start (and no use since): both go.
    expect(at(loadedAt + DAY).age).toEqual([]);
    expect(at(loadedAt + DAY + 1).age.map((c) => c.image.id)).toEqual([
      'sha256:used',
      'sha256:never',
    ]);
  });
});

describe('the space pass stop rule', () => {
  test.each([
    [100, 100, 0, true],
    [100, 0, 100, true],
    [100, 99, 99, false],
    [0, 0, 0, true],
  ])('wanted %d, reported %d, measured %d → reached %p', (wanted, reported, measured, reached) => {
    expect(spaceGoalReached(wanted, reported, measured)).toBe(reached);
  });

  const ordered = [
    cand('a', 1, undefined, 40),
    cand('b', 2, undefined, 40),
    cand('c', 3, undefined, 40),
  ];
  test.each<[number, number, string[], number]>([
    [0, Infinity, [], 0],
    [1, Infinity, ['a'], 40],
    [40, Infinity, ['a'], 40],
    [41, Infinity, ['a', 'b'], 80],
    [120, Infinity, ['a', 'b', 'c'], 120],
    [500, Infinity, ['a', 'b', 'c'], 120],
    [500, 2, ['a', 'b'], 80],
    [500, 0, [], 0],
  ])('takeUntilFreed(wanted %d, cap %d) → %p', (wanted, cap, ids, bytes) => {
    const r = takeUntilFreed(ordered, wanted, cap);
    expect(r.take.map((c) => c.image.id)).toEqual(ids);
    expect(r.reportedBytes).toBe(bytes);
  });
});
