// The serving certificate of the HTTPS metrics endpoint, as kube-controller-manager's
// secure port has it: --tls-cert-file/--tls-private-key-file when given, reloaded when
// their content changes (controller-runtime's certwatcher), otherwise a self-signed
// certificate made in memory at start. The certificate is encoded by hand (a few dozen
// lines of DER) so that node:crypto is the only dependency.
import crypto from 'node:crypto';
import { promises as fsp } from 'node:fs';
import type https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from '../../log.ts';

// ---------------------------------------------------------------------------
// A minimal DER encoder: only what one X.509 v3 certificate needs.

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), derLength(content.length), content]);
}

const sequence = (...parts: Buffer[]): Buffer => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]): Buffer => tlv(0x31, Buffer.concat(parts));
/** `[n] EXPLICIT`: constructed, context-specific. */
const explicit = (n: number, inner: Buffer): Buffer => tlv(0xa0 | n, inner);
const octetString = (content: Buffer): Buffer => tlv(0x04, content);
const bitString = (content: Buffer, unusedBits = 0): Buffer =>
  tlv(0x03, Buffer.concat([Buffer.from([unusedBits]), content]));
const booleanTrue = (): Buffer => Buffer.from([0x01, 0x01, 0xff]);

/** A non-negative INTEGER from its big-endian magnitude, in DER's minimal form. */
function unsignedInteger(magnitude: Buffer): Buffer {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  let body = magnitude.subarray(start);
  if (body.length === 0) body = Buffer.from([0]);
  // A set high bit would read as negative.
  if ((body[0] ?? 0) & 0x80) body = Buffer.concat([Buffer.from([0]), body]);
  return tlv(0x02, body);
}

function objectIdentifier(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const [first = 0, second = 0, ...rest] = arcs;
  const out: number[] = [];
  for (const arc of [first * 40 + second, ...rest]) {
    const base128: number[] = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) {
      base128.unshift(0x80 | (v & 0x7f));
    }
    out.push(...base128);
  }
  return tlv(0x06, Buffer.from(out));
}

/** RFC 5280 §4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050 on; whole seconds, Z. */
function time(date: Date): Buffer {
  const iso = date.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-T:]/g, '') + 'Z';
  const year = date.getUTCFullYear();
  if (year >= 1950 && year < 2050) return tlv(0x17, Buffer.from(digits.slice(2), 'ascii'));
  return tlv(0x18, Buffer.from(digits, 'ascii'));
}

const OID = {
  commonName: '2.5.4.3',
  ecdsaWithSHA256: '1.2.840.10045.4.3.2',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectAltName: '2.5.29.17',
  serverAuth: '1.3.6.1.5.5.7.3.1',
};

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  // DER forbids encoding a DEFAULT value, so a non-critical extension omits the flag.
  return sequence(objectIdentifier(oid), ...(critical ? [booleanTrue()] : []), octetString(value));
}

/** The 4 or 16 address bytes of an iPAddress GeneralName. */
function ipBytes(ip: string): Buffer {
  if (net.isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!net.isIPv6(ip) || ip.includes('%'))
    throw new Error(`not an IP address: ${JSON.stringify(ip)}`);
  let text = ip;
  // An embedded dotted quad (::ffff:198.18.0.1) stands for the last two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const [a = 0, b = 0, c = 0, d = 0] = dotted[1].split('.').map(Number);
    text = `${text.slice(0, -dotted[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? 0 : 8 - headGroups.length - tailGroups.length;
  const groups = [...headGroups, ...Array<string>(zeros).fill('0'), ...tailGroups];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

function isIA5(text: string): boolean {
  return /^[\x20-\x7e]+$/.test(text);
}

function pem(label: string, der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

export interface SelfSignedOptions {
  /** subjectAltName DNS names; IP literals here become IP entries (as upstream's cert.GenerateSelfSignedCertKey does). */
  hosts: string[];
  /** subjectAltName IP addresses, IPv4 or IPv6. */
  ips: string[];
  validityDays?: number;
  now?: Date;
}

/**
 * An EC P-256 key and a self-signed X.509 v3 server certificate for it, both PEM
 * (the key as PKCS#8). CA:FALSE: clients trust it directly, as they do upstream's.
 */
export function generateSelfSignedCertificate(opts: SelfSignedOptions): {
  certPem: string;
  keyPem: string;
} {
  const now = opts.now ?? new Date();
  const validityDays = opts.validityDays ?? 365;
  if (!(validityDays > 0)) throw new Error(`validityDays must be positive, got ${validityDays}`);

  const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });

  const dnsNames: string[] = [];
  const ips = [...opts.ips];
  for (const host of opts.hosts) {
    if (net.isIP(host)) ips.push(host);
    else dnsNames.push(host);
  }
  for (const name of dnsNames) {
    if (!isIA5(name))
      throw new Error(`DNS name must be ASCII (IA5String): ${JSON.stringify(name)}`);
  }
  const generalNames = [
    // [2] dNSName and [7] iPAddress are IMPLICIT primitives.
    ...dnsNames.map((name) => tlv(0x82, Buffer.from(name, 'ascii'))),
    ...ips.map((ip) => tlv(0x87, ipBytes(ip))),
  ];

  const serial = crypto.randomBytes(16);
  // Keep the serial positive and exactly 16 bytes long, with no leading zero to strip.
  serial[0] = ((serial[0] ?? 0) & 0x7f) | 0x40;

  const name = sequence(
    set(
      sequence(
        objectIdentifier(OID.commonName),
        tlv(0x0c, Buffer.from(`kubegc@${Math.floor(now.getTime() / 1000)}`, 'utf8')),
      ),
    ),
  );
  const notBefore = new Date(now.getTime() - 60 * 60 * 1000);
  const notAfter = new Date(now.getTime() + validityDays * 24 * 60 * 60 * 1000);
  const signatureAlgorithm = sequence(objectIdentifier(OID.ecdsaWithSHA256));

  const extensions = [
    // cA DEFAULT FALSE is omitted, which leaves an empty SEQUENCE.
    extension(OID.basicConstraints, true, sequence()),
    // digitalSignature is bit 0; the other 7 bits of the byte are unused.
    extension(OID.keyUsage, true, bitString(Buffer.from([0x80]), 7)),
    extension(OID.extKeyUsage, false, sequence(objectIdentifier(OID.serverAuth))),
    // An empty subjectAltName is invalid (RFC 5280 §4.2.1.6); leave it out instead.
    ...(generalNames.length > 0
      ? [extension(OID.subjectAltName, false, sequence(...generalNames))]
      : []),
  ];

  const tbs = sequence(
    explicit(0, unsignedInteger(Buffer.from([2]))), // v3
    unsignedInteger(serial),
    signatureAlgorithm,
    name,
    sequence(time(notBefore), time(notAfter)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, sequence(...extensions)),
  );
  const signature = crypto.sign('sha256', tbs, { key: privateKey, dsaEncoding: 'der' });
  const certificate = sequence(tbs, signatureAlgorithm, bitString(signature));

  return {
    certPem: pem('CERTIFICATE', certificate),
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

// ---------------------------------------------------------------------------
// The serving certificate, from files or self-signed.

export interface ServingCertificate {
  /** The PEM certificate (chain) currently served. */
  readonly cert: string;
  /** The PEM private key currently served. */
  readonly key: string;
  readonly source: 'files' | 'self-signed';
  /** Polls of the files completed so far (0 when self-signed): tests wait on it. */
  readonly polls: number;
  /**
   * Keeps `server` on the current pair: polls the files and swaps the server's secure
   * context when they change to a valid pair. A no-op for a self-signed certificate.
   * `setSecureContext` resets every context option it is not given (ca, ciphers,
   * minVersion, ...), so pass in `base` whatever the server was created with.
   */
  watch(server: tls.Server | https.Server, base?: tls.SecureContextOptions): void;
  close(): void;
}

export interface ServingCertificateOptions {
  certFile?: string;
  keyFile?: string;
  /** For the self-signed certificate's subjectAltName. */
  hosts: string[];
  ips: string[];
  log: Logger;
  pollIntervalMs?: number;
}

/** Throws, naming the file, unless `cert` and `key` are PEMs that belong together. */
function validatePair(
  cert: string,
  key: string,
  certFile: string,
  keyFile: string,
): crypto.X509Certificate {
  let x509: crypto.X509Certificate;
  try {
    x509 = new crypto.X509Certificate(cert);
  } catch (err) {
    throw new Error(`--tls-cert-file ${certFile}: not a PEM certificate: ${message(err)}`);
  }
  let privateKey: crypto.KeyObject;
  try {
    privateKey = crypto.createPrivateKey(key);
  } catch (err) {
    throw new Error(`--tls-private-key-file ${keyFile}: not a PEM private key: ${message(err)}`);
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new Error(
      `--tls-private-key-file ${keyFile} does not match the certificate in --tls-cert-file ${certFile}`,
    );
  }
  try {
    // What setSecureContext will do: catches what the checks above do not (e.g. a bad chain).
    tls.createSecureContext({ cert, key });
  } catch (err) {
    throw new Error(
      `--tls-cert-file ${certFile} / --tls-private-key-file ${keyFile}: ${message(err)}`,
    );
  }
  return x509;
}

function message(err: unknown): string {
  // Not `instanceof Error`: errors from another realm (jest's VM modules) fail that test.
  if (typeof err === 'object' && err !== null && 'message' in err) return String(err.message);
  return String(err);
}

const summary = (x509: crypto.X509Certificate) => ({
  fingerprint256: x509.fingerprint256,
  validTo: x509.validToDate.toISOString(),
});

export async function servingCertificate(
  opts: ServingCertificateOptions,
): Promise<ServingCertificate> {
  const { certFile, keyFile, log } = opts;
  if ((certFile === undefined || certFile === '') !== (keyFile === undefined || keyFile === '')) {
    throw new Error('--tls-cert-file and --tls-private-key-file must be given together');
  }
  if (!certFile || !keyFile) return selfSigned(opts);
  const cert = await readFlagFile(certFile, '--tls-cert-file');
  const key = await readFlagFile(keyFile, '--tls-private-key-file');
  log.info('serving certificate loaded', {
    certFile,
    keyFile,
    ...summary(validatePair(cert, key, certFile, keyFile)),
  });
  return new FileCertificate(certFile, keyFile, { cert, key }, log, opts.pollIntervalMs ?? 10_000);
}

function selfSigned(opts: ServingCertificateOptions): ServingCertificate {
  const { certPem, keyPem } = generateSelfSignedCertificate({ hosts: opts.hosts, ips: opts.ips });
  opts.log.info('serving certificate generated (self-signed)', {
    ...summary(new crypto.X509Certificate(certPem)),
    hosts: opts.hosts,
    ips: opts.ips,
  });
  return {
    cert: certPem,
    key: keyPem,
    source: 'self-signed',
    polls: 0,
    watch: () => undefined,
    close: () => undefined,
  };
}

async function readFlagFile(file: string, flag: string): Promise<string> {
  try {
    return await fsp.readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`${flag} ${file}: cannot read: ${message(err)}`);
  }
}

/** A pair from --tls-cert-file and --tls-private-key-file, reloaded when the files change. */
class FileCertificate implements ServingCertificate {
  readonly source = 'files';
  private pair: { cert: string; key: string };
  private readonly servers = new Map<tls.Server, tls.SecureContextOptions>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private completedPolls = 0;
  /** A hash, not the content, so no stale private key lingers in memory. */
  private lastRejected: string | undefined;
  private readonly certFile: string;
  private readonly keyFile: string;
  private readonly log: Logger;
  private readonly pollIntervalMs: number;

  constructor(
    certFile: string,
    keyFile: string,
    pair: { cert: string; key: string },
    log: Logger,
    pollIntervalMs: number,
  ) {
    this.certFile = certFile;
    this.keyFile = keyFile;
    this.pair = pair;
    this.log = log;
    this.pollIntervalMs = pollIntervalMs;
  }

  get cert(): string {
    return this.pair.cert;
  }
  get key(): string {
    return this.pair.key;
  }
  get polls(): number {
    return this.completedPolls;
  }

  watch(server: tls.Server, base: tls.SecureContextOptions = {}): void {
    if (this.closed) throw new Error('serving certificate is closed');
    this.servers.set(server, base);
    // The files may have changed since they were loaded.
    server.setSecureContext({ ...base, ...this.pair });
    if (this.timer === undefined) this.schedule();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.servers.clear();
  }

  private schedule(): void {
    if (this.closed) return;
    // A chain of timeouts rather than an interval: a slow read never overlaps the next.
    this.timer = setTimeout(() => {
      this.poll()
        .catch((err: unknown) =>
          this.log.error('serving certificate poll failed', { error: message(err) }),
        )
        .finally(() => {
          this.completedPolls++;
          this.schedule();
        });
    }, this.pollIntervalMs);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    const { certFile, keyFile } = this;
    let next: { cert: string; key: string } | { error: string };
    try {
      // Contents, not mtimes: a Secret volume swaps its ..data symlink, and the new
      // files may carry any mtime.
      const [cert, key] = await Promise.all([
        readFlagFile(certFile, '--tls-cert-file'),
        readFlagFile(keyFile, '--tls-private-key-file'),
      ]);
      next = { cert, key };
    } catch (err) {
      next = { error: message(err) };
    }
    if ('cert' in next && next.cert === this.pair.cert && next.key === this.pair.key) {
      this.lastRejected = undefined;
      return;
    }
    let error = 'error' in next ? next.error : undefined;
    if ('cert' in next) {
      try {
        const x509 = validatePair(next.cert, next.key, certFile, keyFile);
        for (const [server, base] of this.servers) server.setSecureContext({ ...base, ...next });
        this.pair = next;
        this.lastRejected = undefined;
        this.log.info('serving certificate reloaded', { certFile, keyFile, ...summary(x509) });
        return;
      } catch (err) {
        error = message(err);
      }
    }
    // Mid-rotation a poll may see a new cert beside the old key; each distinct state is
    // reported once rather than every interval.
    const fingerprint = crypto
      .createHash('sha256')
      .update('cert' in next ? `${next.cert}\0${next.key}` : `error\0${error}`)
      .digest('hex');
    if (fingerprint !== this.lastRejected) {
      this.lastRejected = fingerprint;
      this.log.error('serving certificate not reloaded; still serving the previous one', {
        certFile,
        keyFile,
        error,
      });
    }
  }
}
