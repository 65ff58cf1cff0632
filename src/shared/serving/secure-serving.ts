// Assembles the metrics port's security from the flags: the serving
// certificate (files, reloaded on change, or self-signed in memory) and
// delegated authentication/authorization through the API server.
import os from 'node:os';
import type { KubeClient } from '../../api/client.ts';
import type { Logger } from '../../log.ts';
import { apiServerReviews, DelegatedAuth } from './delegated-auth.ts';
import type { SecureServing } from './server.ts';
import { servingCertificate } from './tls.ts';

/** Names and addresses the self-signed certificate covers: this pod, by any of its addresses. */
function certificateSubjects(): { hosts: string[]; ips: string[] } {
  const ips = new Set<string>(['127.0.0.1', '::1']);
  for (const list of Object.values(os.networkInterfaces()))
    for (const a of list ?? []) ips.add(a.address.replace(/%.*$/, ''));
  return { hosts: [...new Set([os.hostname(), 'localhost'])], ips: [...ips] };
}

/**
 * Undefined when --metrics-secure=false (with a warning in the log). `client`
 * asks the API server; without one (kubegc node with no API access) secure
 * serving is impossible and the caller must say so.
 */
export interface SecureServingOptions {
  secure: boolean;
  certFile?: string;
  keyFile?: string;
  tokenTtlMs: number;
  allowedTtlMs: number;
  deniedTtlMs: number;
}

export async function secureServing(
  o: SecureServingOptions,
  client: KubeClient | undefined,
  log: Logger,
): Promise<SecureServing | undefined> {
  if (!o.secure) {
    log.warn(
      'the metrics port serves plain HTTP without authentication (--metrics-secure=false): for local development only',
    );
    return undefined;
  }
  if (!client)
    throw new Error(
      '--metrics-secure needs API access (TokenReview and SubjectAccessReview): give --kubeconfig or run in a cluster, or pass --metrics-secure=false',
    );
  const certificate = await servingCertificate({
    certFile: o.certFile || undefined,
    keyFile: o.keyFile || undefined,
    ...certificateSubjects(),
    log,
  });
  const auth = new DelegatedAuth(apiServerReviews(client), {
    tokenTtlMs: o.tokenTtlMs,
    allowedTtlMs: o.allowedTtlMs,
    deniedTtlMs: o.deniedTtlMs,
  });
  return { certificate, authorize: (header, path, verb) => auth.check(header, path, verb) };
}
