// containerd's own event stream (`ctr events`) as the node soak's oracle
// reads it: image and container removals, container creations (with the
// kubelet's labels, read once per container) and task exits, each stamped
// when it arrived. When containerd restarts the stream ends; it is started
// again and the interval without it is recorded as a gap (removals in it are
// not judged).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import type { RuntimeEvent } from './node-oracle.ts';

const run = promisify(execFile);

/** One line of `ctr events`: `<go time: 4 fields> <namespace> <topic> <json>`. */
export function parseEventLine(
  line: string,
): { namespace: string; topic: string; body: Record<string, unknown> } | undefined {
  const m = /^\S+ \S+ \S+ \S+ (\S+) (\/\S+)(?: (.*))?$/.exec(line.trim());
  if (!m) return undefined;
  let body: Record<string, unknown> = {};
  try {
    body = m[3] ? (JSON.parse(m[3]) as Record<string, unknown>) : {};
  } catch {
    return undefined;
  }
  return { namespace: m[1] as string, topic: m[2] as string, body };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export class RuntimeEvents {
  readonly events: RuntimeEvent[] = [];
  readonly gaps: [number, number][] = [];
  private child: ChildProcess | undefined;
  private stopped = false;
  private downSince: number | undefined = Date.now();
  private readonly socket: string;
  private readonly pending = new Set<Promise<void>>();

  constructor(socket: string) {
    this.socket = socket;
  }

  start(): void {
    void this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const up = await run('ctr', ['--address', this.socket, 'version']).then(
        () => true,
        () => false,
      );
      if (!up) {
        await new Promise((r) => setTimeout(r, 250));
        continue;
      }
      await this.follow();
    }
  }

  /** One `ctr events` process, to its end. */
  private follow(): Promise<void> {
    return new Promise((resolve) => {
      const child = spawn('ctr', ['--address', this.socket, 'events'], {
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      this.child = child;
      const lines = createInterface({ input: child.stdout });
      let first = true;
      lines.on('line', (line) => {
        if (first && this.downSince !== undefined) {
          // The stream delivers from now on: what happened while it was down is unknown.
          this.gaps.push([this.downSince, Date.now()]);
          this.downSince = undefined;
        }
        first = false;
        this.onLine(line);
      });
      // The subscription is live once ctr runs; a first event may be long in coming.
      setTimeout(() => {
        if (first && child.exitCode === null && this.downSince !== undefined) {
          this.gaps.push([this.downSince, Date.now()]);
          this.downSince = undefined;
          first = false;
        }
      }, 500);
      child.on('close', () => {
        this.downSince ??= Date.now();
        resolve();
      });
    });
  }

  private onLine(line: string): void {
    const e = parseEventLine(line);
    if (!e || e.namespace !== 'k8s.io') return;
    const t = Date.now();
    const b = e.body;
    switch (e.topic) {
      case '/images/delete': {
        const name = str(b.name);
        if (name) this.events.push({ t, kind: 'image-delete', name });
        break;
      }
      case '/containers/create': {
        const id = str(b.id);
        if (!id) break;
        const ev: RuntimeEvent & { kind: 'container-create' } = { t, kind: 'container-create', id };
        this.events.push(ev);
        const p = this.labels(id).then((labels) => {
          ev.podUid = labels['io.kubernetes.pod.uid'];
          ev.containerName = labels['io.kubernetes.container.name'];
          ev.sandbox = labels['io.cri-containerd.kind'] === 'sandbox';
        });
        this.pending.add(p);
        void p.finally(() => this.pending.delete(p));
        break;
      }
      case '/containers/delete': {
        const id = str(b.id);
        if (id) this.events.push({ t, kind: 'container-delete', id });
        break;
      }
      case '/tasks/exit': {
        const id = str(b.container_id);
        if (id) this.events.push({ t, kind: 'task-exit', id });
        break;
      }
    }
  }

  /** The container's labels (empty when it is already gone). */
  private async labels(id: string): Promise<Record<string, string>> {
    try {
      const { stdout } = await run('ctr', [
        '--address',
        this.socket,
        '-n',
        'k8s.io',
        'containers',
        'info',
        id,
      ]);
      const info = JSON.parse(stdout) as { Labels?: Record<string, string> };
      return info.Labels ?? {};
    } catch {
      return {};
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.child?.kill();
    await Promise.all([...this.pending]);
  }
}
