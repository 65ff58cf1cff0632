// The frame around a run's tables: the machine it ran on, the markdown table
// layout, and bench/RESULTS.md (the tables of a full run plus the
// hand-written analysis kept from the previous version). The tables
// themselves come from summary.ts.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as prettier from 'prettier';

export interface Machine {
  cores: number;
  cpu: string;
  memoryGiB: number;
  kernel: string;
  node: string;
  go: string;
  kubernetes: string;
  loadAverageAtStart?: number[];
  loadAverageAtEnd?: number[];
}

export function machine(kubernetes: string, kcmBinary: string): Machine {
  return {
    cores: os.cpus().length,
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    go: goVersionOf(kcmBinary),
    kubernetes,
  };
}

/** The Go release the control-plane binaries were built with (`go version FILE`). */
function goVersionOf(binary: string): string {
  try {
    const out = execFileSync('go', ['version', binary], { encoding: 'utf8' });
    return out.slice(out.lastIndexOf(':') + 1).trim();
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------------------
// Rendering

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

export function machineTable(m: Machine): string {
  return [
    '### Machine',
    table(
      ['', ''],
      [
        ['CPU', `${m.cores} cores, ${m.cpu}`],
        ['memory', `${m.memoryGiB} GiB`],
        ['kernel', m.kernel],
        ['Node.js', m.node],
        ['Go (control-plane build)', m.go],
        ['Kubernetes', m.kubernetes],
        ['load average at start (1/5/15 min)', (m.loadAverageAtStart ?? []).join(' / ')],
        ['load average at end', (m.loadAverageAtEnd ?? []).join(' / ')],
      ],
    ),
  ].join('\n');
}

const NOTES_START = '<!-- analysis: kept across runs -->';
const NOTES_END = '<!-- /analysis -->';

/**
 * Sections of bench/RESULTS.md that other scripts write, each between
 * `<!-- NAME: begin -->` and `<!-- NAME: end -->`: bench/scale.ts (one
 * million objects) and bench/restart.ts (a GC started on a backlog).
 */
export type ResultsSection = 'scale' | 'restart';
const SECTIONS: readonly ResultsSection[] = ['scale', 'restart'];
const begin = (name: ResultsSection): string => `<!-- ${name}: begin -->`;
const end = (name: ResultsSection): string => `<!-- ${name}: end -->`;

/** The section `name` of `text`, markers included; undefined if it has none. */
function sectionOf(text: string, name: ResultsSection): string | undefined {
  const s = text.indexOf(begin(name));
  const e = text.indexOf(end(name));
  return s !== -1 && e > s ? text.slice(s, e + end(name).length) : undefined;
}

/** Replaces (or inserts before `## Analysis`, else appends) the section `name` of `file`. */
export async function writeResultsSection(
  file: string,
  name: ResultsSection,
  section: string,
): Promise<void> {
  const previous = await fs.readFile(file, 'utf8').catch(() => '');
  const block = `${begin(name)}\n\n${section}\n\n${end(name)}`;
  const old = sectionOf(previous, name);
  let next: string;
  if (old !== undefined) next = previous.replace(old, () => block);
  else {
    const at = previous.search(/^## Analysis\s*$/m);
    next =
      at === -1
        ? `${previous.trimEnd()}\n\n${block}\n`
        : `${previous.slice(0, at)}${block}\n\n${previous.slice(at)}`;
  }
  const formatted = await prettier.format(next, {
    ...((await prettier.resolveConfig(file)) ?? {}),
    parser: 'markdown',
  });
  await fs.writeFile(file, formatted);
}

/** bench/RESULTS.md: the run's tables, with the hand-written analysis block and the other scripts' sections of the previous file kept. */

export function resultsMarkdown(
  report: string,
  previous: string,
  when: string,
  quick: boolean,
  rawFile: string,
): string {
  const s = previous.indexOf(NOTES_START);
  const e = previous.indexOf(NOTES_END);
  const analysis =
    s !== -1 && e > s ? previous.slice(s, e + NOTES_END.length) : `${NOTES_START}\n${NOTES_END}`;
  // The sections other scripts write are kept as they are.
  const kept = SECTIONS.flatMap((name) => {
    const text = sectionOf(previous, name);
    return text === undefined ? [] : [text, ''];
  });
  return [
    '# Benchmark results',
    '',
    `${quick ? 'Last **quick** run (`npm run bench -- --quick`; no full run recorded yet)' : 'Last full run (`npm run bench`)'}, ${when}.`,
    'Regenerated by the benchmark; only the analysis block below is written by hand.',
    'All contenders ran one after another on the same local control plane (etcd on',
    'tmpfs, kube-apiserver, kube-controller-manager without its GC), each alone and on',
    'a fresh namespace. See `bench/README.md` for what each number means.',
    `Every repetition of this run, failed ones included, is in \`${rawFile}\`;`,
    'every figure below can be recomputed from it (`bench/lib/summary.ts`).',
    '',
    report,
    '',
    ...kept,
    '## Analysis',
    '',
    analysis,
    '',
  ].join('\n');
}

export const RESULTS_DIR = (root: string): string => path.join(root, 'bench', 'results');
