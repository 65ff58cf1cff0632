// The node soak's workload (issue 33): seeded scenarios on the real node, as
// real nodes see them: Jobs completing, Deployments rolling, a CronJob every
// minute, pods waiting in an init container while their main image sits
// unused, containers restarting, pods with image volumes, and unused images
// filling the image filesystem. Every pod names its images in a seeded
// spelling (images.ts); the oracle resolves them through the same table.
import type { Kube } from '../kube.ts';
import type { Prng } from '../prng.ts';
import { spellings, type ImageTable, type SoakImage } from './images.ts';

export const NODE_SOAK_NS = 'soak-node';
export const NODE_SOAK_LABEL = 'soak.kubegc.io/node';

export const SCENARIOS = {
  job: 4,
  deployment: 3,
  initWait: 2,
  restartLoop: 1,
  imageVolume: 1,
  fill: 2,
  cleanup: 3,
} as const;
export type Scenario = keyof typeof SCENARIOS;

/** At most this many workload objects at once (the node runs them all). */
const MAX_OBJECTS = 14;

type Manifest = Record<string, unknown>;

export interface WorkloadHooks {
  /** Imports one unused filler image; resolves with the image filesystem's usage percent after. */
  importFiller(): Promise<number>;
  /** The image filesystem's usage percent. */
  usagePercent(): Promise<number>;
  /** Fill up to this usage percent. */
  fillTo: number;
}

export class NodeWorkload {
  readonly ops = new Map<string, number>();
  /** Per image key, the last time a pod the workload created named it. */
  readonly lastNamed = new Map<string, number>();
  imageVolumes: 'unknown' | 'served' | 'refused' = 'unknown';
  private readonly kube: Kube;
  private readonly table: ImageTable;
  private readonly apps: SoakImage[];
  private readonly hooks: WorkloadHooks;
  private readonly objects: { kind: 'jobs' | 'deployments' | 'pods'; name: string }[] = [];
  private stopped = false;
  private filling = false;
  private n = 0;

  constructor(kube: Kube, table: ImageTable, hooks: WorkloadHooks) {
    this.kube = kube;
    this.table = table;
    this.apps = table.images.filter((i) => i.role === 'app');
    this.hooks = hooks;
  }

  count(op: string): void {
    this.ops.set(op, (this.ops.get(op) ?? 0) + 1);
  }

  /** A seeded app image in a seeded spelling; remembered as named now. */
  private spelling(p: Prng): string {
    const img = p.pick(this.apps);
    this.lastNamed.set(img.key, Date.now());
    return p.pick(spellings(img));
  }

  /** Pods the workload keeps naming (the CronJob's image, live Deployments) stay named. */
  touch(keys: Iterable<string>): void {
    for (const k of keys) this.lastNamed.set(k, Date.now());
  }

  private container(image: string, command: string[]): Manifest {
    return { name: 'main', image, imagePullPolicy: 'IfNotPresent', command };
  }

  private podSpec(containers: Manifest[], extra: Manifest = {}): Manifest {
    return {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers,
      ...extra,
    };
  }

  private meta(name: string): Manifest {
    return { name, namespace: NODE_SOAK_NS, labels: { [NODE_SOAK_LABEL]: 'true' } };
  }

  private async create(kind: 'jobs' | 'deployments' | 'pods' | 'cronjobs', body: Manifest) {
    const group =
      kind === 'pods' ? '/api/v1' : kind === 'deployments' ? '/apis/apps/v1' : '/apis/batch/v1';
    return this.kube.raw('POST', `${group}/namespaces/${NODE_SOAK_NS}/${kind}`, { body });
  }

  /** The CronJob every minute, in one seeded spelling, kept all run long. */
  async cronJob(p: Prng): Promise<string> {
    const image = this.spelling(p);
    const res = await this.create('cronjobs', {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: this.meta('every-minute'),
      spec: {
        schedule: '* * * * *',
        concurrencyPolicy: 'Forbid',
        successfulJobsHistoryLimit: 1,
        failedJobsHistoryLimit: 1,
        jobTemplate: {
          spec: {
            backoffLimit: 0,
            template: { spec: this.podSpec([this.container(image, ['/bin/sleep', '3'])]) },
          },
        },
      },
    });
    if (res.status !== 201) throw new Error(`creating the CronJob: ${res.status} ${res.text}`);
    return image;
  }

  async run(p: Prng): Promise<void> {
    while (!this.stopped) {
      const s = p.weighted(SCENARIOS);
      try {
        await this.scenario(s, p);
      } catch (err) {
        this.count(`error: ${s}: ${(err as Error).message.slice(0, 80)}`);
      }
      await new Promise((r) => setTimeout(r, p.int(1_000, 4_000)));
    }
  }

  stop(): void {
    this.stopped = true;
  }

  private async scenario(s: Scenario, p: Prng): Promise<void> {
    if (s === 'fill') return this.fill();
    if (s === 'cleanup' || this.objects.length >= MAX_OBJECTS) return this.cleanup(p);
    const name = `${s.toLowerCase()}-${++this.n}-${p.suffix(4)}`;
    switch (s) {
      case 'job': {
        const res = await this.create('jobs', {
          apiVersion: 'batch/v1',
          kind: 'Job',
          metadata: this.meta(name),
          spec: {
            backoffLimit: 0,
            template: {
              spec: this.podSpec([
                this.container(this.spelling(p), ['/bin/sleep', String(p.int(1, 6))]),
              ]),
            },
          },
        });
        return this.created('jobs', name, res, s);
      }
      case 'deployment': {
        const existing = this.objects.find((o) => o.kind === 'deployments');
        if (existing && p.chance(0.6)) {
          // Roll it to another image (or the same in another spelling).
          const res = await this.kube.raw(
            'PATCH',
            `/apis/apps/v1/namespaces/${NODE_SOAK_NS}/deployments/${existing.name}`,
            {
              body: {
                spec: {
                  template: { spec: { containers: [{ name: 'main', image: this.spelling(p) }] } },
                },
              },
              contentType: 'application/strategic-merge-patch+json',
            },
          );
          this.count(res.status === 200 ? 'deployment rolled' : `deployment roll: ${res.status}`);
          return;
        }
        const res = await this.create('deployments', {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: this.meta(name),
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: name } },
            strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
            template: {
              metadata: { labels: { app: name, [NODE_SOAK_LABEL]: 'true' } },
              spec: {
                terminationGracePeriodSeconds: 1,
                containers: [this.container(this.spelling(p), ['/bin/sleep', '100000'])],
              },
            },
          },
        });
        return this.created('deployments', name, res, s);
      }
      case 'initWait': {
        // The main container's image is named but unused while the init container sleeps.
        const res = await this.create('pods', {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: this.meta(name),
          spec: this.podSpec([this.container(this.spelling(p), ['/bin/sleep', '5'])], {
            initContainers: [
              {
                ...this.container(this.spelling(p), ['/bin/sleep', String(p.int(20, 60))]),
                name: 'wait',
              },
            ],
          }),
        });
        return this.created('pods', name, res, s);
      }
      case 'restartLoop': {
        const res = await this.create('pods', {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: this.meta(name),
          spec: {
            ...this.podSpec([this.container(this.spelling(p), ['/bin/sleep', '2'])]),
            restartPolicy: 'Always',
          },
        });
        return this.created('pods', name, res, s);
      }
      case 'imageVolume': {
        if (this.imageVolumes === 'refused') return;
        const res = await this.create('pods', {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: this.meta(name),
          spec: this.podSpec(
            [
              {
                ...this.container(this.spelling(p), ['/bin/sleep', String(p.int(30, 120))]),
                volumeMounts: [{ name: 'data', mountPath: '/data', readOnly: true }],
              },
            ],
            {
              volumes: [
                {
                  name: 'data',
                  image: { reference: this.spelling(p), pullPolicy: 'IfNotPresent' },
                },
              ],
            },
          ),
        });
        if (res.status === 422 || res.status === 400) {
          this.imageVolumes = 'refused';
          this.count('image volumes refused by the API server');
          return;
        }
        this.imageVolumes = 'served';
        return this.created('pods', name, res, s);
      }
    }
  }

  private created(
    kind: 'jobs' | 'deployments' | 'pods',
    name: string,
    res: { status: number; text: string },
    s: Scenario,
  ): void {
    if (res.status !== 201) {
      this.count(`${s}: create ${res.status}`);
      return;
    }
    this.objects.push({ kind, name });
    this.count(s);
  }

  private async cleanup(p: Prng): Promise<void> {
    if (this.objects.length === 0) return;
    const i = p.int(0, this.objects.length - 1);
    const [o] = this.objects.splice(i, 1);
    if (!o) return;
    const group =
      o.kind === 'pods' ? '/api/v1' : o.kind === 'deployments' ? '/apis/apps/v1' : '/apis/batch/v1';
    const res = await this.kube.raw(
      'DELETE',
      `${group}/namespaces/${NODE_SOAK_NS}/${o.kind}/${o.name}`,
      {
        body: { propagationPolicy: 'Background' },
      },
    );
    this.count(
      res.status === 200 || res.status === 202
        ? `deleted ${o.kind}`
        : `delete ${o.kind}: ${res.status}`,
    );
  }

  private async fill(): Promise<void> {
    // One fill at a time across the actors: a node pulls at a bounded rate.
    if (this.filling) return;
    const usage = await this.hooks.usagePercent();
    if (usage >= this.hooks.fillTo) return;
    this.filling = true;
    try {
      await this.fillSteps(usage);
    } finally {
      this.filling = false;
    }
  }

  private async fillSteps(start: number): Promise<void> {
    let usage = start;
    this.count('fill');
    // One filler at a time, paced as a busy node's pulls are: a pressure check in between.
    for (let i = 0; i < 12 && usage < this.hooks.fillTo && !this.stopped; i++) {
      usage = await this.hooks.importFiller();
      this.count('filler imported');
      await new Promise((r) => setTimeout(r, 8_000));
    }
  }
}
