import net from 'node:net';
import { Prng } from './prng.ts';
import { planNetFault, TcpProxy, type NetFaultKind } from './netproxy.ts';

/** An upstream on 127.0.0.1: greets, echoes upper-cased, and sends `size` bytes on "BIG". */
async function upstream(): Promise<{ server: net.Server; port: number; sockets: net.Socket[] }> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    s.on('error', () => undefined);
    s.write('hello\n');
    s.on('data', (b: Buffer) => {
      const text = b.toString();
      if (text.startsWith('BIG')) s.write(Buffer.alloc(Number(text.slice(3)), 'x'));
      else s.write(text.toUpperCase());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address() as net.AddressInfo;
  return { server, port: addr.port, sockets };
}

interface Client {
  socket: net.Socket;
  received: () => string;
  closed: Promise<void>;
  isClosed: () => boolean;
}

function connect(port: number): Promise<Client> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let data = '';
    let closed = false;
    socket.on('data', (b: Buffer) => (data += b.toString()));
    socket.on('error', () => undefined);
    const onClose = new Promise<void>((r) =>
      socket.once('close', () => {
        closed = true;
        r();
      }),
    );
    socket.once('connect', () =>
      resolve({ socket, received: () => data, closed: onClose, isClosed: () => closed }),
    );
    socket.once('error', reject);
  });
}

async function until(what: string, cond: () => boolean, ms = 3_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('TcpProxy', () => {
  let up: Awaited<ReturnType<typeof upstream>>;
  let proxy: TcpProxy;
  beforeEach(async () => {
    up = await upstream();
    proxy = new TcpProxy('test', { host: '127.0.0.1', port: up.port });
    await proxy.listen();
  });
  afterEach(async () => {
    await proxy.close();
    for (const s of up.sockets) s.destroy();
    await new Promise((r) => up.server.close(r));
  });

  test('listens on 127.0.0.1 and forwards to loopback only', () => {
    expect(proxy.url).toBe(`https://127.0.0.1:${proxy.port}`);
    expect(() => new TcpProxy('x', { host: 'apiserver.example.invalid', port: 443 })).toThrow(
      /loopback only/,
    );
  });

  test('bytes pass both ways', async () => {
    const c = await connect(proxy.port);
    await until('the greeting', () => c.received() === 'hello\n');
    c.socket.write('abc');
    await until('the echo', () => c.received() === 'hello\nABC');
    c.socket.write('BIG200000');
    await until('200000 bytes', () => c.received().length === 'hello\nABC'.length + 200_000);
    expect(proxy.stats.bytesDown).toBe('hello\nABC'.length + 200_000);
    expect(proxy.stats.bytesUp).toBe('abcBIG200000'.length);
    c.socket.destroy();
  });

  test('a cut closes the client side (and the upstream side)', async () => {
    const c = await connect(proxy.port);
    await until('the greeting', () => c.received() === 'hello\n');
    expect(proxy.conns.size).toBe(1);
    const upSocket = up.sockets[0];
    const upClosed = new Promise<void>((r) => upSocket?.once('close', () => r()));
    expect(proxy.cut()).toBe(1);
    await c.closed;
    await upClosed;
    expect(proxy.conns.size).toBe(0);
  });

  test('a reset closes the client side with an RST', async () => {
    const c = await connect(proxy.port);
    await until('the greeting', () => c.received() === 'hello\n');
    const err = new Promise<string | undefined>((r) =>
      c.socket.once('error', (e: NodeJS.ErrnoException) => r(e.code)),
    );
    expect(proxy.reset()).toBe(1);
    await c.closed;
    expect(await Promise.race([err, pause(500).then(() => 'no error')])).toBe('ECONNRESET');
  });

  test('cutAfter cuts a connection mid-response once it carried N server bytes', async () => {
    const c = await connect(proxy.port);
    await until('the greeting', () => c.received() === 'hello\n');
    const window = proxy.cutAfter(16 * 1024, 1_000);
    c.socket.write('BIG1000000');
    await c.closed;
    const got = c.received().length - 'hello\n'.length;
    expect(got).toBeLessThan(1_000_000);
    expect(got).toBeLessThanOrEqual(16 * 1024 + 65_536);
    expect(await window).toBe(1);
    // After the window, a new connection carries everything.
    const d = await connect(proxy.port);
    d.socket.write('BIG100000');
    await until('100000 bytes', () => d.received().length === 'hello\n'.length + 100_000);
    d.socket.destroy();
  });

  test('a black hole stops delivery both ways without closing; resume delivers what was held', async () => {
    const c = await connect(proxy.port);
    await until('the greeting', () => c.received() === 'hello\n');
    proxy.blackhole();
    c.socket.write('held');
    // A connection opened during the black hole is held too.
    const d = await connect(proxy.port);
    await pause(300);
    expect(c.received()).toBe('hello\n');
    expect(d.received()).toBe('');
    expect(c.isClosed()).toBe(false);
    expect(d.isClosed()).toBe(false);
    expect(proxy.release('resume')).toBe(2);
    await until('the held bytes', () => c.received() === 'hello\nHELD');
    await until('the held connection', () => d.received() === 'hello\n');
    c.socket.destroy();
    d.socket.destroy();
  });

  test('a black hole that ends with close closes the connections', async () => {
    const c = await connect(proxy.port);
    await until('the greeting', () => c.received() === 'hello\n');
    proxy.blackhole();
    c.socket.write('held');
    await pause(100);
    expect(proxy.release('close')).toBe(1);
    await c.closed;
    expect(c.received()).toBe('hello\n');
  });

  test('a delay holds each chunk back and keeps the order', async () => {
    const c = await connect(proxy.port);
    await until('the greeting', () => c.received() === 'hello\n');
    proxy.delay = 150;
    const t0 = Date.now();
    c.socket.write('a');
    await pause(20);
    proxy.delay = 0; // the next chunk may not overtake the held one
    c.socket.write('b');
    await until('both echoes', () => c.received() === 'hello\nAB' || c.received().length >= 8);
    expect(c.received()).toBe('hello\nAB');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    c.socket.destroy();
  });
});

describe('planNetFault', () => {
  const kinds: NetFaultKind[] = [
    'net-cut-list',
    'net-cut-watch',
    'net-reset',
    'net-delay',
    'net-blackhole',
  ];
  const labels = ['kubegc-r0', 'kubegc-r1', 'kubegc-r2'];

  test('the same seed gives the same choices; another seed others', () => {
    const plans = (seed: number): unknown[] =>
      kinds.flatMap((k) =>
        Array.from({ length: 5 }, (_, i) =>
          planNetFault(
            k,
            new Prng(seed, `faults/kubegc`).fork(`${i}`),
            labels,
            'kubegc-r1',
            20_000,
          ),
        ),
      );
    expect(plans(1)).toEqual(plans(1));
    expect(plans(1)).not.toEqual(plans(2));
  });

  test('the choices are in range', () => {
    const prng = new Prng(7, 'x');
    for (let i = 0; i < 50; i++) {
      const list = planNetFault('net-cut-list', prng, labels, undefined, 12_000);
      expect(list.targets).toEqual(labels);
      expect(list.windowMs).toBe(12_000);
      expect(list.bytes).toBeGreaterThanOrEqual(16 * 1024);
      expect(list.bytes).toBeLessThanOrEqual(128 * 1024);
      const bh = planNetFault('net-blackhole', prng, labels, 'kubegc-r2', 25_000);
      expect(bh.targets).toHaveLength(1);
      expect(labels).toContain(bh.targets[0]);
      expect(['resume', 'close']).toContain(bh.end);
      const delay = planNetFault('net-delay', prng, labels, 'kubegc-r0', 10_000);
      expect(delay.delayMs).toBeGreaterThanOrEqual(100);
      expect(delay.delayMs).toBeLessThanOrEqual(1_500);
    }
    expect(planNetFault('net-reset', prng, [], undefined, 0).targets).toEqual([]);
  });
});
