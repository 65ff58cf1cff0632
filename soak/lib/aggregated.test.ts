// The AggWidgets' synthetic history (aggregated.ts): each write recorded in etcd revisions read
// on the right side of it, and no bookmark while a write is in flight.
import { Mutex, SyntheticStream, type SyntheticObject } from './aggregated.ts';
import { History } from './history.ts';
import { AGGREGATED } from './resources.ts';

/** A fake etcd revision that tests move by hand, and the order of events around it. */
class Etcd {
  rev = 1;
  readonly log: string[] = [];
  read = (): Promise<number> => {
    this.log.push(`read ${this.rev}`);
    return Promise.resolve(this.rev);
  };
}

const WIDGET: SyntheticObject = { namespace: 'soak-a', name: 'agg-x', uid: 'A' };

/** A promise and the function that resolves it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** A stream started (an empty list) at revision 1 of a fake etcd. */
async function started(): Promise<{ etcd: Etcd; history: History; stream: SyntheticStream }> {
  const etcd = new Etcd();
  const history = new History();
  const stream = new SyntheticStream(history, AGGREGATED, etcd.read);
  await stream.start();
  return { etcd, history, stream };
}

describe('SyntheticStream', () => {
  test('a create is ADDED at the revision read after it answered; a delete DELETED at the one read before it started', async () => {
    const { etcd, history, stream } = await started();
    etcd.rev = 5;
    await stream.created(() => {
      // Other writes land while the create is in flight.
      etcd.rev = 7;
      return Promise.resolve(WIDGET);
    });
    expect(history.stateAt('A', 6).kind).toBe('absent');
    expect(history.stateAt('A', 7).kind).toBe('exists');
    etcd.rev = 9;
    await stream.deleted(WIDGET, () => {
      etcd.rev = 12;
      return Promise.resolve();
    });
    expect(history.stateAt('A', 8).kind).toBe('exists');
    expect(history.stateAt('A', 9).kind).toBe('gone');
    const rec = history.objects.get('A');
    expect(rec).toMatchObject({
      resource: 'aggwidgets',
      kind: 'AggWidget',
      group: AGGREGATED.group,
    });
  });

  test('a live object is certain only through the last write until a bookmark; a bookmark waits for the write in flight', async () => {
    const { etcd, history, stream } = await started();
    etcd.rev = 5;
    await stream.created(() => Promise.resolve(WIDGET));
    etcd.rev = 20;
    expect(history.stateAt('A', 15).kind).toBe('unknown');

    // A delete in flight (its DELETED recorded at 20, the write held open).
    const held = gate();
    const writing = gate();
    const deleting = stream.deleted(WIDGET, async () => {
      etcd.log.push('delete starts');
      writing.open();
      await held.opened;
      etcd.rev = 22;
      etcd.log.push('delete answered');
    });
    await writing.opened;
    const bookmarked = stream.bookmark();
    etcd.rev = 21;
    held.open();
    await Promise.all([deleting, bookmarked]);
    expect(etcd.log.slice(-4)).toEqual(['read 20', 'delete starts', 'delete answered', 'read 22']);
    expect(history.stateAt('A', 19).kind).toBe('exists');
    expect(history.stateAt('A', 20).kind).toBe('gone');

    // Another object, left alive: the bookmark makes its state certain through the revision read.
    etcd.rev = 30;
    await stream.created(() => Promise.resolve({ ...WIDGET, name: 'agg-y', uid: 'B' }));
    etcd.rev = 40;
    expect(history.stateAt('B', 35).kind).toBe('unknown');
    await stream.bookmark();
    expect(history.stateAt('B', 40).kind).toBe('exists');
    expect(history.stateAt('B', 41).kind).toBe('unknown');
  });

  test('a write that fails is recorded as far as it got, and does not block the next', async () => {
    const { etcd, history, stream } = await started();
    await expect(stream.created(() => Promise.reject(new Error('503')))).rejects.toThrow('503');
    expect(history.objects.size).toBe(0);
    etcd.rev = 3;
    await stream.created(() => Promise.resolve(WIDGET));
    expect(history.stateAt('A', 3).kind).toBe('exists');
  });
});

describe('Mutex', () => {
  test('runs sections one at a time, in call order, past a failure', async () => {
    const m = new Mutex();
    const order: string[] = [];
    const first = gate();
    const a = m.run(async () => {
      order.push('a starts');
      await first.opened;
      order.push('a ends');
    });
    const b = m.run(() => {
      order.push('b');
      return Promise.reject(new Error('b failed'));
    });
    const c = m.run(() => {
      order.push('c');
      return Promise.resolve(3);
    });
    first.open();
    await a;
    await expect(b).rejects.toThrow('b failed');
    await expect(c).resolves.toBe(3);
    expect(order).toEqual(['a starts', 'a ends', 'b', 'c']);
  });
});
