// A self-signed key and certificate for local TLS servers in tests (openssl).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** `ips`: subjectAltName IP entries (Go's TLS, kube-apiserver's included, ignores the CN). */
export function selfSignedCert(ips: string[] = []): { key: Buffer; cert: Buffer } {
  const dir = mkdtempSync(path.join(tmpdir(), 'kubegc-tls-'));
  try {
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        ...(ips.length > 0
          ? ['-addext', `subjectAltName=${ips.map((ip) => `IP:${ip}`).join(',')}`]
          : []),
      ],
      { stdio: 'pipe' },
    );
    return { key: readFileSync(key), cert: readFileSync(cert) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
