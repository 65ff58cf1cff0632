import { ImageTable, type SoakImage } from './images.ts';
import { judge, type Inputs, type PodView, type RuntimeEvent } from './node-oracle.ts';

const app: SoakImage = {
  key: 'app',
  role: 'app',
  domain: 'docker.io',
  path: 'library/app',
  tag: '1',
};
const pin: SoakImage = {
  key: 'pin',
  role: 'pinned',
  domain: 'docker.io',
  path: 'library/pin',
  tag: '1',
};

function inputs(over: Partial<Inputs>): Inputs {
  const table = new ImageTable();
  table.add(app);
  table.add(pin);
  return {
    table,
    pinned: new Set(['pin']),
    sandboxImage: 'registry.k8s.io/pause:3.10',
    snapshots: [],
    events: [],
    gaps: [],
    samples: [],
    logDirsGone: [],
    maxAgeMs: 0,
    slackMs: 30_000,
    lastNamed: new Map(),
    ...over,
  };
}

const pod = (over: Partial<PodView>): PodView => ({
  uid: 'u1',
  namespace: 'ns',
  name: 'p',
  phase: 'Pending',
  deleting: false,
  images: ['app:1'],
  running: [],
  ...over,
});

describe('N1', () => {
  test('an image a pending pod names in a short spelling, removed between two snapshots that show the pod: violation', () => {
    const v = judge(
      inputs({
        snapshots: [
          { t: 100, pods: [pod({})] },
          { t: 300, pods: [pod({})] },
        ],
        events: [{ t: 200, kind: 'image-delete', name: 'docker.io/library/app:1' }],
      }),
    );
    expect(v.map((x) => x.invariant)).toEqual(['N1']);
  });
  test('the same removal once the pod has terminated, or before it was seen: none', () => {
    expect(
      judge(
        inputs({
          snapshots: [
            { t: 100, pods: [pod({ phase: 'Succeeded' })] },
            { t: 300, pods: [pod({ phase: 'Succeeded' })] },
          ],
          events: [{ t: 200, kind: 'image-delete', name: 'docker.io/library/app:1' }],
        }),
      ),
    ).toEqual([]);
    expect(
      judge(
        inputs({
          snapshots: [
            { t: 100, pods: [] },
            { t: 300, pods: [pod({})] },
          ],
          events: [{ t: 200, kind: 'image-delete', name: 'docker.io/library/app:1' }],
        }),
      ),
    ).toEqual([]);
  });
  test('a pinned image or the sandbox image removed: violation whatever the pods', () => {
    const v = judge(
      inputs({
        events: [
          { t: 200, kind: 'image-delete', name: 'docker.io/library/pin:1' },
          { t: 210, kind: 'image-delete', name: 'registry.k8s.io/pause:3.10' },
        ],
      }),
    );
    expect(v.map((x) => x.invariant)).toEqual(['N1', 'N1']);
  });
});

describe('N2 and N3', () => {
  const created = (id: string, t: number, name = 'main'): RuntimeEvent => ({
    t,
    kind: 'container-create',
    id,
    podUid: 'u1',
    containerName: name,
    sandbox: false,
  });
  /** The pod as seen before and after t=500, and what the oracle says of c1 (created at 10) removed at 500. */
  const around = (before: Partial<PodView>, after: Partial<PodView> = before) => [
    { t: 100, pods: [pod(before)] },
    { t: 900, pods: [pod(after)] },
  ];
  const removeC1 = (over: Partial<Inputs>, extra: RuntimeEvent[] = []) =>
    judge(
      inputs({
        events: [created('c1', 10), ...extra, { t: 500, kind: 'container-delete', id: 'c1' }],
        ...over,
      }),
    ).map((x) => x.invariant);
  test('the last container of a Succeeded pod that exists removed without pressure: N2; an older one of the same container: none', () => {
    const snaps = around({ phase: 'Succeeded' });
    expect(removeC1({ snapshots: snaps })).toEqual(['N2']);
    expect(removeC1({ snapshots: snaps }, [created('c2', 50)])).toEqual([]);
  });
  test('under pressure, the container of a terminated pod may go', () => {
    const snaps = around({ phase: 'Succeeded' });
    const samples = [
      { t: 495, diskPressure: false, evicted: [], pressure: true, fillersPresent: 3 },
    ];
    expect(removeC1({ snapshots: snaps, samples })).toEqual([]);
  });
  test('under pressure, a pod that turned Succeeded between the snapshots may have been seen terminated: none; Running on both sides: N2', () => {
    const samples = [
      { t: 495, diskPressure: false, evicted: [], pressure: true, fillersPresent: 3 },
    ];
    const turned = around({ phase: 'Running' }, { phase: 'Succeeded' });
    expect(removeC1({ snapshots: turned, samples })).toEqual([]);
    expect(removeC1({ snapshots: turned })).toEqual(['N2']);
    expect(removeC1({ snapshots: around({ phase: 'Running' }), samples })).toEqual(['N2']);
  });
  test('a container the API reports running on both sides of its removal: N3', () => {
    const snaps = around({ phase: 'Running', running: ['c1'] });
    expect(removeC1({ snapshots: snaps })).toEqual(['N3']);
  });
  test('removals inside a gap of the event stream, or of pods being deleted, are not judged', () => {
    const snaps = around({ phase: 'Succeeded' }, { phase: 'Succeeded', deleting: true });
    expect(removeC1({ snapshots: snaps })).toEqual([]);
    expect(removeC1({ snapshots: around({ phase: 'Succeeded' }), gaps: [[400, 600]] })).toEqual([]);
  });
  test("a pod's log directory removed while it exists: N2", () => {
    const snaps = around({ phase: 'Succeeded' });
    expect(
      judge(
        inputs({ snapshots: snaps, logDirsGone: [{ t: 500, podUid: 'u1', dir: 'ns_p_u1' }] }),
      ).map((x) => x.invariant),
    ).toEqual(['N2']);
  });
});

describe('N4 and N5', () => {
  test('DiskPressure while fillers were there: N4; with none left: none', () => {
    expect(
      judge(
        inputs({
          samples: [{ t: 1, diskPressure: true, evicted: [], pressure: true, fillersPresent: 2 }],
        }),
      ).map((x) => x.invariant),
    ).toEqual(['N4']);
    expect(
      judge(
        inputs({
          samples: [{ t: 1, diskPressure: true, evicted: [], pressure: true, fillersPresent: 0 }],
        }),
      ),
    ).toEqual([]);
  });
  test('at the end: a container of a pod long gone, an image unused past the maximum age: N5', () => {
    const v = judge(
      inputs({
        snapshots: [{ t: 1_000, pods: [pod({})] }],
        maxAgeMs: 60_000,
        lastNamed: new Map([['app', 1_000]]),
        end: {
          t: 200_000,
          imageNames: ['docker.io/library/app:1', 'docker.io/library/pin:1'],
          containers: [{ id: 'c1', podUid: 'u1', name: 'main', running: false }],
          pods: [],
        },
      }),
    );
    expect(v.map((x) => x.invariant)).toEqual(['N5', 'N5']);
  });
});
