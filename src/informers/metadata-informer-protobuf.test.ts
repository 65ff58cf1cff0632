// The informer's protobuf path against a stand-in server that answers with
// real kube-apiserver bytes (src/api/testdata/protobuf): the same events as
// from the JSON twin of the same stream, and a corrupt stream that costs a
// restart and JSON from then on, never a wrong object.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { listenAndConnect } from '../api/stand-in-server.testing.ts';
import { trimMeta, type RawMeta } from '../api/resources.ts';
import { CONFIGMAPS as configmaps } from '../graph/graph-fixture.testing.ts';
import { createLogger } from '../log.ts';
import { MetadataInformer, type InformerEvent } from './metadata-informer.ts';

const FIXTURES = path.join(import.meta.dirname, '..', 'api', 'testdata', 'protobuf');
const fixture = (name: string): Buffer => readFileSync(path.join(FIXTURES, name));
const PROTOBUF_WATCH = 'application/vnd.kubernetes.protobuf;stream=watch';

interface Served {
  accept: string;
  query: URLSearchParams;
}

/**
 * Runs an informer (watch-list) against a server whose `answer` writes each
 * watch's body and leaves it open; resolves with the events once `done` holds.
 */
async function run(
  answer: (res: http.ServerResponse, n: number) => void,
  done: (events: InformerEvent[], informer: MetadataInformer) => boolean,
): Promise<{ events: InformerEvent[]; served: Served[]; warnings: string[] }> {
  const served: Served[] = [];
  const server = http.createServer((req, res) => {
    served.push({
      accept: String(req.headers.accept),
      query: new URL(req.url ?? '/', 'http://x').searchParams,
    });
    answer(res, served.length);
  });
  const client = await listenAndConnect(server);
  const warnings: string[] = [];
  const log = createLogger('warn', (l) => {
    warnings.push((JSON.parse(l) as { msg: string }).msg);
  });
  const events: InformerEvent[] = [];
  const informer = new MetadataInformer(client, configmaps, (e) => events.push(e), log, {
    maxBackoffMs: 50,
  });
  let deadline: NodeJS.Timeout | undefined;
  try {
    informer.start();
    await new Promise<void>((resolve, reject) => {
      const check = setInterval(() => {
        if (done(events, informer)) {
          clearInterval(check);
          resolve();
        }
      }, 10);
      deadline = setTimeout(() => {
        clearInterval(check);
        reject(
          new Error(`not done within 5 s: ${events.length} events, ${served.length} requests`),
        );
      }, 5000);
    });
  } finally {
    clearTimeout(deadline);
    await informer.stop();
    client.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
  return { events, served, warnings };
}

const summary = (events: InformerEvent[]): unknown[] =>
  events.map((e) => [e.type, e.meta.uid, e.meta]);

test('a protobuf watch-list of the real server gives the same events as its JSON twin, and asks for protobuf as client-go does', async () => {
  const jsonLines = fixture('configmaps-watch.jsonl').toString('utf8').trim().split('\n');
  const objectEvents = jsonLines.filter((l) => !l.includes('"BOOKMARK"')).length;
  const synced = (events: InformerEvent[], i: MetadataInformer): boolean =>
    i.synced && events.length >= objectEvents;
  const fromJson = await run((res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(fixture('configmaps-watch.jsonl'));
  }, synced);
  const fromProtobuf = await run((res) => {
    res.writeHead(200, { 'content-type': PROTOBUF_WATCH });
    // In two writes cut inside a frame: frames cross chunk boundaries.
    const body = fixture('configmaps-watch.pb');
    res.write(body.subarray(0, 1001));
    setTimeout(() => res.write(body.subarray(1001)), 20);
  }, synced);
  expect(fromProtobuf.events.length).toBe(objectEvents);
  expect(summary(fromProtobuf.events)).toEqual(summary(fromJson.events));
  expect(fromProtobuf.served[0]?.accept).toMatch(
    /^application\/vnd\.kubernetes\.protobuf;as=PartialObjectMetadata;g=meta\.k8s\.io;v=v1,application\/json;as=PartialObjectMetadata;/,
  );
  expect(fromProtobuf.warnings).toEqual([]);
});

test('a corrupt protobuf frame: a warning, no object from it, and the watch-list again as JSON', async () => {
  const body = Buffer.from(fixture('configmaps-watch.pb'));
  // The second frame's body overwritten with junk; its length prefix stays.
  const first = body.readUInt32BE(0);
  const second = body.readUInt32BE(4 + first);
  body.fill(0xff, 4 + first + 4, 4 + first + 4 + second);
  const { events, served, warnings } = await run(
    (res, n) => {
      if (n === 1) {
        res.writeHead(200, { 'content-type': PROTOBUF_WATCH });
        res.write(body);
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(fixture('configmaps-watch.jsonl'));
      }
    },
    (_e, i) => i.synced,
  );
  expect(warnings).toContain(
    'malformed watch event; watching again from the last good resourceVersion',
  );
  expect(warnings).toContain(
    'protobuf answer not understood; reading this resource as JSON from now on',
  );
  expect(served[1]?.accept).not.toContain('protobuf');
  // Every object delivered is one the server sent (the first frame's, before
  // the junk, then the JSON watch-list's): nothing made up from the junk.
  const sent = fixture('configmaps-watch.jsonl')
    .toString('utf8')
    .trim()
    .split('\n')
    .map((l) => trimMeta((JSON.parse(l) as { object?: { metadata?: RawMeta } }).object?.metadata))
    .filter((m) => m !== undefined);
  for (const e of events) expect(sent).toContainEqual(e.meta);
  expect(new Set(events.map((e) => e.meta.uid)).size).toBeGreaterThan(1);
});

test('a protobuf LIST page of the real server (paginated informer) gives what its JSON twin gives', async () => {
  const a = await pagesOnly(true);
  const b = await pagesOnly(false);
  expect(a.length).toBeGreaterThan(0);
  expect(summary(a)).toEqual(summary(b));
});

async function pagesOnly(pb: boolean): Promise<InformerEvent[]> {
  const server = http.createServer((req, res) => {
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    if (q.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return; // open and silent
    }
    res.writeHead(200, {
      'content-type': pb ? 'application/vnd.kubernetes.protobuf' : 'application/json',
    });
    res.end(fixture(pb ? 'configmaps.pb' : 'configmaps.json.txt'));
  });
  const client = await listenAndConnect(server);
  const events: InformerEvent[] = [];
  const informer = new MetadataInformer(
    client,
    configmaps,
    (e) => events.push(e),
    createLogger('error', () => undefined),
    { watchList: false },
  );
  try {
    informer.start();
    await informer.waitForSync();
  } finally {
    await informer.stop();
    client.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
  return events;
}
