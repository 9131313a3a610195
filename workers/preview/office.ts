import { JobError } from '../contract.ts';
import { LIMITS } from '../office/limits.ts';
import { sniffImage } from '../office/media.ts';
import { CONTENT_TYPES_PART, ContentTypes, parseRels } from '../office/opc.ts';
import { decodeXml } from '../office/xml-text.ts';
import { openPackage, readEntry, type OpenPackage, type PackageEntry } from '../office/zip-read.ts';
import { pictureOf, type Picture } from './image.ts';

export interface DocumentPicture extends Picture {
  /** Part name of the picture inside the package, e.g. `word/media/image1.jpeg`. */
  part: string;
}

/**
 * The document's largest embedded picture (by stored bytes) that can be decoded: what a reader
 * would most likely notice if compression hurt it. Pictures in formats without a raster decoder
 * here (EMF, WMF, SVG) are skipped, and so is the package thumbnail (`docProps/thumbnail.jpeg`,
 * a picture of the first page, not part of the document). The package limits of the Office
 * compressor apply.
 */
export async function largestPicture(path: string, signal: AbortSignal): Promise<DocumentPicture> {
  const pkg = await openPackage(path);
  try {
    for (const entry of await imageEntries(pkg)) {
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
  const pkg = await openPackage(path);
  try {
    const entry = pkg.entries.find((e) => e.name.toLowerCase() === part.toLowerCase());
    const picture = entry && (await decodeEntry(pkg, entry, signal));
    if (!picture) throw new JobError('compare.unavailable', `The compressed document has no readable picture at ${part}.`);
    return picture;
  } finally {
    pkg.zip.close();
  }
}

async function imageEntries(pkg: OpenPackage): Promise<PackageEntry[]> {
  const typesEntry = pkg.entries.find((e) => e.name.toLowerCase() === CONTENT_TYPES_PART.toLowerCase());
  if (!typesEntry || typesEntry.uncompressedSize > LIMITS.maxPackageXmlBytes) {
    throw new JobError('compare.unavailable', 'The document has no readable [Content_Types].xml.');
  }
  const types = ContentTypes.parse(decodeXml(await readEntry(pkg.zip, typesEntry)));
  const packageLevel = await packageRelTargets(pkg);
  return pkg.entries
    .filter((e) => !e.isDirectory && !packageLevel.has(e.name.toLowerCase()) && (types.of(e.name) ?? '').toLowerCase().startsWith('image/'))
    .sort((a, b) => b.uncompressedSize - a.uncompressedSize);
}

/** Parts the package itself points at (`_rels/.rels`): the main document, properties, the thumbnail. */
async function packageRelTargets(pkg: OpenPackage): Promise<Set<string>> {
  const rels = pkg.entries.find((e) => e.name.toLowerCase() === '_rels/.rels');
  if (!rels || rels.uncompressedSize > LIMITS.maxPackageXmlBytes) return new Set();
  const targets = parseRels(decodeXml(await readEntry(pkg.zip, rels)), rels.name, '');
  return new Set(targets.flatMap((r) => (r.part ? [r.part.toLowerCase()] : [])));
}

async function decodeEntry(pkg: OpenPackage, entry: PackageEntry, signal: AbortSignal): Promise<Picture | null> {
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
