import { parseEventLine } from './runtime-events.ts';

test('a line of `ctr events` (containerd 1.6): Go time, namespace, topic, JSON', () => {
  expect(
    parseEventLine(
      '2026-12-05 12:00:01.123456789 +0000 UTC k8s.io /images/delete {"name":"docker.io/library/soak-app-0:latest"}',
    ),
  ).toEqual({
    namespace: 'k8s.io',
    topic: '/images/delete',
    body: { name: 'docker.io/library/soak-app-0:latest' },
  });
  expect(
    parseEventLine(
      '2026-12-05 12:00:01 +0000 UTC k8s.io /tasks/exit {"container_id":"abc","exit_status":1}',
    )?.body,
  ).toEqual({
    container_id: 'abc',
    exit_status: 1,
  });
});

test('anything else is not an event', () => {
  expect(parseEventLine('')).toBeUndefined();
  expect(parseEventLine('ctr: failed to dial')).toBeUndefined();
  expect(
    parseEventLine('2026-12-05 12:00:01 +0000 UTC k8s.io /images/delete {not json'),
  ).toBeUndefined();
});
