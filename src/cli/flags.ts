// A small, strict flag parser: `--name value` and `--name=value`, typed
// values, and one clear error line for anything it does not understand.
// Flag names follow the upstream components (kube-controller-manager, kubelet).

export class UsageError extends Error {}

export type FlagKind = 'string' | 'int' | 'number' | 'bool' | 'duration' | 'list';

/** What a flag of each kind parses to (durations in milliseconds). */
export interface FlagKindValue {
  string: string;
  int: number;
  number: number;
  bool: boolean;
  duration: number;
  list: string[];
}

interface SpecOf<K extends FlagKind> {
  kind: K;
  help: string;
  default?: string;
  /** One-letter alias, e.g. 'n' for `-n` (kubectl style). */
  short?: string;
  /** Extra validation of the parsed value; returns an error message or undefined. */
  validate?: (value: FlagKindValue[K]) => string | undefined;
}

/**
 * One flag. A union by kind, so that a table written `{...} satisfies
 * FlagSpecs` keeps each flag's kind and default in its type: a validator of
 * the wrong kind, or a value read as the wrong type, is a compile error.
 */
export type FlagSpec = { [K in FlagKind]: SpecOf<K> }[FlagKind];

export type FlagSpecs = Record<string, FlagSpec>;

export type FlagValue = FlagKindValue[FlagKind];

/** A flag's parsed value: always there when it has a default, else possibly undefined. */
export type FlagValueOf<S extends FlagSpec> = S extends { default: string }
  ? FlagKindValue[S['kind']]
  : FlagKindValue[S['kind']] | undefined;

/** The parsed flags of a table, each typed by its spec. */
export type FlagValues<S extends FlagSpecs> = { readonly [N in keyof S]: FlagValueOf<S[N]> };

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses Go-style durations such as `30s`, `2m`, `1h30m`, `500ms` into milliseconds. */
export function parseDuration(text: string): number {
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let total = 0;
  let consumed = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    total += Number(m[1]) * (DURATION_UNITS[m[2] as string] as number);
    consumed = re.lastIndex;
  }
  if (consumed === 0 || consumed !== text.length) {
    throw new UsageError(`invalid duration "${text}" (examples: 500ms, 30s, 2m, 1h30m)`);
  }
  // Hundreds of digits parse to Infinity, which no flag means.
  if (!Number.isFinite(total)) throw new UsageError(`duration "${text}" is too long`);
  return total;
}

function convert(name: string, spec: FlagSpec, raw: string): FlagValue {
  switch (spec.kind) {
    case 'string':
      return raw;
    case 'int': {
      if (!/^-?\d+$/.test(raw)) throw new UsageError(`--${name}: "${raw}" is not an integer`);
      return Number(raw);
    }
    case 'number': {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n))
        throw new UsageError(`--${name}: "${raw}" is not a number`);
      return n;
    }
    case 'bool': {
      if (raw === 'true') return true;
      if (raw === 'false') return false;
      throw new UsageError(`--${name}: "${raw}" is not true or false`);
    }
    case 'duration':
      try {
        return parseDuration(raw);
      } catch (e) {
        throw new UsageError(`--${name}: ${(e as Error).message}`);
      }
    case 'list':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
  }
}

export interface Parsed<S extends FlagSpecs> {
  flags: FlagValues<S>;
  args: string[];
}

/** The validator of a spec of any kind, applied to a value convert() made for that kind. */
function validatorOf(spec: FlagSpec): ((value: FlagValue) => string | undefined) | undefined {
  return spec.validate as ((value: FlagValue) => string | undefined) | undefined;
}

export function parseFlags<S extends FlagSpecs>(argv: string[], specs: S): Parsed<S> {
  const flags: Record<string, FlagValue> = {};
  const args: string[] = [];
  for (const [name, spec] of Object.entries(specs)) {
    if (spec.default !== undefined) flags[name] = convert(name, spec, spec.default);
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      args.push(...argv.slice(i + 1));
      break;
    }
    let name: string;
    let eq: number;
    if (!a.startsWith('--')) {
      if (!a.startsWith('-') || a === '-') {
        args.push(a);
        continue;
      }
      const alias = Object.entries(specs).find(
        ([, spec]) => spec.short !== undefined && a.startsWith(`-${spec.short}`),
      );
      if (!alias || (a.length > 2 && a[2] !== '=')) throw new UsageError(`unknown flag ${a}`);
      name = alias[0];
      eq = a.length > 2 ? 2 : -1;
    } else {
      eq = a.indexOf('=');
      name = a.slice(2, eq === -1 ? undefined : eq);
    }
    const spec = specs[name];
    if (!spec) throw new UsageError(`unknown flag --${name}`);
    let raw: string;
    if (eq !== -1) raw = a.slice(eq + 1);
    else if (spec.kind === 'bool') raw = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`--${name} needs a value`);
      raw = next;
      i++;
    }
    const value = convert(name, spec, raw);
    const problem = validatorOf(spec)?.(value);
    if (problem) throw new UsageError(`--${name}: ${problem}`);
    flags[name] = value;
  }
  // Each value was made by convert() for its spec's kind, and every flag with a default is set.
  return { flags: flags as FlagValues<S>, args };
}

export function formatFlags(specs: FlagSpecs): string {
  return Object.entries(specs)
    .map(([name, s]) => {
      const left = `  ${s.short ? `-${s.short}, ` : ''}--${name}${s.kind === 'bool' ? '' : ` ${s.kind}`}`;
      const def = s.default !== undefined && s.default !== '' ? ` (default ${s.default})` : '';
      return `${left.padEnd(48)} ${s.help}${def}`;
    })
    .join('\n');
}
