// Flags every long-running kubegc mode shares, defined once.
import { LEVELS, type Level } from '../log.ts';
import { parseBindAddress } from '../observability/server.ts';
import type { FlagSpec } from './flags.ts';

export const atLeast =
  (min: number) =>
  (v: unknown): string | undefined =>
    (v as number) < min ? `must be at least ${min}` : undefined;

export const validAddress = (v: unknown): string | undefined => {
  try {
    parseBindAddress(v as string);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
};

export const METRICS_BIND_ADDRESS_FLAG = (what: string): FlagSpec => ({
  kind: 'string',
  help: `address for ${what} (0 disables)`,
  default: ':8080',
  validate: validAddress,
});

export const HEALTH_PROBE_BIND_ADDRESS_FLAG: FlagSpec = {
  kind: 'string',
  help: 'address for /healthz and /readyz (0 disables)',
  default: ':8081',
  validate: validAddress,
};

export const LOG_LEVEL_FLAG: FlagSpec = {
  kind: 'string',
  help: `one of ${LEVELS.join(', ')}`,
  default: 'info',
  validate: (v) =>
    LEVELS.includes(v as Level) ? undefined : `must be one of ${LEVELS.join(', ')}`,
};

export const HELP_FLAG: FlagSpec = { kind: 'bool', help: 'show this help' };
