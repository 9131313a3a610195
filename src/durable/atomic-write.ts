import { randomBytes } from 'node:crypto';
import { open, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fsyncDir } from './fsync-dir.ts';

/**
 * Replaces `path` so that readers and crashes see either the old or the new content, never a mix:
 * a private temporary file (a fresh name each time, so two writers never share one) is written,
 * synced, renamed over the target, and the directory synced.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, opts: { mode?: number; sync?: boolean } = {}): Promise<void> {
  const { mode = 0o600, sync = true } = opts;
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    if (sync) await handle.sync();
  } catch (err) {
    await handle.close();
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await handle.close();
  await rename(tmp, path);
  if (sync) await fsyncDir(dirname(path));
}
