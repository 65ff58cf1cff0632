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
import { runNodeSoak, type NodeContender } from './lib/node/node-soak.ts';
import { renderNode } from './lib/node/node-report.ts';

const SOAK_DIR = path.dirname(fileURLToPath(import.meta.url));

class UsageError extends Error {}

const USAGE = `usage: npm run soak -- [--duration 30m] [--seed N] [--contender kubegc|kcm|both]
                      [--write-results] [--replicas 2|3] [--faults ${FAULT_KINDS.join(',')}]
                      [--qps N] [--dir DIR] [--keep-cluster] [--dump FILE]
       npm run soak -- --node [--duration 30m] [--seed N] [--contender kubegc|kubelet|both]
                      [--write-results] [--dir DIR] [--keep-cluster]`;

export interface Cli {
  options: SoakOptions;
  writeResults: boolean;
  /** The node soak (soak/lib/node/): kubegc node beside the kubelet, the kubelet alone. */
  node?: { contenders: NodeContender[] };
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
  let node = false;
  let contender = 'both';
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
      case '--node':
        node = true;
        break;
      case '--contender': {
        const v = value();
        contender = v;
        if (v === 'kubelet') break; // the node soak's; checked below
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
  if (node) {
    if (contender !== 'both' && contender !== 'kubegc' && contender !== 'kubelet')
      throw new UsageError(
        `--contender with --node must be kubegc, kubelet or both, not "${contender}"`,
      );
    if (o.faults || o.qps !== undefined || o.dumpFile || o.replicas !== 3)
      throw new UsageError(
        '--faults, --qps, --dump and --replicas apply to the controller soak, not --node',
      );
    if (o.dir === '.cluster-soak') o.dir = '.cluster-soak-node';
    return {
      options: o,
      writeResults,
      node: {
        contenders: contender === 'both' ? ['kubegc', 'kubelet'] : [contender as NodeContender],
      },
    };
  }
  if (contender === 'kubelet') throw new UsageError('--contender kubelet needs --node');
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
  if (cli.node) {
    const r = await runNodeSoak({
      durationMs: cli.options.durationMs,
      seed: cli.options.seed,
      contenders: cli.node.contenders,
      dir: cli.options.dir,
      keepCluster: cli.options.keepCluster,
    });
    const md = renderNode(r);
    process.stdout.write(md);
    if (cli.writeResults) {
      const file = path.join(SOAK_DIR, 'RESULTS-node.md');
      await writeFile(
        file,
        await prettier.format(md, {
          ...((await prettier.resolveConfig(file)) ?? {}),
          parser: 'markdown',
        }),
      );
      process.stderr.write(`soak: wrote ${file}\n`);
    }
    if (r.failed) process.stderr.write('soak: kubegc node violated N1–N5 (see above)\n');
    return r.failed ? 1 : 0;
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
