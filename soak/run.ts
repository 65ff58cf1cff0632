// npm run soak -- [--duration 30m] [--seed N] [--contender kubegc|kcm|both] [--write-results]
//   [--replicas 2|3] [--faults kind,kind,...] [--qps N] [--dir DIR] [--keep-cluster] [--dump FILE]
// kubegc and kube-controller-manager's garbage collector on the same seeded
// chaos, each on a fresh local control plane; see soak/README.md.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';
import { render } from './lib/report.ts';
import { FAULT_KINDS, parseDuration, type ContenderName, type FaultKind } from './lib/schedule.ts';
import { runSoak, type SoakOptions } from './lib/soak.ts';

const SOAK_DIR = path.dirname(fileURLToPath(import.meta.url));

class UsageError extends Error {}

const USAGE = `usage: npm run soak -- [--duration 30m] [--seed N] [--contender kubegc|kcm|both]
                      [--write-results] [--replicas 2|3] [--faults ${FAULT_KINDS.join(',')}]
                      [--qps N] [--dir DIR] [--keep-cluster] [--dump FILE]`;

export interface Cli {
  options: SoakOptions;
  writeResults: boolean;
}

export function parseArgs(argv: string[]): Cli {
  const o: SoakOptions = {
    durationMs: 30 * 60_000,
    seed: 1,
    contenders: ['kubegc', 'kcm'],
    dir: '.cluster-soak',
    replicas: 3,
  };
  let writeResults = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=') ? arg.split(/=(.*)/s, 2) : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '--duration':
        try {
          o.durationMs = parseDuration(value());
        } catch (err) {
          throw new UsageError(`--duration: ${(err as Error).message}`);
        }
        if (o.durationMs < 60_000) throw new UsageError('--duration must be at least 1m');
        break;
      case '--seed': {
        const v = value();
        if (!/^-?\d+$/.test(v) || !Number.isSafeInteger(Number(v)))
          throw new UsageError(`--seed must be an integer, not "${v}"`);
        o.seed = Number(v);
        break;
      }
      case '--contender': {
        const v = value();
        if (v === 'both') o.contenders = ['kubegc', 'kcm'];
        else if (v === 'kubegc' || v === 'kcm') o.contenders = [v as ContenderName];
        else throw new UsageError(`--contender must be kubegc, kcm or both, not "${v}"`);
        break;
      }
      case '--replicas': {
        const v = Number(value());
        if (!Number.isInteger(v) || v < 2 || v > 3)
          throw new UsageError('--replicas must be 2 or 3');
        o.replicas = v;
        break;
      }
      case '--faults': {
        const kinds = value().split(',').filter(Boolean);
        const bad = kinds.filter((k) => !(FAULT_KINDS as readonly string[]).includes(k));
        if (bad.length)
          throw new UsageError(`unknown fault ${bad.join(', ')}; known: ${FAULT_KINDS.join(', ')}`);
        o.faults = kinds as FaultKind[];
        break;
      }
      case '--qps': {
        const v = Number(value());
        if (!(v > 0) || v > 100) throw new UsageError('--qps must be a number in (0, 100]');
        o.qps = v;
        break;
      }
      case '--dir':
        o.dir = value();
        break;
      case '--dump':
        o.dumpFile = path.resolve(value());
        break;
      case '--keep-cluster':
        o.keepCluster = true;
        break;
      case '--write-results':
        writeResults = true;
        break;
      case '--help':
      case '-h':
        throw new UsageError('');
      default:
        throw new UsageError(`unknown argument "${arg}"`);
    }
  }
  if (
    !o.contenders.includes('kubegc') &&
    o.faults?.length &&
    o.faults.every((k) => k === 'leader-stop')
  )
    throw new UsageError('--faults leader-stop applies to kubegc only');
  return { options: o, writeResults };
}

async function main(): Promise<number> {
  let cli: Cli;
  try {
    cli = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      if (err.message) process.stderr.write(`soak: ${err.message}\n`);
      process.stderr.write(`${USAGE}\n`);
      return err.message ? 2 : 0;
    }
    throw err;
  }
  const result = await runSoak(cli.options);
  process.stdout.write(render(result, { evidenceLines: 14, maxViolations: 10 }));
  if (cli.writeResults) {
    const file = path.join(SOAK_DIR, 'RESULTS.md');
    // Formatted as `npm run lint` (prettier --check) expects of the committed file.
    const markdown = await prettier.format(render(result), {
      ...((await prettier.resolveConfig(file)) ?? {}),
      parser: 'markdown',
    });
    await writeFile(file, markdown);
    process.stderr.write(`soak: wrote ${file}\n`);
  }
  if (result.failed) process.stderr.write('soak: kubegc violated I1–I4 (see above)\n');
  return result.failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`soak: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
