import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { createLogger, silentLogger } from '../../log.ts';
import { generateSelfSignedCertificate, servingCertificate } from './tls.ts';

const hosts = ['localhost', 'kubegc-metrics.kube-system.svc'];
const ips = ['127.0.0.1', '::1', '198.19.0.10'];

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kubegc-tls-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Polls `cond` until it holds; fails after `timeoutMs` with what was awaited. */
async function until(
  what: string,
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function listen(server: tls.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

async function close(server: tls.Server): Promise<void> {
  await new Promise<void>((r) => server.close(() => r()));
}

function helloServer(pair: { cert: string; key: string }): https.Server {
  return https.createServer(pair, (_req, res) => {
    res.setHeader('connection', 'close');
    res.end('hello');
  });
}

/** The SHA-256 fingerprint of the certificate the server presents now. */
function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect(
      { host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false },
      () => {
        resolve(socket.getPeerCertificate().fingerprint256);
        socket.end();
      },
    );
    socket.on('error', reject);
  });
}

function get(options: https.RequestOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    https
      .get({ ...options, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

const fingerprint = (certPem: string) => new crypto.X509Certificate(certPem).fingerprint256;

describe('generateSelfSignedCertificate', () => {
  const now = new Date('2026-03-04T05:06:07.890Z');
  const { certPem, keyPem } = generateSelfSignedCertificate({ hosts, ips, now });
  const x509 = new crypto.X509Certificate(certPem);

  test('is a self-signed certificate for its own key, with the names asked for', () => {
    expect(x509.verify(x509.publicKey)).toBe(true);
    expect(x509.checkPrivateKey(crypto.createPrivateKey(keyPem))).toBe(true);
    expect(keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(x509.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: 'prime256v1' });
    expect(x509.subject).toBe(`CN=kubegc@${Math.floor(now.getTime() / 1000)}`);
    expect(x509.issuer).toBe(x509.subject);
    expect(x509.ca).toBe(false);
    expect(x509.validFromDate).toEqual(new Date('2026-03-04T04:06:07Z'));
    expect(x509.validToDate).toEqual(new Date('2027-03-04T05:06:07Z'));
    const sans = x509.subjectAltName?.split(', ') ?? [];
    expect(sans).toEqual(
      expect.arrayContaining([
        'DNS:localhost',
        'DNS:kubegc-metrics.kube-system.svc',
        'IP Address:127.0.0.1',
        'IP Address:198.19.0.10',
      ]),
    );
    expect(sans.some((s) => /^IP Address:(0:){7}1$|^IP Address:::1$/.test(s))).toBe(true);
    expect(x509.checkIP('::1')).toBe('::1');
    expect(x509.checkHost('kubegc-metrics.kube-system.svc')).toBe('kubegc-metrics.kube-system.svc');
    expect(x509.serialNumber).toMatch(/^[4-7][0-9A-F]{31}$/);
  });

  test('openssl reads the extensions: a server certificate, not a CA', () => {
    const text = execFileSync('openssl', ['x509', '-noout', '-text'], {
      input: certPem,
    }).toString();
    expect(text).toContain('Version: 3 (0x2)');
    expect(text).toContain('Signature Algorithm: ecdsa-with-SHA256');
    expect(text).toMatch(/X509v3 Basic Constraints: critical\s+CA:FALSE/);
    expect(text).toMatch(/X509v3 Key Usage: critical\s+Digital Signature\n/);
    expect(text).toMatch(/X509v3 Extended Key Usage:\s+TLS Web Server Authentication\n/);
    expect(text).toContain('IP Address:0:0:0:0:0:0:0:1');
    expect(text).toContain('IP Address:198.19.0.10');
  });

  test('an HTTPS client that trusts it reaches the server by name and by IP', async () => {
    const server = helloServer({ cert: certPem, key: keyPem });
    const port = await listen(server);
    try {
      // Default rejectUnauthorized: the chain and the subjectAltName are both checked.
      expect(await get({ host: '127.0.0.1', port, ca: certPem, servername: 'localhost' })).toBe(
        'hello',
      );
      expect(await get({ host: '127.0.0.1', port, ca: certPem })).toBe('hello');
      await expect(
        get({ host: '127.0.0.1', port, ca: certPem, servername: 'elsewhere.example' }),
      ).rejects.toThrow(/altnames/);
    } finally {
      await close(server);
    }
  });

  test('long subjectAltNames (multi-byte DER lengths), IPv6 forms, and dates from 2050 on', () => {
    const many = Array.from({ length: 60 }, (_, i) => `host-${i}.example.com`);
    const late = new Date('2049-12-01T00:00:00Z');
    const big = generateSelfSignedCertificate({
      hosts: [...many, '198.18.1.1'],
      ips: ['fe80::1', '::ffff:198.18.2.3', '2001:db8:0:0:1::'],
      validityDays: 60,
      now: late,
    });
    const cert = new crypto.X509Certificate(big.certPem);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.checkHost('host-59.example.com')).toBe('host-59.example.com');
    // An IP literal among the hosts is an IP entry, which is what clients match IPs against.
    expect(cert.checkIP('198.18.1.1')).toBe('198.18.1.1');
    expect(cert.checkIP('fe80::1')).toBe('fe80::1');
    expect(cert.checkIP('::ffff:198.18.2.3')).toBe('::ffff:198.18.2.3');
    expect(cert.checkIP('2001:db8::1:0:0:0')).toBe('2001:db8::1:0:0:0');
    // Notbefore stays a UTCTime (2049), notAfter becomes a GeneralizedTime (2050).
    expect(cert.validFromDate).toEqual(new Date('2049-11-30T23:00:00Z'));
    expect(cert.validToDate).toEqual(new Date('2050-01-30T00:00:00Z'));
    const asn1 = execFileSync('openssl', ['asn1parse'], { input: big.certPem }).toString();
    expect(asn1).toMatch(/UTCTIME\s+:491130230000Z/);
    expect(asn1).toMatch(/GENERALIZEDTIME\s+:20500130000000Z/);
  });

  test('serials and keys differ from one call to the next', () => {
    const other = new crypto.X509Certificate(
      generateSelfSignedCertificate({ hosts, ips, now }).certPem,
    );
    expect(other.serialNumber).not.toBe(x509.serialNumber);
    expect(other.fingerprint256).not.toBe(x509.fingerprint256);
  });
});

/**
 * Lays the pair out as a Kubernetes Secret volume does: real files in a timestamped
 * directory, `..data` pointing at it, tls.crt and tls.key pointing through `..data`;
 * an update swaps `..data` in one rename.
 */
let generation = 0;
function writeSecretVolume(volume: string, pair: { cert: string; key: string }): void {
  const version = `..${++generation}`;
  mkdirSync(path.join(volume, version));
  writeFileSync(path.join(volume, version, 'tls.crt'), pair.cert);
  writeFileSync(path.join(volume, version, 'tls.key'), pair.key);
  symlinkSync(version, path.join(volume, '..data_tmp'));
  renameSync(path.join(volume, '..data_tmp'), path.join(volume, '..data'));
  for (const file of ['tls.crt', 'tls.key']) {
    try {
      symlinkSync(path.join('..data', file), path.join(volume, file));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

function pair(): { cert: string; key: string } {
  const { certPem, keyPem } = generateSelfSignedCertificate({ hosts, ips });
  return { cert: certPem, key: keyPem };
}

describe('servingCertificate', () => {
  test('without files, a self-signed certificate for the given names', async () => {
    const lines: string[] = [];
    const sc = await servingCertificate({
      hosts,
      ips,
      log: createLogger('debug', (l) => lines.push(l)),
    });
    expect(sc.source).toBe('self-signed');
    const x509 = new crypto.X509Certificate(sc.cert);
    expect(x509.checkPrivateKey(crypto.createPrivateKey(sc.key))).toBe(true);
    expect(x509.checkHost('localhost')).toBe('localhost');
    expect(lines.join('')).toContain(x509.fingerprint256);
    sc.watch(helloServer(sc)); // nothing to watch
    sc.close();
  });

  test('reloads a changed pair, and keeps serving the last good one when the new one is bad', async () => {
    const a = pair();
    const b = pair();
    const c = pair();
    writeSecretVolume(dir, a);
    const lines: string[] = [];
    const sc = await servingCertificate({
      certFile: path.join(dir, 'tls.crt'),
      keyFile: path.join(dir, 'tls.key'),
      hosts: [],
      ips: [],
      log: createLogger('debug', (l) => lines.push(l)),
      pollIntervalMs: 50,
    });
    expect(sc.source).toBe('files');
    expect(sc.cert).toBe(a.cert);
    const server = helloServer(sc);
    const port = await listen(server);
    sc.watch(server);
    try {
      expect(await servedFingerprint(port)).toBe(fingerprint(a.cert));

      writeSecretVolume(dir, b);
      await until('the server to present certificate B', async () => {
        return (await servedFingerprint(port)) === fingerprint(b.cert);
      });
      expect(sc.cert).toBe(b.cert);
      expect(sc.key).toBe(b.key);
      const reloaded = lines
        .map((l) => JSON.parse(l))
        .find((l) => l.msg === 'serving certificate reloaded');
      expect(reloaded).toMatchObject({
        level: 'info',
        fingerprint256: fingerprint(b.cert),
        validTo: new crypto.X509Certificate(b.cert).validToDate.toISOString(),
      });
      // A real client, trusting only B, gets through: the new context is complete.
      expect(await get({ host: '127.0.0.1', port, ca: b.cert, servername: 'localhost' })).toBe(
        'hello',
      );

      // B's certificate with A's key: well-formed, but not a pair.
      writeSecretVolume(dir, { cert: b.cert, key: a.key });
      const errors = () => lines.map((l) => JSON.parse(l)).filter((l) => l.level === 'error');
      await until('the mismatched key to be reported', () => errors().length > 0);
      expect(errors()[0]).toMatchObject({
        msg: 'serving certificate not reloaded; still serving the previous one',
        error: expect.stringMatching(/does not match/),
      });
      expect(await servedFingerprint(port)).toBe(fingerprint(b.cert));
      expect(sc.key).toBe(b.key);

      // Proving a log line is NOT repeated takes some polls of the same state.
      const after = sc.polls;
      await until('five more polls', () => sc.polls >= after + 5);
      expect(errors()).toHaveLength(1);

      // A half-written key is another distinct state: reported once more.
      writeSecretVolume(dir, { cert: c.cert, key: c.key.slice(0, 40) });
      await until('the truncated key to be reported', () => errors().length > 1);
      expect(errors()[1]?.error).toMatch(/tls-private-key-file/);
      expect(await servedFingerprint(port)).toBe(fingerprint(b.cert));

      // And a good pair afterwards is picked up again.
      writeSecretVolume(dir, c);
      await until('the server to present certificate C', async () => {
        return (await servedFingerprint(port)) === fingerprint(c.cert);
      });
    } finally {
      sc.close();
      await close(server);
    }
  });

  test('one of the two flags alone is refused', async () => {
    await expect(
      servingCertificate({ certFile: '/x/tls.crt', hosts, ips, log: silentLogger }),
    ).rejects.toThrow('--tls-cert-file and --tls-private-key-file must be given together');
    await expect(
      servingCertificate({ keyFile: '/x/tls.key', hosts, ips, log: silentLogger }),
    ).rejects.toThrow('--tls-cert-file and --tls-private-key-file must be given together');
  });

  test('missing, invalid or mismatched files at start are errors naming the file', async () => {
    const a = pair();
    const b = pair();
    const certFile = path.join(dir, 'tls.crt');
    const keyFile = path.join(dir, 'tls.key');
    const start = () => servingCertificate({ certFile, keyFile, hosts, ips, log: silentLogger });

    await expect(start()).rejects.toThrow(`--tls-cert-file ${certFile}: cannot read: ENOENT`);
    writeFileSync(certFile, a.cert);
    await expect(start()).rejects.toThrow(`--tls-private-key-file ${keyFile}: cannot read: ENOENT`);
    writeFileSync(keyFile, 'not a key');
    await expect(start()).rejects.toThrow(
      `--tls-private-key-file ${keyFile}: not a PEM private key`,
    );
    writeFileSync(keyFile, b.key);
    await expect(start()).rejects.toThrow(
      `--tls-private-key-file ${keyFile} does not match the certificate in --tls-cert-file ${certFile}`,
    );
    writeFileSync(certFile, 'garbage');
    await expect(start()).rejects.toThrow(`--tls-cert-file ${certFile}: not a PEM certificate`);

    writeFileSync(certFile, b.cert);
    const sc = await start();
    expect(sc.cert).toBe(b.cert);
    sc.close();
  });
});
