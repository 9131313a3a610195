import { readFileSync } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { VERSION } from '../version.ts';
import { writeFileAtomic } from './atomic-write.ts';

/**
 * The data dir's format version, in the file `FORMAT` (a number and a newline). A data dir without
 * the file was written by compressd 0.1.0: version 1.
 *
 * - 1: `accounts.log`, `ledger.log`, `jobs.log`, `webhooks/outbox.jsonl` (JSON-lines journals, see
 *   ./framing.ts), `spool/<job>/{input,output}`, `download-token.key`; modes as the umask left them.
 * - 2: the same files, plus `FORMAT`; every directory 0700 and every file 0600 (of those the service's
 *   user owns).
 */
export const DATA_FORMAT = 2;
export const FORMAT_FILE = 'FORMAT';

/** The data format a directory without a FORMAT file has. */
const UNMARKED = 1;

export class DataFormatError extends Error {}

/**
 * Steps from version `n - 1` to `n`, by `n`. Each must be safe to run again on a directory it has
 * already changed (a start interrupted after the step but before FORMAT was written repeats it).
 */
const STEPS: Record<number, (dataDir: string) => Promise<void>> = {
  2: privateModes,
};

function parse(text: string, dataDir: string): number {
  const found = Number(text.trim());
  if (!/^\d+\s*$/.test(text) || !Number.isInteger(found) || found < 1) throw new DataFormatError(`${join(dataDir, FORMAT_FILE)} is not a format version: ${JSON.stringify(text.slice(0, 40))}`);
  return found;
}

function tooNew(dataDir: string, found: number): DataFormatError {
  return new DataFormatError(`the data directory ${dataDir} has format version ${found}, newer than this compressd ${VERSION} reads (1 to ${DATA_FORMAT}): upgrade compressd`);
}

/** The directory's format version (1 when unmarked or absent). */
export async function readDataFormat(dataDir: string): Promise<number> {
  try {
    return parse(await readFile(join(dataDir, FORMAT_FILE), 'utf8'), dataDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return UNMARKED;
    throw err;
  }
}

/** Refuses a data dir a newer compressd wrote; for the administration commands, which never migrate. */
export function checkDataFormat(dataDir: string): void {
  let text: string;
  try {
    text = readFileSync(join(dataDir, FORMAT_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const found = parse(text, dataDir);
  if (found > DATA_FORMAT) throw tooNew(dataDir, found);
}

/** What version 1 held; a directory with none of it has nothing to upgrade. */
const VERSION_1_ENTRIES = ['accounts.log', 'ledger.log', 'jobs.log', 'webhooks', 'spool', 'download-token.key'];

/** Marks a data dir that holds nothing yet with the current format; true when it did. */
async function markIfNew(dataDir: string): Promise<boolean> {
  const entries = new Set(await readdir(dataDir));
  if (entries.has(FORMAT_FILE) || VERSION_1_ENTRIES.some((name) => entries.has(name))) return false;
  await writeFileAtomic(join(dataDir, FORMAT_FILE), `${DATA_FORMAT}\n`);
  return true;
}

/**
 * For the administration commands, which never migrate: makes a missing data dir (private), marks
 * a new one with the current format (so its first `serve` reports no upgrade), and refuses one a
 * newer compressd wrote.
 */
export async function prepareDataDir(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await markIfNew(dataDir);
  checkDataFormat(dataDir);
}

/**
 * Brings the data dir to DATA_FORMAT before anything opens it (the caller holds the server lock).
 * FORMAT is written only once every step is done and synced, so an interrupted start leaves the
 * old version recorded and the next start runs the steps again. `from` is null for a new data dir,
 * which is marked with the current format and not reported as upgraded.
 */
export async function migrateDataDir(dataDir: string): Promise<{ from: number | null; to: number }> {
  const from = await readDataFormat(dataDir);
  if (from > DATA_FORMAT) throw tooNew(dataDir, from);
  if (from === DATA_FORMAT) return { from, to: from };
  if (await markIfNew(dataDir)) return { from: null, to: DATA_FORMAT };
  for (let v = from + 1; v <= DATA_FORMAT; v++) await STEPS[v]!(dataDir);
  await writeFileAtomic(join(dataDir, FORMAT_FILE), `${DATA_FORMAT}\n`);
  return { from, to: DATA_FORMAT };
}

/** Version 2: the data dir is private to the service's user, whatever the umask was. */
async function privateModes(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await privateModes(path);
    else if (entry.isFile()) await syncedMode(path, 0o600);
  }
  await syncedMode(dir, 0o700);
}

/**
 * A mode is inode metadata: it is durable once that inode is synced. An entry owned by another
 * user (a mount point made by root for the service's user) cannot be changed by us and is left.
 */
async function syncedMode(path: string, mode: number): Promise<void> {
  const st = await lstat(path);
  if ((st.mode & 0o777) === mode || (process.getuid && st.uid !== process.getuid())) return;
  const handle = await open(path, 'r');
  try {
    await handle.chmod(mode);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
