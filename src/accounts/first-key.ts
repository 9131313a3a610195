import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../durable/atomic-write.ts';

/**
 * Where the first start also leaves the `default` account's API key, which it prints once (the
 * operator contract): a file only the service's user can read, for an operator who did not see the
 * output or whose log has rotated. Delete it once the key is copied.
 */
export const FIRST_KEY_FILE = 'first-api-key';

/** Writes the first key to its file in `dataDir` (0600, atomically) and resolves the file's path. */
export async function saveFirstKey(dataDir: string, key: string): Promise<string> {
  const path = join(dataDir, FIRST_KEY_FILE);
  await writeFileAtomic(path, `${key}\n`, { mode: 0o600 });
  return path;
}

/** The key a first start left in `dataDir`, or null when no start there made one (or it was deleted). */
export function firstKeyIn(dataDir: string): string | null {
  try {
    return readFileSync(join(dataDir, FIRST_KEY_FILE), 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
