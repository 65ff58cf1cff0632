// Image ages that survive restarts: firstDetected / lastUsed per image ID in a
// small JSON file (a hostPath in the DaemonSet), and the workload of each
// image's last user (for images expected back; optional, files without it
// stay valid). The kubelet keeps these in
// memory only, so every restart makes all images look new (upstream #119711).
// Writes are atomic (temporary file, fsync, rename, fsync of the directory).
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { ImageRecord, ImageRecords, LastUser } from './image-gc-policy.ts';

export const STATE_FILE_VERSION = 1;

export interface StateFileContent {
  version: number;
  images: Record<string, { firstDetected: string; lastUsed?: string; lastUser?: LastUser }>;
}

export function encodeState(records: ReadonlyMap<string, ImageRecord>): StateFileContent {
  const images: StateFileContent['images'] = {};
  for (const [id, r] of [...records].sort(([a], [b]) => a.localeCompare(b))) {
    images[id] = {
      firstDetected: new Date(r.firstDetectedMs).toISOString(),
      ...(r.lastUsedMs !== undefined ? { lastUsed: new Date(r.lastUsedMs).toISOString() } : {}),
      ...(r.lastUser
        ? {
            lastUser: {
              namespace: r.lastUser.namespace,
              owner: {
                apiVersion: r.lastUser.owner.apiVersion,
                kind: r.lastUser.owner.kind,
                name: r.lastUser.owner.name,
                uid: r.lastUser.owner.uid,
              },
            },
          }
        : {}),
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
    if (r.lastUser !== undefined) record.lastUser = decodeLastUser(id, r.lastUser);
    records.set(id, record);
  }
  return records;
}

const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v !== '';

/** A lastUser as written by encodeState; throws with a one-line reason otherwise. */
function decodeLastUser(id: string, v: unknown): LastUser {
  const u = v as { namespace?: unknown; owner?: Record<string, unknown> } | null;
  const o = typeof u === 'object' && u !== null ? u.owner : undefined;
  if (
    typeof u !== 'object' ||
    u === null ||
    !nonEmpty(u.namespace) ||
    typeof o !== 'object' ||
    o === null ||
    !nonEmpty(o.apiVersion) ||
    !nonEmpty(o.kind) ||
    !nonEmpty(o.name) ||
    !nonEmpty(o.uid)
  )
    throw new Error(
      `image ${id}: invalid lastUser ${JSON.stringify(v)?.slice(0, 200) ?? String(v)} (want {namespace, owner: {apiVersion, kind, name, uid}})`,
    );
  return {
    namespace: u.namespace,
    owner: { apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid },
  };
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
