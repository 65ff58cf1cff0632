// kube-apiserver's JSON-lines audit log (cluster/controlplane.ts writes one of
// every write at level Request, rotated into `audit-<timestamp>.log` beside
// it): the independent record of who wrote what, and when, on the server's clock.
import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';

export interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  user: { username: string; groups?: string[] };
  userAgent?: string;
  objectRef?: {
    resource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
    apiVersion?: string;
    subresource?: string;
    uid?: string;
    resourceVersion?: string;
  };
  responseStatus?: { code?: number };
  requestObject?: unknown;
  requestReceivedTimestamp: string;
  stageTimestamp: string;
}

/** The verbs that change something (the audit policy logs exactly these). */
export const WRITE_VERBS: ReadonlySet<string> = new Set([
  'create',
  'update',
  'patch',
  'delete',
  'deletecollection',
]);

/**
 * An audit timestamp (RFC 3339 with microseconds) as milliseconds since the
 * epoch, keeping the microseconds as the fraction (Date.parse drops them).
 */
export function auditTimeMs(ts: string): number {
  const m = /^(.*T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/.exec(ts);
  if (!m) return Date.parse(ts);
  const fraction = (m[2] ?? '').padEnd(6, '0');
  return Date.parse(`${m[1] ?? ''}${m[3] ?? ''}`) + Number(fraction.slice(0, 6)) / 1000;
}

/**
 * The rotated files of `file` (lumberjack's `<stem>-<UTC timestamp><ext>`),
 * oldest first.
 */
async function rotatedFiles(file: string): Promise<string[]> {
  const dir = path.dirname(file);
  const ext = path.extname(file);
  const stem = path.basename(file, ext);
  const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(
    `^${escape(stem)}-(\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}\\.\\d{3})${escape(ext)}$`,
  );
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return names
    .map((n) => ({ n, ts: pattern.exec(n)?.[1] }))
    .filter((x): x is { n: string; ts: string } => x.ts !== undefined)
    .sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0))
    .map((x) => path.join(dir, x.n));
}

/**
 * The events of one file with stage ResponseComplete or Panic. A last line
 * that does not parse is a write in progress and is skipped; any other line
 * that does not parse is an error.
 */
async function readFile(file: string): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  let handle;
  try {
    handle = await fs.open(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return events;
    throw err;
  }
  const stream = handle.createReadStream({ encoding: 'utf8' });
  const lines = readline.createInterface({ input: stream, crlfDelay: Infinity });
  let unparsed: { line: number; error: string } | undefined;
  let n = 0;
  try {
    for await (const text of lines) {
      n++;
      if (unparsed)
        throw new Error(`${file}:${unparsed.line}: not a JSON audit event: ${unparsed.error}`);
      if (!text.trim()) continue;
      let e: AuditEvent;
      try {
        e = JSON.parse(text) as AuditEvent;
      } catch (err) {
        unparsed = { line: n, error: (err as Error).message };
        continue;
      }
      if (e.stage === 'ResponseComplete' || e.stage === 'Panic') events.push(e);
    }
  } finally {
    lines.close();
    stream.destroy();
  }
  return events;
}

/**
 * Every completed request in the audit log `file`: the rotated files first,
 * oldest first, then the current file. Only stages ResponseComplete and
 * Panic; a partial last line (being written) is skipped. A rotation while
 * reading is noticed and the whole log read again.
 */
export async function readAuditLog(file: string): Promise<AuditEvent[]> {
  for (let attempt = 0; ; attempt++) {
    const before = await rotatedFiles(file);
    const events: AuditEvent[] = [];
    for (const f of [...before, file]) events.push(...(await readFile(f)));
    const after = await rotatedFiles(file);
    if (after.join('\n') === before.join('\n') || attempt >= 4) return events;
  }
}
