import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';

/** Whether a process with this pid runs (one we may not signal counts as running). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Makes this process the data dir's only server (a pid file created exclusively). A lock
 * left by a process that no longer runs (a crash) is taken over.
 */
export function acquireServerLock(path: string): () => void {
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(path, 'utf8') === String(process.pid)) unlinkSync(path);
        } catch {
          // Already gone.
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(readFileSync(path, 'utf8'));
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid)) {
        throw new Error(`another compressd server (pid ${pid}) is using this data directory`);
      }
      unlinkSync(path);
    }
  }
  throw new Error(`could not lock ${path}`);
}
