import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, rmdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import { fsyncDir } from '../durable/fsync-dir.ts';
import { DATA_FORMAT, DataFormatError } from '../durable/data-format.ts';
import { VERSION } from '../version.ts';
import { allowed, isBlob, JOURNALS, MANIFEST, type BackupManifest } from './backup-format.ts';

/** A manifest lists one line per file: even a data dir of 100,000 jobs' blobs stays far below this. */
const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;
/** The token key (32 bytes) and FORMAT (a number) are small; a manifest without lengths cannot make them larger. */
const SMALL_ENTRY_MAX_BYTES = 64;

export interface Restored {
  manifest: BackupManifest;
  /** False for a backup whose manifest has no per-entry SHA-256 (made by a build before backups recorded them): lengths only were checked. */
  checksums: boolean;
}

/** What an entry is held to: its length (never more bytes than that are written), and its SHA-256 where the manifest gives one. */
interface Expected {
  bytes: number;
  sha256?: string;
  /** Where the length comes from, for the refusal. */
  from: string;
}

const positive = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;

/** A backup's manifest, read whole (it is small); refused when it is not one this compressd can check and read. */
async function readManifest(file: string, body: NodeJS.ReadableStream): Promise<Restored> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    chunks.push(c as Buffer);
    size += (c as Buffer).length;
    if (size > MAX_MANIFEST_BYTES) throw new Error(`${file} is not a compressd backup: its ${MANIFEST} is over ${MAX_MANIFEST_BYTES} bytes`);
  }
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(Buffer.concat(chunks).toString('utf8')) as BackupManifest;
  } catch {
    throw new Error(`${file} is not a compressd backup: its ${MANIFEST} is not JSON`);
  }
  if (manifest.dataFormat > DATA_FORMAT) throw new DataFormatError(`the backup ${file} holds data format version ${manifest.dataFormat}, newer than this compressd ${VERSION} reads (1 to ${DATA_FORMAT}): upgrade compressd`);
  const files = manifest.files as unknown;
  if (files === undefined) {
    // A backup of a build before checksums: it declares each journal's length and how many blobs it holds.
    const journals = manifest.journals as unknown;
    if (!journals || typeof journals !== 'object' || !Object.values(journals).every(positive) || !positive(manifest.blobs)) {
      throw new Error(`${file} cannot be checked: its ${MANIFEST} gives neither checksums nor the length of each journal`);
    }
    return { manifest, checksums: false };
  }
  const valid = (d: unknown) => !!d && typeof d === 'object' && Number.isSafeInteger((d as { bytes: unknown }).bytes) && /^[0-9a-f]{64}$/.test(String((d as { sha256: unknown }).sha256));
  if (!files || typeof files !== 'object' || !Object.values(files).every(valid)) {
    throw new Error(`${file} cannot be checked: its ${MANIFEST} gives no length and SHA-256 for its entries; make a new backup`);
  }
  return { manifest, checksums: true };
}

/**
 * What `entry` must be. A checked manifest gives its length and SHA-256. Without checksums, a journal
 * is held to the length the manifest declares for it; a blob must be stored uncompressed (as every
 * backup wrote them), so it is never more bytes than it takes in the archive; the token key and FORMAT
 * are small. An entry the manifest does not account for is refused.
 */
function expectedOf(file: string, { manifest, checksums }: Restored, entry: yauzl.Entry): Expected {
  const name = entry.fileName;
  const refuse = (why: string) => new Error(`${file} is damaged: ${JSON.stringify(name)} ${why}`);
  if (checksums || (JOURNALS as readonly string[]).includes(name)) {
    const declared = checksums ? manifest.files![name] : Object.hasOwn(manifest.journals, name) ? { bytes: manifest.journals[name]! } : undefined;
    if (!declared) throw refuse('is not in its manifest');
    return { ...declared, from: 'its manifest' };
  }
  const from = 'its entry in the archive';
  if (isBlob(name)) {
    if (entry.compressionMethod !== 0) throw refuse("is compressed, as no backup's file of a job is; nothing was restored");
    return { bytes: entry.uncompressedSize, from };
  }
  if (entry.uncompressedSize > SMALL_ENTRY_MAX_BYTES) throw refuse(`is ${entry.uncompressedSize} bytes, more than any ${name} has; nothing was restored`);
  return { bytes: entry.uncompressedSize, from };
}

/**
 * Passes an entry's bytes on while they agree with what is expected of it: the entry ends with an
 * error as soon as it is longer (a crafted backup cannot write more than it declares), and at its
 * end when it is shorter or its SHA-256 differs.
 */
function matching(file: string, name: string, expected: Expected): Transform {
  const hash = createHash('sha256');
  let bytes = 0;
  const says = expected.sha256 ? `${expected.bytes} bytes, SHA-256 ${expected.sha256}` : `${expected.bytes} bytes`;
  const damaged = (what: string) => new Error(`${file} is damaged: ${JSON.stringify(name)} ${what} (${expected.from} says ${says}); nothing was restored`);
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > expected.bytes) return done(damaged(`is longer than ${expected.from} says`));
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      if (bytes !== expected.bytes) return done(damaged(`has ${bytes} bytes`));
      const sha256 = hash.digest('hex');
      done(!expected.sha256 || sha256 === expected.sha256 ? null : damaged(`has SHA-256 ${sha256}`));
    },
  });
}

function openZip(file: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => yauzl.open(file, { lazyEntries: true, strictFileNames: true }, (err, zip) => (err ? reject(err) : resolve(zip!))));
}

/** Writes one entry below `tmp`, held to what is expected of it, and syncs it; `dirs` collects the directories made. */
async function extractEntry(body: NodeJS.ReadableStream, at: { file: string; name: string; tmp: string; dirs: Set<string> }, expected: Expected): Promise<void> {
  const target = join(at.tmp, at.name);
  for (let d = dirname(target); !at.dirs.has(d); d = dirname(d)) at.dirs.add(d);
  await mkdir(dirname(target), { recursive: true, mode: 0o700 });
  await pipeline(body, matching(at.file, at.name, expected), createWriteStream(target, { mode: 0o600, flags: 'wx' }));
  const handle = await open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Every entry of the archive into `tmp`, the manifest first and each other entry checked against it. */
async function extractAll(zip: yauzl.ZipFile, file: string, tmp: string): Promise<{ restored: Restored; seen: Set<string>; dirs: Set<string> }> {
  let restored: Restored | null = null;
  const seen = new Set<string>();
  const dirs = new Set<string>([tmp]);
  await new Promise<void>((resolve, reject) => {
    zip.on('error', reject);
    zip.on('end', resolve);
    zip.on('entry', (entry: yauzl.Entry) => {
      void (async () => {
        const name = entry.fileName;
        if (!allowed(name)) throw new Error(`${file} is not a compressd backup: unexpected entry ${JSON.stringify(name)}`);
        if (name !== MANIFEST && !restored) throw new Error(`${file} is not a compressd backup: ${JSON.stringify(name)} comes before ${MANIFEST}`);
        const expected = name === MANIFEST ? null : expectedOf(file, restored!, entry);
        if (seen.has(name)) throw new Error(`${file} is damaged: ${JSON.stringify(name)} is in it twice`);
        seen.add(name);
        const body = await new Promise<NodeJS.ReadableStream>((res, rej) => zip.openReadStream(entry, (err, s) => (err ? rej(err) : res(s!))));
        if (expected) await extractEntry(body, { file, name, tmp, dirs }, expected);
        else restored = await readManifest(file, body);
        zip.readEntry();
      })().catch(reject);
    });
    zip.readEntry();
  });
  if (!restored) throw new Error(`${file} is not a compressd backup: no ${MANIFEST}`);
  return { restored, seen, dirs };
}

/** Refuses a backup that lacks an entry its manifest accounts for. */
function checkComplete(file: string, { manifest, checksums }: Restored, seen: Set<string>): void {
  const listed = checksums ? Object.keys(manifest.files!) : Object.keys(manifest.journals);
  const absent = listed.filter((name) => !seen.has(name));
  if (absent.length > 0) throw new Error(`${file} is damaged: its manifest lists ${absent.map((n) => JSON.stringify(n)).join(', ')}, which it does not hold`);
  const blobs = [...seen].filter(isBlob).length;
  if (!checksums && blobs !== manifest.blobs) throw new Error(`${file} is damaged: its manifest counts ${manifest.blobs} files of jobs, it holds ${blobs}`);
}

/**
 * Makes the data dir `dataDir` (which must not exist, or be empty) from a backup: extracted into a
 * private sibling directory, every file synced, then renamed into place, so an interrupted restore
 * leaves no half data dir under the name. Directories 0700, files 0600.
 */
export async function restore(file: string, dataDir: string): Promise<Restored> {
  const existing = await readdir(dataDir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (existing && existing.length > 0) throw new Error(`${dataDir} is not empty: restore makes a new data directory`);
  const zip = await openZip(file);
  const tmp = join(dirname(dataDir), `.${basename(dataDir)}.restore-${randomBytes(4).toString('hex')}`);
  try {
    await mkdir(tmp, { mode: 0o700 });
    const { restored, seen, dirs } = await extractAll(zip, file, tmp);
    checkComplete(file, restored, seen);
    for (const dir of [...dirs].sort((a, b) => b.length - a.length)) await fsyncDir(dir);
    if (existing) await rmdir(dataDir);
    await rename(tmp, dataDir);
    await fsyncDir(dirname(dataDir));
    return restored;
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  } finally {
    zip.close();
  }
}
