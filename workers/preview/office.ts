import { JobError } from '../contract.ts';
import { LIMITS } from '../office/limits.ts';
import { sniffImage } from '../office/media.ts';
import { openOfficePackage, type OfficePackage } from '../office/package.ts';
import { readEntry, type PackageEntry } from '../office/zip-read.ts';
import { pictureOf, type Picture } from './image.ts';

export interface DocumentPicture extends Picture {
  /** Part name of the picture inside the package, e.g. `word/media/image1.jpeg`. */
  part: string;
}

/**
 * The document's largest embedded picture (by stored bytes) that can be decoded: what a reader
 * would most likely notice if compression hurt it. Pictures in formats without a raster decoder
 * here (EMF, WMF, SVG) are skipped, and so is the package thumbnail (`docProps/thumbnail.jpeg`,
 * a picture of the first page, not part of the document). The package is opened as the Office
 * compressor opens it (office/package.ts), with its limits.
 */
export async function largestPicture(path: string, signal: AbortSignal): Promise<DocumentPicture> {
  const pkg = await openOfficePackage(path);
  try {
    for (const entry of imageEntries(pkg)) {
      signal.throwIfAborted();
      const picture = await decodeEntry(pkg, entry, signal);
      if (picture) return { ...picture, part: entry.name };
    }
    throw new JobError('compare.unavailable', 'The document has no embedded picture to compare.');
  } finally {
    pkg.zip.close();
  }
}

/** The picture stored under `part` (case-insensitive) in another package, e.g. the compressed output. */
export async function pictureAt(path: string, part: string, signal: AbortSignal): Promise<Picture> {
  const pkg = await openOfficePackage(path);
  try {
    const entry = pkg.parts.get(part.toLowerCase());
    const picture = entry && (await decodeEntry(pkg, entry, signal));
    if (!picture) throw new JobError('compare.unavailable', `The compressed document has no readable picture at ${part}.`);
    return picture;
  } finally {
    pkg.zip.close();
  }
}

/** The image parts, largest first, without those the package itself points at (the thumbnail). */
function imageEntries(pkg: OfficePackage): PackageEntry[] {
  const packageLevel = new Set(pkg.rootRels.flatMap((r) => (r.part ? [r.part.toLowerCase()] : [])));
  return [...pkg.parts.values()]
    .filter((e) => !packageLevel.has(e.name.toLowerCase()) && (pkg.types.of(e.name) ?? '').toLowerCase().startsWith('image/'))
    .sort((a, b) => b.uncompressedSize - a.uncompressedSize);
}

async function decodeEntry(pkg: OfficePackage, entry: PackageEntry, signal: AbortSignal): Promise<Picture | null> {
  if (entry.uncompressedSize > LIMITS.maxMediaBytes) return null;
  const bytes = await readEntry(pkg.zip, entry);
  if (!sniffImage(bytes) && !isGif(bytes)) return null;
  try {
    return await pictureOf(bytes, signal);
  } catch {
    return null;
  }
}

function isGif(bytes: Buffer): boolean {
  return bytes.length >= 6 && bytes.toString('latin1', 0, 4) === 'GIF8';
}
