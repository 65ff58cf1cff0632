// Container log files the kubelet leaves behind: rotated logs and the legacy
// /var/log/containers symlink of each removed container, directories under
// /var/log/pods of deleted pods, and symlinks whose target is gone.
import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  CONTAINER_NAME_LABEL,
  POD_NAME_LABEL,
  POD_NAMESPACE_LABEL,
  containerIdOfLogSymlink,
  legacyLogSymlinkName,
} from './container-gc-policy.ts';

const isMissing = (err: unknown): boolean =>
  (err as NodeJS.ErrnoException).code === 'ENOENT' ||
  (err as NodeJS.ErrnoException).code === 'ENOTDIR';

async function removeIfPresent(file: string): Promise<boolean> {
  try {
    await fs.unlink(file);
    return true;
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
}

/**
 * What the kubelet removes with a container: its log file with the rotated
 * ones (the glob `<logPath>*`) and its legacy symlink. Returns the paths removed.
 */
export async function removeContainerLogs(
  containerId: string,
  labels: Record<string, string>,
  logPath: string,
  containerLogsDir: string,
): Promise<string[]> {
  const removed: string[] = [];
  if (logPath) {
    const dir = path.dirname(logPath);
    const prefix = path.basename(logPath);
    let entries: string[] = [];
    try {
      entries = await fs.readdir(dir);
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
    for (const e of entries)
      if (e.startsWith(prefix) && (await removeIfPresent(path.join(dir, e))))
        removed.push(path.join(dir, e));
  }
  const podName = labels[POD_NAME_LABEL];
  const podNamespace = labels[POD_NAMESPACE_LABEL];
  const containerName = labels[CONTAINER_NAME_LABEL];
  if (podName && podNamespace && containerName) {
    const link = path.join(
      containerLogsDir,
      legacyLogSymlinkName(podName, podNamespace, containerName, containerId),
    );
    if (await removeIfPresent(link)) removed.push(link);
  }
  return removed;
}

/** Entry names of the pod logs directory (none if it does not exist). */
export async function listPodLogDirectories(podLogsDir: string): Promise<string[]> {
  try {
    const entries = await fs.readdir(podLogsDir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory()).map((e) => e.name);
  } catch (err) {
    if (isMissing(err)) return [];
    throw err;
  }
}

export async function removePodLogDirectory(podLogsDir: string, name: string): Promise<void> {
  await fs.rm(path.join(podLogsDir, name), { recursive: true, force: true });
}

export interface DanglingSymlink {
  path: string;
  /** The container the name points at, when it parses. */
  containerId?: string;
}

/** `*.log` symlinks in the container logs directory whose target no longer exists. */
export async function danglingLogSymlinks(containerLogsDir: string): Promise<DanglingSymlink[]> {
  let names: string[];
  try {
    names = await fs.readdir(containerLogsDir);
  } catch (err) {
    if (isMissing(err)) return [];
    throw err;
  }
  const dangling: DanglingSymlink[] = [];
  for (const name of names) {
    if (!name.endsWith('.log')) continue;
    const file = path.join(containerLogsDir, name);
    try {
      const l = await fs.lstat(file);
      if (!l.isSymbolicLink()) continue;
      await fs.stat(file);
    } catch (err) {
      if (!isMissing(err)) throw err;
      const containerId = containerIdOfLogSymlink(name);
      dangling.push({ path: file, ...(containerId ? { containerId } : {}) });
    }
  }
  return dangling;
}

export async function removeSymlink(file: string): Promise<boolean> {
  return removeIfPresent(file);
}
