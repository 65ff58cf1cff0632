import { conciseCriError, sandboxImageFromStatusInfo } from './runtime.ts';

test.each([
  [
    'CRI RuntimeService/Version: UNAVAILABLE: No connection established. Last error: Error: connect ENOENT /run/x.sock. Resolution note: ',
    'CRI RuntimeService/Version: UNAVAILABLE: connect ENOENT /run/x.sock',
  ],
  [
    'CRI ImageService/ListImages: DEADLINE_EXCEEDED: Deadline exceeded after 2.001s',
    'CRI ImageService/ListImages: DEADLINE_EXCEEDED: Deadline exceeded after 2.001s',
  ],
])('conciseCriError(%s)', (message, concise) => {
  expect(conciseCriError(new Error(message))).toBe(concise);
});

test.each<[Record<string, string>, string | undefined]>([
  [
    { config: JSON.stringify({ sandboxImage: 'registry.k8s.io/pause:3.6' }) },
    'registry.k8s.io/pause:3.6',
  ],
  [{ config: JSON.stringify({ containerd: {} }) }, undefined],
  [{ config: 'not json' }, undefined],
  [{}, undefined],
])('sandbox image from Status info %p', (info, image) => {
  expect(sandboxImageFromStatusInfo(info)).toBe(image);
});
