// Flags every long-running kubegc mode shares, defined once.
import { createLogger, LEVELS, type Level, type Logger } from '../log.ts';
import { MAX_TIMER_MS } from '../timers.ts';
import { parseBindAddress, sharedPortProblem } from '../shared/serving/server.ts';
import { parseFlags, UsageError, type FlagSpec, type FlagSpecs, type FlagValues } from './flags.ts';
import type { SecureServingOptions } from '../shared/serving/secure-serving.ts';

export const atLeast =
  (min: number) =>
  (v: number): string | undefined =>
    v < min ? `must be at least ${min}` : undefined;

/** 596h: the whole hours below MAX_TIMER_MS, the longest duration a flag waited on with one timer takes. */
export const MAX_TIMER_FLAG_MS = Math.floor(MAX_TIMER_MS / 3_600_000) * 3_600_000;

/**
 * A duration kubegc waits on with a single timer (setTimeout, setInterval, a
 * socket timeout): at least `min` ms, and at most 596h, since a longer timer
 * fires after 1 ms and turns the wait into a busy loop.
 */
export const timerDuration =
  (min = 0) =>
  (v: number): string | undefined => {
    if (v < min) return `must be at least ${min}`;
    if (v > MAX_TIMER_FLAG_MS)
      return `must be at most ${MAX_TIMER_FLAG_MS / 3_600_000}h: kubegc waits on it with one timer, and a timer cannot wait longer than 2^31-1 ms (24.8 days)`;
    return undefined;
  };

export const validAddress = (v: string): string | undefined => {
  try {
    parseBindAddress(v);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
};

export const METRICS_BIND_ADDRESS_FLAG = (what: string) =>
  ({
    kind: 'string',
    help: `address for ${what} (0 disables)`,
    default: ':8443',
    validate: validAddress,
  }) satisfies FlagSpec;

export const HEALTH_PROBE_BIND_ADDRESS_FLAG = {
  kind: 'string',
  help: 'address for /healthz and /readyz (0 disables)',
  default: ':8081',
  validate: validAddress,
} satisfies FlagSpec;

export const LOG_LEVEL_FLAG = {
  kind: 'string',
  help: `one of ${LEVELS.join(', ')}`,
  default: 'info',
  validate: (v) =>
    LEVELS.includes(v as Level) ? undefined : `must be one of ${LEVELS.join(', ')}`,
} satisfies FlagSpec;

export const HELP_FLAG = { kind: 'bool', help: 'show this help' } satisfies FlagSpec;

/** The metrics port's security, named as kube-controller-manager's and controller-runtime's flags. */
export const SECURE_SERVING_FLAGS = {
  'metrics-secure': {
    kind: 'bool',
    help: 'serve the metrics port over HTTPS, to callers whose bearer token the API server accepts (TokenReview) and who may get the path (SubjectAccessReview); false serves plain HTTP to anyone, for local development only',
    default: 'true',
  },
  'tls-cert-file': {
    kind: 'string',
    help: 'PEM certificate (chain) for the metrics port; reloaded when it changes. Without it, a self-signed certificate is made in memory at start',
  },
  'tls-private-key-file': {
    kind: 'string',
    help: 'PEM private key matching --tls-cert-file',
  },
  'authentication-token-webhook-cache-ttl': {
    kind: 'duration',
    help: 'how long a TokenReview answer is cached',
    default: '10s',
  },
  'authorization-webhook-cache-authorized-ttl': {
    kind: 'duration',
    help: 'how long a SubjectAccessReview "allowed" answer is cached',
    default: '10s',
  },
  'authorization-webhook-cache-unauthorized-ttl': {
    kind: 'duration',
    help: 'how long a SubjectAccessReview "denied" answer is cached',
    default: '10s',
  },
} satisfies FlagSpecs;

/** The parsed SECURE_SERVING_FLAGS. */
export function secureServingOptions(
  flags: FlagValues<typeof SECURE_SERVING_FLAGS>,
): SecureServingOptions {
  return {
    secure: flags['metrics-secure'],
    certFile: flags['tls-cert-file'],
    keyFile: flags['tls-private-key-file'],
    tokenTtlMs: flags['authentication-token-webhook-cache-ttl'],
    allowedTtlMs: flags['authorization-webhook-cache-authorized-ttl'],
    deniedTtlMs: flags['authorization-webhook-cache-unauthorized-ttl'],
  };
}

/** Combinations of the serving flags that cannot work, as one message. */
export function servingFlagProblems(
  flags: FlagValues<typeof SECURE_SERVING_FLAGS> & {
    readonly 'metrics-bind-address': string;
    readonly 'health-probe-bind-address': string;
  },
): string | undefined {
  const cert = flags['tls-cert-file'];
  const key = flags['tls-private-key-file'];
  if (Boolean(cert) !== Boolean(key))
    return '--tls-cert-file and --tls-private-key-file must be given together';
  if ((cert || key) && !flags['metrics-secure'])
    return '--tls-cert-file and --tls-private-key-file need --metrics-secure=true';
  return sharedPortProblem(flags['metrics-bind-address'], flags['health-probe-bind-address']);
}

/** `-o text|json` of the read-only commands (explain, doctor). */
export const OUTPUT_FLAG = {
  kind: 'string',
  short: 'o',
  help: 'text or json',
  default: 'text',
  validate: (v) => (v === 'text' || v === 'json' ? undefined : 'must be text or json'),
} satisfies FlagSpec;

export const CONTEXT_FLAG = {
  kind: 'string',
  help: "the kubeconfig context to use (kubectl's --context; default: the current context)",
} satisfies FlagSpec;

export const KUBECONFIG_FLAG = {
  kind: 'string',
  help: 'kubeconfig file (else $KUBECONFIG, ~/.kube/config, in-cluster)',
} satisfies FlagSpec;

/** The flags every long-running subcommand has (its table spreads these in). */
type DaemonFlagSpecs = typeof SECURE_SERVING_FLAGS & {
  help: typeof HELP_FLAG;
  'log-level': typeof LOG_LEVEL_FLAG;
  'metrics-bind-address': ReturnType<typeof METRICS_BIND_ADDRESS_FLAG>;
  'health-probe-bind-address': typeof HEALTH_PROBE_BIND_ADDRESS_FLAG;
};

/**
 * How `kubegc controller` and `kubegc node` begin: their flags parsed,
 * `--help` answered (undefined: the usage was printed), no arguments, the
 * serving flags checked together, and the logger at `--log-level`.
 */
export function daemonStart<S extends FlagSpecs & DaemonFlagSpecs>(
  command: string,
  argv: string[],
  specs: S,
  usage: string,
): { flags: FlagValues<S>; log: Logger } | undefined {
  const { flags, args } = parseFlags(argv, specs);
  if (flags.help) {
    console.log(usage);
    return undefined;
  }
  if (args.length > 0)
    throw new UsageError(`unexpected argument "${args[0]}" (see kubegc ${command} --help)`);
  const servingProblem = servingFlagProblems(flags);
  if (servingProblem) throw new UsageError(servingProblem);
  return { flags, log: createLogger(flags['log-level'] as Level) };
}
