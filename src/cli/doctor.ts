// `kubegc doctor [-n NAMESPACE] [--older-than DURATION] [-o text|json]`:
// read-only. Exit status: 0 nothing found, 1 findings, 2 usage error (main.ts),
// 3 the scan could not complete (docs/doctor.md).
import { readFile } from 'node:fs/promises';
import type https from 'node:https';
import { KubeClient, loadKubeConfig } from '../api/client.ts';
import type { KubeConfigLike } from '../api/kubeconfig.ts';
import { analyze, exitCode } from '../doctor/analyze.ts';
import { readGcMetrics, type GcView } from '../doctor/gc-metrics.ts';
import { renderText } from '../doctor/render.ts';
import { ScanError, scan } from '../doctor/scan.ts';
import { VERSION } from '../version.ts';
import { CONTEXT_FLAG, KUBECONFIG_FLAG, OUTPUT_FLAG } from './common-flags.ts';
import { formatFlags, parseFlags, UsageError, type FlagSpecs, type FlagValues } from './flags.ts';

export const EXIT_SCAN_INCOMPLETE = 3;

export const DOCTOR_FLAGS = {
  'older-than': {
    kind: 'duration',
    help: 'only what has been stuck (since deletionTimestamp) or leaking (since the dependent was created: an upper bound of how long) at least this long, e.g. 10m, 24h',
    default: '0',
  },
  namespace: {
    kind: 'string',
    short: 'n',
    help: 'only findings in this namespace (and the namespace itself); cluster-scoped objects are still read, as owners',
  },
  output: OUTPUT_FLAG,
  kubeconfig: KUBECONFIG_FLAG,
  context: CONTEXT_FLAG,
  'gc-metrics': {
    kind: 'string',
    help: "also read a running kubegc controller's /metrics at this URL (e.g. https://127.0.0.1:8443/metrics through kubectl port-forward) and show its work queues by lane: the user's work waiting, the housekeeping backlog",
    validate: (v) => {
      try {
        const u = new URL(v);
        return u.protocol === 'https:' || u.protocol === 'http:'
          ? undefined
          : 'must be an http(s) URL';
      } catch {
        return 'must be an http(s) URL';
      }
    },
  },
  'gc-metrics-token-file': {
    kind: 'string',
    help: "a file holding the bearer token for --gc-metrics (a user allowed get on /metrics, e.g. bound to kubegc-metrics-reader); default: the kubeconfig user's token, if it has one",
  },
  'gc-metrics-insecure-skip-tls-verify': {
    kind: 'bool',
    help: "do not verify --gc-metrics's serving certificate (kubegc's own is self-signed unless it was given --tls-cert-file)",
    default: 'false',
  },
  concurrency: {
    kind: 'int',
    help: 'resources listed at once',
    default: '6',
    validate: (v) => (v >= 1 && v <= 32 ? undefined : 'must be 1 to 32'),
  },
  help: { kind: 'bool', help: 'show this help' },
} satisfies FlagSpecs;

export const DOCTOR_USAGE = `usage: kubegc doctor [-n NAMESPACE] [--older-than DURATION] [-o text|json]

Scans the cluster (metadata-only, paginated LISTs; namespaces and APIServices
in full) and reports, oldest first:
  - objects stuck in deletion and what holds them: the chain of blocking
    dependents down to the foreign finalizer, or the cycle;
  - namespaces stuck in Terminating and why: the namespace controller's
    conditions, what is left in them, unavailable APIServices;
  - dependents whose owners are all gone (leaks), owner references across
    namespaces, to kinds no API serves, and cycles of blocking references.
Read-only (GET and LIST); needs only list permission; works with or without a
running kubegc. A resource it cannot list is named under "not scanned" and
nothing is concluded from it.

exit status: 0 nothing found, 1 findings, 2 usage error, 3 the scan could not
complete (the API server unreachable, discovery failed)

examples:
  kubegc doctor
  kubegc doctor --older-than 1h -o json | jq '.findings[] | select(.kind == "stuck-deletion")'
  kubegc doctor -n shop
  kubegc doctor --gc-metrics https://127.0.0.1:8443/metrics --gc-metrics-insecure-skip-tls-verify

flags:
${formatFlags(DOCTOR_FLAGS)}`;

/**
 * The running controller's view: a read of its /metrics with the token
 * given, or the kubeconfig user's own (a failure to read is part of the
 * report, never a failed scan).
 */
async function readRunningGc(
  url: string,
  flags: FlagValues<typeof DOCTOR_FLAGS>,
  kc: KubeConfigLike,
): Promise<GcView> {
  const tokenFile = flags['gc-metrics-token-file'];
  let token: string | undefined;
  if (tokenFile !== undefined) {
    try {
      token = (await readFile(tokenFile, 'utf8')).trim();
    } catch (err) {
      return { url, leader: null, lanes: [], rateLimited: null, error: (err as Error).message };
    }
  } else {
    const o: https.RequestOptions = { headers: {} };
    await kc.applyToHTTPSOptions(o);
    for (const [k, v] of Object.entries(o.headers ?? {}))
      if (k.toLowerCase() === 'authorization' && typeof v === 'string' && v.startsWith('Bearer '))
        token = v.slice('Bearer '.length);
  }
  return readGcMetrics(url, {
    token,
    insecureSkipTlsVerify: flags['gc-metrics-insecure-skip-tls-verify'] === true,
  });
}

export async function doctorCommand(argv: string[]): Promise<number> {
  const { flags, args } = parseFlags(argv, DOCTOR_FLAGS);
  if (flags.help) {
    console.log(DOCTOR_USAGE);
    return 0;
  }
  if (args.length > 0)
    throw new UsageError(
      `doctor takes no arguments, got "${args.join(' ')}" (see kubegc doctor --help)`,
    );
  const namespace = flags.namespace;
  if (namespace !== undefined && !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace))
    throw new UsageError(`--namespace: "${namespace}" is not a valid namespace name`);
  let kc;
  try {
    kc = await loadKubeConfig(flags.kubeconfig, flags.context);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  let client: KubeClient | undefined;
  try {
    client = await KubeClient.create(kc, { userAgent: `kubegc/${VERSION} doctor` });
    const snapshot = await scan(client, {
      namespace,
      concurrency: flags.concurrency,
    });
    if (namespace && snapshot.namespaces && !snapshot.namespaces.some((n) => n.name === namespace))
      throw new UsageError(`namespace "${namespace}" not found`);
    const olderThanMs = flags['older-than'];
    const report = analyze(snapshot, {
      now: Date.now(),
      olderThanSeconds: olderThanMs > 0 ? Math.floor(olderThanMs / 1000) : undefined,
    });
    const gcMetrics = flags['gc-metrics'];
    if (gcMetrics !== undefined) report.gc = await readRunningGc(gcMetrics, flags, kc);
    if (flags.output === 'json') {
      for (const n of report.notScanned)
        console.error(`kubegc doctor: warning: not scanned: ${n.resource}: ${n.error}`);
      if (report.gc?.error !== undefined)
        console.error(
          `kubegc doctor: warning: ${report.gc.url} could not be read: ${report.gc.error}`,
        );
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } else process.stdout.write(renderText(report));
    return exitCode(report);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    // Anything else must not read as "1: findings".
    const message =
      err instanceof ScanError
        ? err.message
        : err instanceof Error
          ? (err.stack ?? err.message)
          : String(err);
    console.error(`kubegc doctor: the scan could not complete: ${message}`);
    return EXIT_SCAN_INCOMPLETE;
  } finally {
    client?.close();
  }
}
