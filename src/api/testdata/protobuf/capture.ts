// Captures the golden fixtures next to this file from a real kube-apiserver:
// the same LISTs, watch streams and error, once as protobuf and once as JSON.
//
//   node --disable-warning=ExperimentalWarning src/api/testdata/protobuf/capture.ts [--keep-cluster]
//
// Starts a fresh control plane of its own in .cluster-proto (stopped at the
// end unless --keep-cluster), creates ConfigMaps with owner references,
// finalizers, labels and annotations, some held in deletion by a finalizer,
// and a CRD with custom resources, then writes *.pb / *.json.txt / *.jsonl and
// manifest.json (each request's path, Accept and the Content-Type answered).
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT, down, paths, up, type Cluster } from '../../../../cluster/controlplane.ts';
import { METADATA_ACCEPT, METADATA_LIST_ACCEPT } from '../../request.ts';
import {
  PROTOBUF_CONTENT_TYPE,
  PROTOBUF_METADATA_ACCEPT,
  PROTOBUF_METADATA_LIST_ACCEPT,
  decodePartialObjectMetadataList,
} from '../../protobuf-meta.ts';

const OUT = path.dirname(fileURLToPath(import.meta.url));
const DIR = path.join(REPO_ROOT, '.cluster-proto');
const NS = 'proto';
const KEEP = process.argv.includes('--keep-cluster');
const log = (l: string): void => void process.stderr.write(`capture: ${l}\n`);

interface Captured {
  file: string;
  path: string;
  accept: string;
  status: number;
  contentType: string;
  bytes: number;
}
const manifest: Captured[] = [];

async function kubectl(cluster: Cluster, args: string[], stdin?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cluster.kubectl, args, {
      env: { ...process.env, KUBECONFIG: cluster.kubeconfig },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`kubectl ${args.join(' ')}: ${err}`)),
    );
    p.stdin.end(stdin);
  });
}

let tls: { ca: Buffer; cert: Buffer; key: Buffer; port: number } | undefined;

interface Answer {
  status: number;
  contentType: string;
  body: Buffer;
}

/** A GET that runs until the body ends or close() (a watch): either way it resolves with what came. */
function open(
  urlPath: string,
  accept: string,
): { answer: Promise<Answer>; seen(): Buffer; close(): void } {
  const t = tls;
  if (!t) throw new Error('no cluster yet');
  const chunks: Buffer[] = [];
  let close = (): void => undefined;
  const answer = new Promise<Answer>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: t.port,
        path: urlPath,
        ca: t.ca,
        cert: t.cert,
        key: t.key,
        headers: { accept },
      },
      (res) => {
        const finish = (): void =>
          resolve({
            status: res.statusCode ?? 0,
            contentType: String(res.headers['content-type'] ?? ''),
            body: Buffer.concat(chunks),
          });
        close = () => {
          finish();
          req.destroy();
        };
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', finish);
      },
    );
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    req.end();
  });
  return { answer, seen: () => Buffer.concat(chunks), close: () => close() };
}

const get = (urlPath: string, accept: string): Promise<Answer> => open(urlPath, accept).answer;

async function save(file: string, urlPath: string, accept: string, a: Answer): Promise<void> {
  await fs.writeFile(path.join(OUT, file), a.body);
  manifest.push({
    file,
    path: urlPath,
    accept,
    status: a.status,
    contentType: a.contentType,
    bytes: a.body.length,
  });
  log(`${file}: ${a.status} ${a.contentType} ${a.body.length} bytes`);
}

/** A list as protobuf, then as JSON at exactly the same resourceVersion. */
async function listTwins(name: string, urlPath: string, query: string): Promise<void> {
  const pbPath = query ? `${urlPath}?${query}` : urlPath;
  const pb = await get(pbPath, PROTOBUF_METADATA_LIST_ACCEPT);
  await save(`${name}.pb`, pbPath, PROTOBUF_METADATA_LIST_ACCEPT, pb);
  const rv = decodePartialObjectMetadataList(pb.body).resourceVersion;
  const jsonPath = `${urlPath}?${query}${query ? '&' : ''}resourceVersion=${rv}&resourceVersionMatch=Exact`;
  await save(
    `${name}.json.txt`,
    jsonPath,
    METADATA_LIST_ACCEPT,
    await get(jsonPath, METADATA_LIST_ACCEPT),
  );
}

const INITIAL_END = Buffer.from('k8s.io/initial-events-end');

/** The same watch-list twice, protobuf and JSON, open together; `between` runs once both have listed. */
async function watchTwins(
  name: string,
  urlPath: string,
  query: string,
  between: () => Promise<void>,
  settleMs: number,
): Promise<void> {
  const pb = open(`${urlPath}?${query}`, PROTOBUF_METADATA_ACCEPT);
  const json = open(`${urlPath}?${query}`, METADATA_ACCEPT);
  for (let i = 0; i < 200; i++) {
    if (pb.seen().includes(INITIAL_END) && json.seen().includes(INITIAL_END)) break;
    await delay(50);
  }
  await between();
  await delay(settleMs);
  pb.close();
  json.close();
  await save(`${name}.pb`, `${urlPath}?${query}`, PROTOBUF_METADATA_ACCEPT, await pb.answer);
  await save(`${name}.jsonl`, `${urlPath}?${query}`, METADATA_ACCEPT, await json.answer);
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

const CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.kubegc.io}
spec:
  group: example.kubegc.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`;

// One script read top to bottom (a cluster up, each capture in turn, the
// files written): a maintenance tool run by hand, not part of kubegc.
async function main(): Promise<void> {
  await down(DIR);
  const cluster = await up({ dir: DIR, log });
  const p = paths(DIR);
  const [ca, cert, key] = await Promise.all([
    fs.readFile(p.caCrt),
    fs.readFile(p.adminCrt),
    fs.readFile(p.adminKey),
  ]);
  tls = { ca, cert, key, port: Number(new URL(cluster.server).port) };
  try {
    await kubectl(cluster, ['create', 'namespace', NS]);
    await kubectl(cluster, ['apply', '-f', '-'], CRD);
    await kubectl(cluster, [
      'wait',
      '--for=condition=Established',
      'crd/widgets.example.kubegc.io',
    ]);
    await kubectl(
      cluster,
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: ConfigMap
metadata:
  name: owner
  namespace: ${NS}
  labels: {app: proto, tier: "1"}
  annotations: {note: an owner}
data: {a: "1"}
`,
    );
    const owner = (
      await kubectl(cluster, ['-n', NS, 'get', 'cm', 'owner', '-o', 'jsonpath={.metadata.uid}'])
    ).trim();
    const ref = (extra: string) =>
      `{apiVersion: v1, kind: ConfigMap, name: owner, uid: ${owner}${extra}}`;
    await kubectl(
      cluster,
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: ConfigMap
metadata:
  name: child-controller
  namespace: ${NS}
  labels: {app: proto}
  annotations: {example.com/long: "${'x'.repeat(300)}", example.com/unicode: "日本語 ✓ ünïcode"}
  finalizers: [example.com/hold, example.com/second]
  ownerReferences: [${ref(', controller: true, blockOwnerDeletion: true')}]
data: {b: "2"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: child-plain
  namespace: ${NS}
  ownerReferences:
  - ${ref('')}
  - {apiVersion: example.kubegc.io/v1, kind: Widget, name: w1, uid: 00000000-0000-0000-0000-000000000001, controller: false, blockOwnerDeletion: false}
---
apiVersion: v1
kind: ConfigMap
metadata: {generateName: gen-, name: gen-fixed, namespace: ${NS}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: doomed
  namespace: ${NS}
  finalizers: [example.com/hold]
  ownerReferences: [${ref(', blockOwnerDeletion: true')}]
---
apiVersion: example.kubegc.io/v1
kind: Widget
metadata: {name: w1, namespace: ${NS}, labels: {x: "y"}}
spec: {size: 3}
---
apiVersion: example.kubegc.io/v1
kind: Widget
metadata:
  name: w2
  namespace: ${NS}
  finalizers: [example.com/hold]
  ownerReferences: [${ref(', controller: true, blockOwnerDeletion: true')}]
spec: {size: 5, nested: {deep: [1, 2, 3]}}
`,
    );
    // Held in deletion by their finalizers (no garbage collector runs here).
    await kubectl(cluster, [
      '-n',
      NS,
      'delete',
      'cm',
      'doomed',
      '--cascade=foreground',
      '--wait=false',
    ]);
    await kubectl(cluster, ['-n', NS, 'delete', 'cm', 'child-controller', '--wait=false']);
    await kubectl(cluster, [
      '-n',
      NS,
      'delete',
      'widget',
      'w2',
      '--cascade=foreground',
      '--wait=false',
    ]);

    await listTwins('configmaps', '/api/v1/configmaps', '');
    await listTwins('configmaps-page', `/api/v1/namespaces/${NS}/configmaps`, 'limit=2');
    await listTwins('widgets', '/apis/example.kubegc.io/v1/widgets', '');

    const watchList =
      'watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true';
    await watchTwins(
      'configmaps-watch',
      `/api/v1/namespaces/${NS}/configmaps`,
      watchList,
      async () => {
        await kubectl(
          cluster,
          ['apply', '-f', '-'],
          `apiVersion: v1
kind: ConfigMap
metadata:
  name: late
  namespace: ${NS}
  finalizers: [example.com/hold]
  ownerReferences: [${ref(', controller: true')}]
`,
        );
        await kubectl(cluster, ['-n', NS, 'label', 'cm', 'late', 'stage=two']);
        await kubectl(cluster, ['-n', NS, 'delete', 'cm', 'late', '--wait=false']);
        await kubectl(cluster, [
          '-n',
          NS,
          'patch',
          'cm',
          'late',
          '--type=merge',
          '-p',
          '{"metadata":{"finalizers":null}}',
        ]);
      },
      1000,
    );
    await watchTwins(
      'widgets-watch',
      '/apis/example.kubegc.io/v1/widgets',
      watchList,
      async () => {},
      300,
    );
    // A watch-list from a resourceVersion the server has not reached: after ~3 s it
    // sends an ERROR event (504 Timeout, with details) and ends the stream.
    const tooLarge = `watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=999999999`;
    const [pbErr, jsonErr] = await Promise.all([
      get(`/api/v1/namespaces/${NS}/configmaps?${tooLarge}`, PROTOBUF_METADATA_ACCEPT),
      get(`/api/v1/namespaces/${NS}/configmaps?${tooLarge}`, METADATA_ACCEPT),
    ]);
    await save(
      'watch-error.pb',
      `/api/v1/namespaces/${NS}/configmaps?${tooLarge}`,
      PROTOBUF_METADATA_ACCEPT,
      pbErr,
    );
    await save(
      'watch-error.jsonl',
      `/api/v1/namespaces/${NS}/configmaps?${tooLarge}`,
      METADATA_ACCEPT,
      jsonErr,
    );

    // Plain protobuf (no transform) for a custom resource: 406, its Status itself protobuf.
    const widgets = '/apis/example.kubegc.io/v1/widgets';
    await save(
      'status-406.pb',
      widgets,
      PROTOBUF_CONTENT_TYPE,
      await get(widgets, PROTOBUF_CONTENT_TYPE),
    );
    await save('status-406.json.txt', widgets, 'text/html', await get(widgets, 'text/html'));
    // What a JSON-only fallback answers for that request (a full WidgetList, as from an API without the transform).
    await save(
      'widgets-fallback.json.txt',
      widgets,
      'application/vnd.kubernetes.protobuf,application/json',
      await get(widgets, 'application/vnd.kubernetes.protobuf,application/json'),
    );

    await fs.writeFile(path.join(OUT, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  } finally {
    if (!KEEP) await down(DIR);
  }
}

await main();
