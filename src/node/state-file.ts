// Image ages that survive restarts: firstDetected / lastUsed per image ID in a
// small JSON file (a hostPath in the DaemonSet). The kubelet keeps these in
// memory only, so every restart makes all images look new (upstream #119711).
// Writes are atomic (temporary file, fsync, rename, fsync of the directory).
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { ImageRecord, ImageRecords } from './image-gc-policy.ts';

export const STATE_FILE_VERSION = 1;

export interface StateFileContent {
  version: number;
  images: Record<string, { firstDetected: string; lastUsed?: string }>;
}

export function encodeState(records: ReadonlyMap<string, ImageRecord>): StateFileContent {
  const images: StateFileContent['images'] = {};
  for (const [id, r] of [...records].sort(([a], [b]) => a.localeCompare(b))) {
    images[id] = {
      firstDetected: new Date(r.firstDetectedMs).toISOString(),
      ...(r.lastUsedMs !== undefined ? { lastUsed: new Date(r.lastUsedMs).toISOString() } : {}),
    };
  }
  return { version: STATE_FILE_VERSION, images };
}

/** Parses a state file's text; throws with a one-line reason when it is not one. */
export function decodeState(text: string): ImageRecords {
  const doc = JSON.parse(text) as Partial<StateFileContent>;
  if (doc.version !== STATE_FILE_VERSION)
    throw new Error(`unsupported state file version ${String(doc.version)}`);
  const records: ImageRecords = new Map();
  for (const [id, r] of Object.entries(doc.images ?? {})) {
    const firstDetectedMs = Date.parse(r.firstDetected);
    if (!Number.isFinite(firstDetectedMs))
      throw new Error(`image ${id}: invalid firstDetected "${r.firstDetected}"`);
    const record: ImageRecord = { firstDetectedMs };
    if (r.lastUsed !== undefined) {
      const lastUsedMs = Date.parse(r.lastUsed);
      if (!Number.isFinite(lastUsedMs))
        throw new Error(`image ${id}: invalid lastUsed "${r.lastUsed}"`);
      record.lastUsedMs = lastUsedMs;
    }
    records.set(id, record);
  }
  return records;
}

export type LoadResult =
  | { kind: 'loaded'; records: ImageRecords }
  | { kind: 'missing' }
  | { kind: 'invalid'; error: string };

export async function loadStateFile(file: string): Promise<LoadResult> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    return { kind: 'invalid', error: (err as Error).message };
  }
  try {
    return { kind: 'loaded', records: decodeState(text) };
  } catch (err) {
    return { kind: 'invalid', error: (err as Error).message };
  }
}

/** Replaces the file atomically: readers see the old or the new content, never a mix. */
export async function saveStateFile(
  file: string,
  records: ReadonlyMap<string, ImageRecord>,
): Promise<void> {
  const dir = path.dirname(file);
  await fs.mkdir(dir, { recursive: true });
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.tmp`);
  const handle = await fs.open(tmp, 'w', 0o644);
  try {
    await handle.writeFile(`${JSON.stringify(encodeState(records), null, 1)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(tmp, file);
  const dirHandle = await fs.open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}
