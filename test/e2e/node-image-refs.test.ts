// Image references in the spellings the API accepts, judged by containerd:
// each spelling, as a Pending pod's image and as a --pinned-images pattern,
// must protect exactly the image containerd's CRI resolves it to (ImageStatus,
// which the kubelet asks before it pulls) — for a tag and a digest together,
// also the image its tag alone resolves to (kept on purpose, erring on the
// side of keeping). The images carry the names containerd records for pulls:
// `docker.io/library/…:tag` plus `…@digest` for a pull by tag, `…@digest` only
// for a pull by tag+digest. And an image volume's image (KEP-4639) is kept
// while its pod may still run or a container of it remains, read from the pod
// through the API (pods here are on no kubelet, and containerd 1.6 mounts no
// image volumes: the mount itself is not exercised).
import { imageBlobs, randomLayer, type BuiltImage, type Layer } from '../../cluster/oci-image.ts';
import { e2e } from '../support/e2e.ts';
import { fileContainerd } from '../support/containerd.ts';
import { EVERY_UNPROTECTED_IMAGE, runNodeOnce, type NodeRun } from '../support/kubegc-node.ts';
import { nodeObject, times } from '../support/objects.ts';

const KiB = 1024;

const { cluster, c, namespace } = await e2e({ deleteNamespaces: true });
const h = await fileContainerd({ sizeMiB: 64 });
const node = nodeObject(c, 'kubegc-e2e-refs');

/** The manifest digest an image of these layers gets (the name is not part of it). */
const manifestDigestOf = (layers: Layer[]): string =>
  imageBlobs({ name: 'probe', layers }).manifestDigest;

const layerA = randomLayer(64 * KiB);
const layerF = randomLayer(64 * KiB);
const dA = manifestDigestOf([layerA]);
const dF = manifestDigestOf([layerF]);
/** The images, each under every name it is imported as. */
const IMAGES: { key: string; names: string[]; layer: Layer }[] = [
  // Pulled as refs-app:1.25: containerd records the tag and the digest.
  {
    key: 'A',
    names: ['docker.io/library/refs-app:1.25', `docker.io/library/refs-app@${dA}`],
    layer: layerA,
  },
  { key: 'B', names: ['docker.io/library/refs-app:latest'], layer: randomLayer(64 * KiB) },
  { key: 'G', names: ['docker.io/library/refs-app:1.26'], layer: randomLayer(64 * KiB) },
  { key: 'C', names: ['docker.io/team/refs-app:1.25'], layer: randomLayer(64 * KiB) },
  { key: 'D', names: ['localhost:5000/refs-app:1.25'], layer: randomLayer(64 * KiB) },
  { key: 'E', names: ['registry.test:5000/team/refs-app:1.25'], layer: randomLayer(64 * KiB) },
  { key: 'H', names: ['localhost/refs-app:1.25'], layer: randomLayer(64 * KiB) },
  // Pulled as refs-dig:v1@digest: ParseDockerRef drops the tag, only the digest is recorded.
  { key: 'F', names: [`docker.io/library/refs-dig@${dF}`], layer: layerF },
];

/** Image key → ID, once imported. */
const ids = new Map<string, string>();
const idOf = (key: string): string => ids.get(key) ?? `no image ${key}`;
beforeAll(async () => {
  const built: BuiltImage[] = await h.importImages(
    IMAGES.flatMap((i) => i.names.map((name) => ({ name, layers: [i.layer] }))),
  );
  for (const i of IMAGES) ids.set(i.key, built.find((b) => b.name === i.names[0])?.id ?? '');
});

/** Image IDs as their keys (the pause image as "pause"), sorted. */
function keysOf(imageIds: Iterable<string>): string[] {
  const byId = new Map<string, string>([[h.pause.id, 'pause']]);
  for (const [key, id] of ids) byId.set(id, key);
  return [...imageIds].map((id) => byId.get(id) ?? id).sort();
}

// The spellings, and for a tag+digest spelling its tag alone.
const SPELLINGS: [spelling: string, tagAlone?: string][] = [
  ['refs-app:1.25'],
  ['docker.io/refs-app:1.25'],
  ['library/refs-app:1.25'],
  ['docker.io/library/refs-app:1.25'],
  ['index.docker.io/refs-app:1.25'],
  ['index.docker.io/library/refs-app:1.25'],
  ['refs-app'],
  ['docker.io/refs-app'],
  [`refs-app@${dA}`],
  [`docker.io/refs-app@${dA}`],
  [`refs-app:1.25@${dA}`, 'refs-app:1.25'],
  [`refs-app:1.26@${dA}`, 'refs-app:1.26'],
  [`refs-dig@${dF}`],
  [`docker.io/refs-dig:v1@${dF}`, 'docker.io/refs-dig:v1'],
  ['team/refs-app:1.25'],
  ['docker.io/team/refs-app:1.25'],
  ['localhost:5000/refs-app:1.25'],
  ['registry.test:5000/team/refs-app:1.25'],
  ['localhost/refs-app:1.25'],
  ['refs-app:1.24'],
  ['REFS-APP:1.25'],
];

/** What containerd resolves each spelling to (and its tag alone, if any): the images it must protect. */
async function containerdAnswers(): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const [spelling, tagAlone] of SPELLINGS) {
    const resolved = [spelling, tagAlone].filter((r) => r !== undefined);
    const found = await Promise.all(resolved.map((r) => h.resolveImage(r)));
    out[spelling] = keysOf(new Set(found.filter((id) => id !== undefined)));
  }
  return out;
}

// Every unprotected image would go.
const EVERYTHING = ['--dry-run', ...EVERY_UNPROTECTED_IMAGE];

/** The imported images a dry run keeps (the pause image, the sandbox image, left out). */
async function keptBy(run: NodeRun): Promise<string[]> {
  expect(run.imagePass()).toMatchObject({ dryRun: true });
  const gone = new Set(run.removedImages());
  return keysOf([...(await h.imageIds())].filter((id) => !gone.has(id) && id !== h.pause.id));
}

test('the images look as containerd records pulls: by tag with the digest, by tag+digest with the digest only', async () => {
  const listed = new Map((await h.cri.listImages()).map((i) => [i.id, i]));
  expect(listed.get(idOf('A'))).toMatchObject({
    repoTags: ['docker.io/library/refs-app:1.25'],
    repoDigests: [`docker.io/library/refs-app@${dA}`],
  });
  expect(listed.get(idOf('F'))).toMatchObject({
    repoTags: [],
    repoDigests: [`docker.io/library/refs-dig@${dF}`],
  });
  // containerd's own verdicts, which the tests below hold kubegc to.
  expect(await containerdAnswers()).toEqual({
    'refs-app:1.25': ['A'],
    'docker.io/refs-app:1.25': ['A'],
    'library/refs-app:1.25': ['A'],
    'docker.io/library/refs-app:1.25': ['A'],
    'index.docker.io/refs-app:1.25': ['A'],
    'index.docker.io/library/refs-app:1.25': ['A'],
    'refs-app': ['B'],
    'docker.io/refs-app': ['B'],
    [`refs-app@${dA}`]: ['A'],
    [`docker.io/refs-app@${dA}`]: ['A'],
    [`refs-app:1.25@${dA}`]: ['A'],
    // The digest finds A; the tag alone would find G.
    [`refs-app:1.26@${dA}`]: ['A', 'G'],
    [`refs-dig@${dF}`]: ['F'],
    [`docker.io/refs-dig:v1@${dF}`]: ['F'],
    'team/refs-app:1.25': ['C'],
    'docker.io/team/refs-app:1.25': ['C'],
    'localhost:5000/refs-app:1.25': ['D'],
    'registry.test:5000/team/refs-app:1.25': ['E'],
    'localhost/refs-app:1.25': ['H'],
    'refs-app:1.24': [],
    'REFS-APP:1.25': [],
  });
});

test('a Pending pod naming each spelling keeps exactly the images containerd resolves it to', async () => {
  const ns = await namespace('node-refs');
  const expected = await containerdAnswers();
  const runs = await times(
    SPELLINGS.length,
    async (i) => {
      const [spelling] = SPELLINGS[i] ?? [''];
      // A node of its own per spelling: the pass sees that one pod.
      const nodeName = `${node.name}-${i}`;
      await c.core.createNode({ body: { metadata: { name: nodeName } } });
      const name = `p-${i}`;
      try {
        await c.core.createNamespacedPod({
          namespace: ns,
          body: {
            metadata: { name },
            spec: { nodeName, containers: [{ name: 'app', image: spelling }] },
          },
        });
        const run = await runNodeOnce(h, [
          ...EVERYTHING,
          '--kubeconfig',
          cluster.kubeconfig,
          '--node-name',
          nodeName,
        ]);
        expect(run.logged('container GC pass done')[0]?.podsKnown).toBe(true);
        return [spelling, await keptBy(run)] as const;
      } finally {
        // No kubelet will confirm the deletion: at once.
        await c.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
        await c.core.deleteNode({ name: nodeName });
      }
    },
    3,
  );
  expect(Object.fromEntries(runs)).toEqual(expected);
});

test('--pinned-images with each spelling pins exactly the images containerd resolves it to; an invalid one is a usage error', async () => {
  const expected = await containerdAnswers();
  const runs = await times(
    SPELLINGS.length,
    async (i) => {
      const [spelling] = SPELLINGS[i] ?? [''];
      const run = await runNodeOnce(h, [...EVERYTHING, '--pinned-images', spelling]);
      if (run.code === 2) return [spelling, run.raw.join('\n')] as const;
      return [spelling, await keptBy(run)] as const;
    },
    3,
  );
  expect(Object.fromEntries(runs)).toEqual({
    ...expected,
    'REFS-APP:1.25': expect.stringMatching(
      /--pinned-images: "REFS-APP:1.25" can never match an image: .*must be lowercase/,
    ),
  });
});

test.each([
  ['docker.io/refs-app:*', ['A', 'B', 'G']],
  ['refs-app:1.2?', ['A', 'G']],
  ['index.docker.io/library/refs-*', ['A', 'B', 'F', 'G']],
  ['docker.io/team/*', ['C']],
  ['localhost:5000/*', ['D']],
  ['*/refs-app:1.25', ['A', 'C', 'D', 'E', 'H']],
  ['refs-dig@sha256:*', ['F']],
])('--pinned-images=%s pins %p', async (pattern, expected) => {
  const run = await runNodeOnce(h, [...EVERYTHING, '--pinned-images', pattern]);
  expect(await keptBy(run)).toEqual(expected);
});

test('--pinned-images=<an image ID prefix>* pins that image', async () => {
  const pattern = `${idOf('A').slice(0, 'sha256:'.length + 8)}*`;
  const run = await runNodeOnce(h, [...EVERYTHING, '--pinned-images', pattern]);
  expect(await keptBy(run)).toEqual(['A']);
});

test("image volumes' images (KEP-4639), named in any spelling: kept while the pod is pending or a terminated pod's container remains; one no pod needs goes", async () => {
  const [data, jobData, doneData, other] = await h.importImages(
    ['team/refs-data:1', 'team/refs-job-data:1', 'team/refs-done-data:1', 'team/refs-other:1'].map(
      (n) => ({ name: `docker.io/${n}`, layers: [randomLayer(64 * KiB)] }),
    ),
  );
  if (!data || !jobData || !doneData || !other) throw new Error('images not built');
  const ns = await namespace('node-refs-vol');
  const podWithVolume = async (name: string, reference: string, phase?: string) => {
    const pod = await c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name },
        spec: {
          nodeName: node.name,
          restartPolicy: 'Never',
          containers: [
            {
              name: 'app',
              image: h.pause.name,
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
          volumes: [{ name: 'data', image: { reference, pullPolicy: 'IfNotPresent' } }],
        },
      },
    });
    // The API server keeps the field (the ImageVolume gate is on by default in v1.35).
    expect(pod.spec?.volumes?.[0]?.image?.reference).toBe(reference);
    if (phase)
      await c.core.replaceNamespacedPodStatus({
        namespace: ns,
        name,
        body: { ...pod, status: { phase } },
      });
    return pod;
  };
  await podWithVolume('pending', 'index.docker.io/team/refs-data:1');
  // A finished Job whose exited container is still on the node (the kubelet,
  // seeing the mount in its ContainerStatus, keeps the image too).
  const job = await podWithVolume('job', 'docker.io/team/refs-job-data:1', 'Succeeded');
  const sandbox = await h.runPod({ name: 'job', namespace: ns, uid: job.metadata?.uid ?? '' });
  const exited = await h.runContainer(
    sandbox,
    { name: 'app', image: h.pause.name, command: ['/bin/true'] },
    'exited',
  );
  await h.stopPod(sandbox);
  // A finished pod whose containers are gone: nothing mounts its image any more.
  await podWithVolume('done', 'team/refs-done-data:1', 'Failed');

  // A real pass (no dry run): every image not protected goes.
  const run = await runNodeOnce(h, [
    ...EVERY_UNPROTECTED_IMAGE,
    '--kubeconfig',
    cluster.kubeconfig,
    '--node-name',
    node.name,
  ]);
  expect(run.logged('container GC pass done')[0]?.podsKnown).toBe(true);
  // The Job's container is the newest of its (pod, container): kept.
  expect(await h.containerIds()).toEqual(new Set([exited]));
  const left = await h.imageIds();
  for (const kept of [data, jobData]) expect(left).toContain(kept.id);
  for (const gone of [doneData, other]) expect(left).not.toContain(gone.id);
  expect(run.removedImages()).toEqual(expect.arrayContaining([doneData.id, other.id]));
  for (const name of ['pending', 'job', 'done'])
    await c.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
});
