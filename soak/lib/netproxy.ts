// A TCP proxy between one GC process and the API server, for the soak's
// network faults. It listens on 127.0.0.1 only and forwards only to a loopback
// address (every packet stays on this machine), piping raw TCP both ways: TLS
// passes through untouched, so the process still verifies the API server's
// certificate (its SANs include IP:127.0.0.1). The faults act on connections:
//   cut        close them (FIN), e.g. the long-lived ones carrying watches
//   reset      destroy them with a TCP RST (the HTTP/2 session with them)
//   cutAfter   for a window, cut each connection once it has carried N bytes
//              from the server since the window opened (mid-response: a LIST or
//              watch-list in flight is cut before its end)
//   delay      add latency to every chunk forwarded, both ways, order kept
//   blackhole  stop forwarding both ways without closing anything (new
//              connections are accepted and held too), then resume (what was
//              held is delivered) or close
import net from 'node:net';
import type { Prng } from './prng.ts';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** A loopback TCP address, or a unix socket path (the CRI socket, for the node soak). */
export type ProxyTarget = { host: string; port: number } | { path: string };

export interface ProxyStats {
  accepted: number;
  cut: number;
  reset: number;
  bytesUp: number;
  bytesDown: number;
}

interface Chunk {
  at: number;
  buf: Buffer;
}

/** One direction of one connection: chunks in order, each released at its time. */
class Lane {
  private readonly q: Chunk[] = [];
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  private waitingDrain = false;

  private readonly src: net.Socket;
  private readonly dst: net.Socket;
  private readonly proxy: TcpProxy;

  constructor(src: net.Socket, dst: net.Socket, proxy: TcpProxy) {
    this.src = src;
    this.dst = dst;
    this.proxy = proxy;
  }

  push(buf: Buffer): void {
    this.q.push({ at: Date.now() + this.proxy.delay, buf });
    this.pump();
  }

  end(): void {
    this.ended = true;
    this.pump();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.q.length = 0;
  }

  pump(): void {
    if (this.timer || this.proxy.holding || this.dst.destroyed) return;
    for (;;) {
      const head = this.q[0];
      if (!head) break;
      const wait = head.at - Date.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, wait);
        return;
      }
      this.q.shift();
      if (!this.dst.write(head.buf) && !this.waitingDrain) {
        // Backpressure: read no more from the source until the destination drains.
        this.waitingDrain = true;
        this.src.pause();
        this.dst.once('drain', () => {
          this.waitingDrain = false;
          if (!this.proxy.holding && !this.src.destroyed) this.src.resume();
        });
      }
    }
    if (this.ended && !this.dst.writableEnded) this.dst.end();
  }
}

export class ProxyConn {
  readonly id: number;
  readonly openedAt = Date.now();
  /** Server→client bytes since the proxy's cutAfter window opened (or this connection did). */
  armedDown = 0;
  down = 0;
  up = 0;
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  private readonly upLane: Lane;
  private readonly downLane: Lane;
  private closed = false;
  private readonly proxy: TcpProxy;

  constructor(id: number, client: net.Socket, target: ProxyTarget, proxy: TcpProxy) {
    this.id = id;
    this.proxy = proxy;
    this.client = client;
    client.pause();
    this.upstream = net.connect(
      'path' in target ? { path: target.path } : { host: target.host, port: target.port },
    );
    this.upstream.pause();
    this.upLane = new Lane(client, this.upstream, proxy);
    this.downLane = new Lane(this.upstream, client, proxy);
    this.upstream.once('connect', () => {
      if (!proxy.holding) this.resume();
    });
    client.on('data', (buf: Buffer) => {
      this.up += buf.length;
      proxy.stats.bytesUp += buf.length;
      this.upLane.push(buf);
    });
    this.upstream.on('data', (buf: Buffer) => {
      this.down += buf.length;
      this.armedDown += buf.length;
      proxy.stats.bytesDown += buf.length;
      if (proxy.shouldCut(this)) return;
      this.downLane.push(buf);
    });
    client.on('end', () => this.upLane.end());
    this.upstream.on('end', () => this.downLane.end());
    for (const s of [client, this.upstream]) {
      s.on('error', () => this.destroy());
      s.on('close', () => {
        // The other side goes once what is queued for it is out (or at once, on an error).
        if (s === client) this.upLane.end();
        else this.downLane.end();
        if (client.destroyed && this.upstream.destroyed) this.finish();
        else setTimeout(() => this.destroy(), 5_000).unref();
      });
    }
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.upLane.stop();
    this.downLane.stop();
    this.proxy.forget(this);
  }

  get ageMs(): number {
    return Date.now() - this.openedAt;
  }

  resume(): void {
    if (this.upstream.connecting) return; // resumed on connect
    this.client.resume();
    this.upstream.resume();
    this.upLane.pump();
    this.downLane.pump();
  }

  pause(): void {
    this.client.pause();
    this.upstream.pause();
  }

  /** Closes both sides at once (FIN; what is queued is dropped). */
  destroy(): void {
    this.upLane.stop();
    this.downLane.stop();
    this.client.destroy();
    this.upstream.destroy();
    this.finish();
  }

  /** Both sides with a TCP RST. */
  reset(): void {
    this.upLane.stop();
    this.downLane.stop();
    for (const s of [this.client, this.upstream]) {
      try {
        s.resetAndDestroy();
      } catch {
        s.destroy();
      }
    }
    this.finish();
  }
}

export class TcpProxy {
  readonly name: string;
  readonly target: ProxyTarget;
  readonly stats: ProxyStats = { accepted: 0, cut: 0, reset: 0, bytesUp: 0, bytesDown: 0 };
  readonly conns = new Set<ProxyConn>();
  /** Latency added to each chunk, each way. */
  delay = 0;
  holding = false;
  private armed: { bytes: number; until: number; cuts: number } | undefined;
  private readonly server: net.Server;
  private nextId = 1;
  private listening = 0;

  constructor(name: string, target: ProxyTarget) {
    if (!('path' in target) && !LOOPBACK.has(target.host))
      throw new Error(`the soak's proxy forwards to loopback only, not to ${target.host}`);
    this.name = name;
    this.target = target;
    this.server = net.createServer((client) => {
      this.stats.accepted++;
      const conn = new ProxyConn(this.nextId++, client, this.target, this);
      this.conns.add(conn);
    });
  }

  /** Listens on 127.0.0.1 (an ephemeral port unless given); resolves with the port. */
  listen(port = 0): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        const addr = this.server.address();
        if (!addr || typeof addr !== 'object') return reject(new Error('no address'));
        this.listening = addr.port;
        resolve(addr.port);
      });
    });
  }

  /** Listens on a unix socket at `file` instead (a CRI endpoint `unix://file`). */
  listenPath(file: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(file, () => resolve());
    });
  }

  get port(): number {
    return this.listening;
  }

  get url(): string {
    return `https://127.0.0.1:${this.listening}`;
  }

  forget(c: ProxyConn): void {
    this.conns.delete(c);
  }

  /** Called for each server→client chunk: true when the connection was cut for it. */
  shouldCut(c: ProxyConn): boolean {
    const a = this.armed;
    if (!a || Date.now() >= a.until || c.armedDown < a.bytes) return false;
    a.cuts++;
    this.stats.cut++;
    c.destroy();
    return true;
  }

  /** Closes the connections `which` selects (all by default); returns how many. */
  cut(which: (c: ProxyConn) => boolean = () => true): number {
    const picked = [...this.conns].filter(which);
    for (const c of picked) c.destroy();
    this.stats.cut += picked.length;
    return picked.length;
  }

  /** Resets (RST) every connection; returns how many. */
  reset(): number {
    const picked = [...this.conns];
    for (const c of picked) c.reset();
    this.stats.reset += picked.length;
    return picked.length;
  }

  /**
   * For `windowMs`, cuts each connection once it has carried `bytes` from the
   * server since the window opened (or since it opened, if later). Resolves with
   * the number of cuts when the window closes.
   */
  async cutAfter(bytes: number, windowMs: number): Promise<number> {
    for (const c of this.conns) c.armedDown = 0;
    const armed = { bytes, until: Date.now() + windowMs, cuts: 0 };
    this.armed = armed;
    await new Promise((r) => setTimeout(r, windowMs));
    if (this.armed === armed) this.armed = undefined;
    return armed.cuts;
  }

  /** Stops forwarding, both ways, on every connection (held open; new ones held too). */
  blackhole(): void {
    this.holding = true;
    for (const c of this.conns) c.pause();
  }

  /** Ends a black hole: delivers what was held, or closes every connection. */
  release(how: 'resume' | 'close'): number {
    this.holding = false;
    if (how === 'close') return this.cut();
    for (const c of this.conns) c.resume();
    return this.conns.size;
  }

  async close(): Promise<void> {
    this.holding = false;
    this.armed = undefined;
    for (const c of [...this.conns]) c.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** The parameters of one network fault, chosen by the fault's seeded PRNG (pure). */
export interface NetFaultPlan {
  /** Labels of the processes whose proxies it acts on. */
  targets: string[];
  /** net-cut-list: cut after this many server→client bytes... */
  bytes?: number;
  /** ...for this long (net-cut-list), or the hold (net-delay, net-blackhole). */
  windowMs?: number;
  /** net-cut-watch: connections at least this old. */
  minAgeMs?: number;
  /** net-delay: latency added each way. */
  delayMs?: number;
  /** net-blackhole: how it ends. */
  end?: 'resume' | 'close';
}

export type NetFaultKind =
  'net-cut-list' | 'net-cut-watch' | 'net-reset' | 'net-delay' | 'net-blackhole';

/**
 * What a network fault does, given the processes (labels, in a stable order),
 * the writer's label if known, and the planned hold.
 */
export function planNetFault(
  kind: NetFaultKind,
  prng: Prng,
  processes: readonly string[],
  writer: string | undefined,
  holdMs: number,
): NetFaultPlan {
  const all = [...processes];
  // The writer mostly (it is the one that deletes), sometimes another or all.
  const one = (): string[] => {
    if (all.length === 0) return [];
    if (writer && all.includes(writer) && prng.chance(0.75)) return [writer];
    return [prng.pick(all)];
  };
  switch (kind) {
    case 'net-cut-list':
      // Every process restarts, so its lists (watch-lists) go through the armed proxies.
      return { targets: all, bytes: prng.int(16, 128) * 1024, windowMs: holdMs };
    case 'net-cut-watch':
      return { targets: prng.chance(0.5) ? all : one(), minAgeMs: prng.int(2_000, 10_000) };
    case 'net-reset':
      return { targets: prng.chance(0.5) ? all : one() };
    case 'net-delay':
      return {
        targets: prng.chance(0.5) ? all : one(),
        delayMs: prng.int(100, 1_500),
        windowMs: holdMs,
      };
    case 'net-blackhole':
      return { targets: one(), windowMs: holdMs, end: prng.chance(0.5) ? 'resume' : 'close' };
  }
}
