// Images expected back: the decision on each workload kind (pure), and the
// chain from a pod's controller read over a stand-in API server with the real
// KubeClient (a 403, a 404 naming the object or only the path, the cache).
import { quietLog, testMetrics } from '../../test/support/fake-cri-runtime.ts';
import { standInPerTest } from '../api/stand-in-server.testing.ts';
import {
  apiWorkloadReader,
  cronJobOfJobName,
  decideWorkload,
  ExpectedBackChecker,
  summarizeWorkload,
  workloadKindOf,
  type RawWorkload,
  type WorkloadKind,
} from './expected-back.ts';
import type { LastUser } from './image-gc-policy.ts';
import { imageNames } from './image-refs.ts';
import type { Logger } from '../log.ts';

const image = (tag: string) => ({ id: `sha256:${tag.length}`, repoTags: [tag], repoDigests: [] });
/** The names of an image the runtime lists as docker.io/library/nightly-tool:1. */
const NIGHTLY = imageNames(image('docker.io/library/nightly-tool:1'));
const OTHER = imageNames(image('docker.io/library/other:1'));

const podSpec = (img: string) => ({ containers: [{ image: img }] });

function decide(kind: WorkloadKind, w: RawWorkload, names = NIGHTLY) {
  return decideWorkload(kind, summarizeWorkload(kind, w), names).expected;
}

describe('the decision on the workload (pure)', () => {
  const cronJob = (spec: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}) => ({
    metadata: { uid: 'c1', ...metadata },
    // As written in the manifest: short, not normalised.
    spec: { jobTemplate: { spec: { template: { spec: podSpec('nightly-tool:1') } } }, ...spec },
  });

  test('a CronJob that names the image (both sides normalised) expects it back', () => {
    expect(decide('CronJob', cronJob())).toBe(true);
    expect(decide('CronJob', cronJob(), OTHER)).toBe(false);
  });

  test('a suspended CronJob, one being deleted, or one whose template names another image does not', () => {
    expect(decide('CronJob', cronJob({ suspend: true }))).toBe(false);
    expect(decide('CronJob', cronJob({ suspend: false }))).toBe(true);
    expect(decide('CronJob', cronJob({}, { deletionTimestamp: '2026-12-07T00:00:00Z' }))).toBe(
      false,
    );
    expect(
      decide(
        'CronJob',
        cronJob({ jobTemplate: { spec: { template: { spec: podSpec('nightly-tool:2') } } } }),
      ),
    ).toBe(false);
    expect(
      decideWorkload('CronJob', summarizeWorkload('CronJob', cronJob({ suspend: true })), NIGHTLY),
    ).toEqual({ expected: false, why: 'suspended' });
  });

  test('a Deployment or StatefulSet scaled to zero still expects its image back; init containers and image volumes count', () => {
    const apps = (replicas: number, spec: Record<string, unknown>): RawWorkload =>
      ({ metadata: { uid: 'd1' }, spec: { replicas, template: { spec } } }) as RawWorkload;
    expect(decide('Deployment', apps(0, podSpec('nightly-tool:1')))).toBe(true);
    expect(decide('StatefulSet', apps(0, podSpec('docker.io/nightly-tool:1')))).toBe(true);
    expect(
      decide(
        'DaemonSet',
        apps(1, {
          containers: [{ image: 'app:1' }],
          initContainers: [{ image: 'nightly-tool:1' }],
        }),
      ),
    ).toBe(true);
    expect(
      decide(
        'ReplicaSet',
        apps(0, {
          containers: [{ image: 'app:1' }],
          volumes: [{ image: { reference: 'index.docker.io/library/nightly-tool:1' } }],
        }),
      ),
    ).toBe(true);
    expect(decide('Deployment', apps(3, podSpec('app:1')))).toBe(false);
  });

  test('a Job expects its image back only while it has not finished', () => {
    const job = (conditions: { type: string; status: string }[]): RawWorkload => ({
      metadata: { uid: 'j1' },
      spec: { template: { spec: podSpec('nightly-tool:1') } },
      status: { conditions },
    });
    expect(decide('Job', job([]))).toBe(true);
    expect(decide('Job', job([{ type: 'Complete', status: 'False' }]))).toBe(true);
    expect(decide('Job', job([{ type: 'Complete', status: 'True' }]))).toBe(false);
    expect(decide('Job', job([{ type: 'Failed', status: 'True' }]))).toBe(false);
  });

  test('kinds are followed by group and kind, whatever version the reference was written with', () => {
    expect(workloadKindOf({ apiVersion: 'batch/v1', kind: 'Job' })).toBe('Job');
    expect(workloadKindOf({ apiVersion: 'batch/v1beta1', kind: 'CronJob' })).toBe('CronJob');
    expect(workloadKindOf({ apiVersion: 'apps/v1', kind: 'Deployment' })).toBe('Deployment');
    expect(workloadKindOf({ apiVersion: 'extensions/v1beta1', kind: 'ReplicaSet' })).toBe(
      undefined,
    );
    expect(workloadKindOf({ apiVersion: 'v1', kind: 'ReplicationController' })).toBe(undefined);
    expect(workloadKindOf({ apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout' })).toBe(undefined);
    expect(workloadKindOf({ apiVersion: 'example.com/v1', kind: 'Job' })).toBe(undefined);
  });

  test("a CronJob's Job names: <cronjob>-<scheduled minutes>", () => {
    expect(cronJobOfJobName('nightly-29012345')).toBe('nightly');
    expect(cronJobOfJobName('db-backup-nightly-29012345')).toBe('db-backup-nightly');
    expect(cronJobOfJobName('migrate')).toBe(undefined);
    expect(cronJobOfJobName('migrate-2')).toBe(undefined);
  });
});

describe('the chain from the pod controller, read over the API', () => {
  const connect = standInPerTest();

  const CRONJOB = {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: 'nightly', namespace: 'shop', uid: 'cron-uid' },
    spec: {
      schedule: '0 3 * * *',
      jobTemplate: { spec: { template: { spec: podSpec('nightly-tool:1') } } },
    },
  };
  const job = (name: string, uid: string, owner?: { kind: string; name: string; uid: string }) => ({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace: 'shop',
      uid,
      ...(owner
        ? { ownerReferences: [{ apiVersion: 'batch/v1', ...owner, controller: true }] }
        : {}),
    },
    spec: { template: { spec: podSpec('nightly-tool:1') } },
    status: { conditions: [{ type: 'Complete', status: 'True' }] },
  });
  const cronOwner = { kind: 'CronJob', name: 'nightly', uid: 'cron-uid' };

  type Answer = { status: number; body: unknown };
  const notFound = (name: string, kind: string): Answer => ({
    status: 404,
    body: {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'NotFound',
      message: `${kind} "${name}" not found`,
      details: { name, kind },
      code: 404,
    },
  });

  /** A stand-in API server answering GETs from `objects` by path; every request is recorded. */
  async function api(objects: Record<string, Answer | object>) {
    const requests: string[] = [];
    const client = await connect((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      res.setHeader('content-type', 'application/json');
      const a = objects[req.url ?? ''];
      const answer: Answer =
        a === undefined
          ? // What the API server says for a resource it does not serve: no object named.
            {
              status: 404,
              body: { kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 },
            }
          : 'status' in a && 'body' in a
            ? (a as Answer)
            : { status: 200, body: a };
      res.statusCode = answer.status;
      res.end(JSON.stringify(answer.body));
    });
    const { metrics, registry } = testMetrics();
    const warnings: { msg: string; fields: Record<string, unknown> }[] = [];
    const log: Logger = {
      ...quietLog,
      warn: (msg, fields = {}) => void warnings.push({ msg, fields }),
    };
    const clock = { t: 1_000_000 };
    const checker = new ExpectedBackChecker(apiWorkloadReader(client), log, metrics, {
      now: () => clock.t,
    });
    const checks = async () =>
      (await registry.getSingleMetricAsString('kubegc_node_expected_back_checks_total'))
        .split('\n')
        .filter((l) => !l.startsWith('#') && l.trim() !== '');
    return { requests, checker, checks, warnings, clock };
  }

  const user = (kind: string, name: string, uid: string, apiVersion = 'batch/v1'): LastUser => ({
    namespace: 'shop',
    owner: { apiVersion, kind, name, uid },
  });
  const JOBS = '/apis/batch/v1/namespaces/shop/jobs';
  const CRONJOBS = '/apis/batch/v1/namespaces/shop/cronjobs';

  test('a finished Job of a CronJob that still names the image: expected back, by the CronJob; two images of its Jobs read it once (cached)', async () => {
    const a = await api({
      [`${JOBS}/nightly-29000000`]: job('nightly-29000000', 'j1', cronOwner),
      [`${JOBS}/nightly-29001440`]: job('nightly-29001440', 'j2', cronOwner),
      [`${CRONJOBS}/nightly`]: CRONJOB,
    });
    const [first, second] = await Promise.all([
      a.checker.check(user('Job', 'nightly-29000000', 'j1'), NIGHTLY),
      a.checker.check(user('Job', 'nightly-29001440', 'j2'), NIGHTLY),
    ]);
    expect(first).toMatchObject({ result: 'expected-back', workload: 'CronJob shop/nightly' });
    expect(second).toMatchObject({ result: 'expected-back', workload: 'CronJob shop/nightly' });
    // The same Job again, for another image it used: answered from the cache.
    expect(await a.checker.check(user('Job', 'nightly-29000000', 'j1'), OTHER)).toMatchObject({
      result: 'not-expected-back',
      workload: 'CronJob shop/nightly',
    });
    expect(a.requests.sort()).toEqual([
      `GET ${CRONJOBS}/nightly`,
      `GET ${JOBS}/nightly-29000000`,
      `GET ${JOBS}/nightly-29001440`,
    ]);
    expect(await a.checks()).toEqual([
      'kubegc_node_expected_back_checks_total{result="expected-back"} 2',
      'kubegc_node_expected_back_checks_total{result="not-expected-back"} 1',
    ]);
    // After the TTL, asked again.
    a.clock.t += 60_000;
    await a.checker.check(user('Job', 'nightly-29000000', 'j1'), NIGHTLY);
    expect(a.requests).toHaveLength(5);
  });

  test('403 (RBAC): unreadable, counted, logged once per workload per TTL; never thrown', async () => {
    const a = await api({
      [`${JOBS}/nightly-29000000`]: job('nightly-29000000', 'j1', cronOwner),
      [`${CRONJOBS}/nightly`]: {
        status: 403,
        body: {
          kind: 'Status',
          status: 'Failure',
          reason: 'Forbidden',
          message:
            'cronjobs.batch "nightly" is forbidden: User "system:serviceaccount:kubegc-system:kubegc-node" cannot get resource "cronjobs"',
          code: 403,
        },
      },
    });
    const v = await a.checker.check(user('Job', 'nightly-29000000', 'j1'), NIGHTLY);
    expect(v).toMatchObject({ result: 'unreadable', workload: 'CronJob shop/nightly' });
    expect(v.why).toMatch(/403.*forbidden/);
    await a.checker.check(user('Job', 'nightly-29000000', 'j1'), NIGHTLY);
    expect(await a.checks()).toEqual([
      'kubegc_node_expected_back_checks_total{result="unreadable"} 2',
    ]);
    expect(a.warnings).toEqual([
      {
        msg: expect.stringMatching(
          /cannot read a workload; the images it last used are not expected back/,
        ),
        fields: { workload: 'CronJob shop/nightly', error: expect.stringMatching(/^403: /) },
      },
    ]);
  });

  test('a 404 naming the Job: gone; a 404 of the path (a kind not served) or a 500: unreadable', async () => {
    const a = await api({
      [`${JOBS}/migrate`]: notFound('migrate', 'jobs'),
      [`/apis/apps/v1/namespaces/shop/statefulsets/db`]: {
        status: 500,
        body: { kind: 'Status', status: 'Failure', message: 'etcdserver: request timed out' },
      },
    });
    expect(await a.checker.check(user('Job', 'migrate', 'j9'), NIGHTLY)).toMatchObject({
      result: 'gone',
      workload: 'Job shop/migrate',
    });
    expect(
      await a.checker.check(user('DaemonSet', 'agent', 'd1', 'apps/v1'), NIGHTLY),
    ).toMatchObject({ result: 'unreadable', workload: 'DaemonSet shop/agent' });
    expect(
      await a.checker.check(user('StatefulSet', 'db', 's1', 'apps/v1'), NIGHTLY),
    ).toMatchObject({ result: 'unreadable', workload: 'StatefulSet shop/db' });
    expect(await a.checks()).toEqual([
      'kubegc_node_expected_back_checks_total{result="gone"} 1',
      'kubegc_node_expected_back_checks_total{result="unreadable"} 2',
    ]);
  });

  test("a CronJob's Job deleted after it finished (ttlSecondsAfterFinished): the CronJob its name points at decides", async () => {
    const a = await api({
      [`${JOBS}/nightly-29000000`]: notFound('nightly-29000000', 'jobs'),
      [`${CRONJOBS}/nightly`]: CRONJOB,
      [`${JOBS}/gone-29000000`]: notFound('gone-29000000', 'jobs'),
      [`${CRONJOBS}/gone`]: notFound('gone', 'cronjobs'),
    });
    expect(await a.checker.check(user('Job', 'nightly-29000000', 'j1'), NIGHTLY)).toMatchObject({
      result: 'expected-back',
      workload: 'CronJob shop/nightly',
    });
    expect(await a.checker.check(user('Job', 'gone-29000000', 'j2'), NIGHTLY)).toMatchObject({
      result: 'gone',
      workload: 'Job shop/gone-29000000',
    });
  });

  test('another object under the name (deleted and created again): the one referenced is gone', async () => {
    const a = await api({ [`${CRONJOBS}/nightly`]: CRONJOB });
    expect(
      await a.checker.check(user('CronJob', 'nightly', 'an-older-uid'), NIGHTLY),
    ).toMatchObject({ result: 'gone', workload: 'CronJob shop/nightly' });
    expect(await a.checker.check(user('CronJob', 'nightly', 'cron-uid'), NIGHTLY)).toMatchObject({
      result: 'expected-back',
    });
  });

  test('ReplicaSet: its Deployment decides (scaled to zero still counts); a ReplicaSet no Deployment controls decides itself', async () => {
    const RS = '/apis/apps/v1/namespaces/shop/replicasets';
    const rs = (name: string, uid: string, owner?: object, img = 'web:1') => ({
      metadata: {
        name,
        uid,
        ...(owner
          ? { ownerReferences: [{ apiVersion: 'apps/v1', controller: true, ...owner }] }
          : {}),
      },
      spec: { replicas: 0, template: { spec: podSpec(img) } },
    });
    const a = await api({
      [`${RS}/web-abc`]: rs('web-abc', 'rs1', { kind: 'Deployment', name: 'web', uid: 'dep1' }),
      '/apis/apps/v1/namespaces/shop/deployments/web': {
        metadata: { name: 'web', uid: 'dep1' },
        spec: { replicas: 0, template: { spec: podSpec('web:2') } },
      },
      [`${RS}/solo`]: rs('solo', 'rs2', undefined, 'nightly-tool:1'),
      [`${RS}/rolled`]: rs(
        'rolled',
        'rs3',
        { kind: 'Rollout', name: 'r', uid: 'x' },
        'nightly-tool:1',
      ),
    });
    const WEB1 = imageNames(image('docker.io/library/web:1'));
    const WEB2 = imageNames(image('docker.io/library/web:2'));
    // The Deployment has rolled on to web:2: web:1 is not coming back; web:2 is, at 0 replicas.
    expect(
      await a.checker.check(user('ReplicaSet', 'web-abc', 'rs1', 'apps/v1'), WEB1),
    ).toMatchObject({ result: 'not-expected-back', workload: 'Deployment shop/web' });
    expect(
      await a.checker.check(user('ReplicaSet', 'web-abc', 'rs1', 'apps/v1'), WEB2),
    ).toMatchObject({ result: 'expected-back', workload: 'Deployment shop/web' });
    expect(
      await a.checker.check(user('ReplicaSet', 'solo', 'rs2', 'apps/v1'), NIGHTLY),
    ).toMatchObject({ result: 'expected-back', workload: 'ReplicaSet shop/solo' });
    expect(
      await a.checker.check(user('ReplicaSet', 'rolled', 'rs3', 'apps/v1'), NIGHTLY),
    ).toMatchObject({ result: 'expected-back', workload: 'ReplicaSet shop/rolled' });
  });

  test('a controller kubegc does not follow: unsupported-kind, nothing read', async () => {
    const a = await api({});
    expect(
      await a.checker.check(user('ReplicationController', 'old', 'rc1', 'v1'), NIGHTLY),
    ).toMatchObject({ result: 'unsupported-kind', workload: 'ReplicationController shop/old' });
    expect(
      await a.checker.check(user('Workflow', 'wf', 'w1', 'argoproj.io/v1alpha1'), NIGHTLY),
    ).toMatchObject({ result: 'unsupported-kind' });
    expect(a.requests).toEqual([]);
    expect(await a.checks()).toEqual([
      'kubegc_node_expected_back_checks_total{result="unsupported-kind"} 2',
    ]);
  });
});

test('the cache holds at most maxEntries answers (the least recently used go first), and a reader that throws is unreadable', async () => {
  const reads: string[] = [];
  const { metrics } = testMetrics();
  const checker = new ExpectedBackChecker(
    (kind, _ns, name) => {
      reads.push(name);
      if (name === 'boom') return Promise.reject(new Error('socket hang up'));
      return Promise.resolve({
        kind: 'found',
        summary: {
          uid: name,
          deleting: false,
          suspended: false,
          finished: false,
          images: kind === 'DaemonSet' ? NIGHTLY : [],
        },
      });
    },
    quietLog,
    metrics,
    { maxEntries: 2, now: () => 0 },
  );
  const ds = (name: string) => user2('DaemonSet', name);
  await checker.check(ds('a'), NIGHTLY);
  await checker.check(ds('b'), NIGHTLY);
  await checker.check(ds('a'), NIGHTLY); // cached, and now the most recently used
  await checker.check(ds('c'), NIGHTLY); // b goes
  await checker.check(ds('a'), NIGHTLY); // still cached
  await checker.check(ds('b'), NIGHTLY); // read again
  expect(reads).toEqual(['a', 'b', 'c', 'b']);
  expect(await checker.check(ds('boom'), NIGHTLY)).toMatchObject({
    result: 'unreadable',
    why: 'socket hang up',
  });
});

function user2(kind: string, name: string): LastUser {
  return { namespace: 'ns', owner: { apiVersion: 'apps/v1', kind, name, uid: name } };
}
