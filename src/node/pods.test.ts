import { toNodePod } from './pods.ts';

describe('toNodePod', () => {
  test('images of containers, init and ephemeral containers, and of image volumes (KEP-4639)', () => {
    const pod = toNodePod({
      metadata: { uid: 'u1' },
      spec: {
        containers: [{ image: 'app:1' }, { image: 'app:1' }],
        initContainers: [{ image: 'init:1' }],
        ephemeralContainers: [{ image: 'debug:1' }],
        volumes: [
          { image: { reference: 'docker.io/team/data:1' } },
          { image: { reference: 'models@sha256:' + 'a'.repeat(64) } },
          { image: {} },
          {},
        ],
      },
      status: { phase: 'Running' },
    });
    expect(pod).toEqual({
      uid: 'u1',
      phase: 'Running',
      evicted: false,
      images: ['app:1', 'init:1', 'debug:1'],
      volumeImages: ['docker.io/team/data:1', 'models@sha256:' + 'a'.repeat(64)],
    });
  });

  test('a pod without image volumes has none', () => {
    expect(toNodePod({ metadata: { uid: 'u2' }, spec: { volumes: [{}] } })).toEqual({
      uid: 'u2',
      phase: 'Pending',
      evicted: false,
      images: [],
    });
  });
});
