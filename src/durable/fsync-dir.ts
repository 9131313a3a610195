import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

/** Makes a rename, link or create in `dir` durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
