import type { Readable } from 'node:stream';
import yauzl from 'yauzl';
import { JobError } from '../contract.ts';
import { LIMITS } from './limits.ts';

/** One central-directory entry, its name decoded and checked. */
export interface PackageEntry {
  name: string;
  isDirectory: boolean;
  uncompressedSize: number;
  compressedSize: number;
  mtime: Date;
  raw: yauzl.Entry;
}

export interface OpenPackage {
  zip: yauzl.ZipFile;
  entries: PackageEntry[];
}

/**
 * Opens the zip and reads its whole central directory, enforcing the limits before a byte is
 * inflated. Names are decoded here (not by yauzl) so unsafe ones fail with their own code.
 */
export async function openPackage(path: string): Promise<OpenPackage> {
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.openPromise(path, { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: true });
  } catch (err) {
    throw damaged(err);
  }
  try {
    if (zip.entryCount > LIMITS.maxEntries) {
      throw new JobError('office.zip_bomb', `The package has ${zip.entryCount} entries; at most ${LIMITS.maxEntries} are accepted.`);
    }
    const entries: PackageEntry[] = [];
    const seen = new Set<string>();
    let total = 0;
    try {
      for await (const raw of zip.eachEntry()) {
        const entry = checkedEntry(raw);
        const key = entry.name.toLowerCase();
        if (seen.has(key)) throw new JobError('office.unsafe_entry_name', `The entry name ${JSON.stringify(entry.name)} occurs twice (names are case-insensitive in a package).`);
        seen.add(key);
        total += entry.uncompressedSize;
        if (total > LIMITS.maxTotalUncompressed) {
          throw new JobError('office.zip_bomb', `The package inflates to more than ${LIMITS.maxTotalUncompressed} bytes.`);
        }
        entries.push(entry);
      }
    } catch (err) {
      throw err instanceof JobError ? err : damaged(err);
    }
    return { zip, entries };
  } catch (err) {
    zip.close();
    throw err;
  }
}

function checkedEntry(raw: yauzl.Entry): PackageEntry {
  const nameBytes = raw.fileNameRaw;
  const name = yauzl.getFileNameLowLevel(raw.generalPurposeBitFlag, nameBytes, raw.extraFields, true);
  const problem = unsafeNameProblem(name);
  if (problem) throw new JobError('office.unsafe_entry_name', `Unsafe entry name ${JSON.stringify(name.slice(0, 120))}: ${problem}.`);
  if (raw.isEncrypted()) throw new JobError('office.encrypted', `The zip entry ${name} is encrypted.`);
  const isDirectory = name.endsWith('/');
  if (!isDirectory && raw.compressionMethod !== 0 && raw.compressionMethod !== 8) {
    throw new JobError('office.damaged', `The zip entry ${name} uses compression method ${raw.compressionMethod}; Office packages use stored or deflate.`);
  }
  const { uncompressedSize, compressedSize } = raw;
  if (uncompressedSize > LIMITS.ratioGraceBytes && uncompressedSize > compressedSize * LIMITS.maxEntryRatio) {
    throw new JobError(
      'office.zip_bomb',
      `The entry ${name} inflates ${compressedSize} bytes to ${uncompressedSize} (more than ${LIMITS.maxEntryRatio}:1).`,
    );
  }
  return { name, isDirectory, uncompressedSize, compressedSize, mtime: raw.getLastModDate(), raw };
}

/** Why a name could escape an extraction directory or be read ambiguously, or null when it is safe. */
export function unsafeNameProblem(name: string): string | null {
  if (name.length === 0) return 'empty name';
  if (name.includes('\\')) return 'backslash in name';
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'control character in name';
  if (name.startsWith('/') || /^[a-zA-Z]:/.test(name)) return 'absolute path';
  const segments = (name.endsWith('/') ? name.slice(0, -1) : name).split('/');
  if (segments.some((s) => s === '..' || s === '.')) return 'relative path segment';
  if (segments.some((s) => s === '')) return 'empty path segment';
  return null;
}

export async function openEntryStream(zip: yauzl.ZipFile, entry: PackageEntry): Promise<Readable> {
  try {
    return await zip.openReadStreamPromise(entry.raw);
  } catch (err) {
    throw damaged(err, entry.name);
  }
}

/** The inflated bytes of one entry; the caller has checked the declared size against its own cap. */
export async function readEntry(zip: yauzl.ZipFile, entry: PackageEntry): Promise<Buffer> {
  const stream = await openEntryStream(zip, entry);
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of stream) chunks.push(chunk as Buffer);
  } catch (err) {
    throw damaged(err, entry.name);
  }
  return Buffer.concat(chunks);
}

export function damaged(err: unknown, entryName?: string): JobError {
  if (err instanceof JobError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new JobError('office.damaged', `The package is damaged${entryName ? ` (entry ${entryName})` : ''}: ${message}.`);
}
