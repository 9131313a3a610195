import { JobError } from '../contract.ts';
import { combineUses, scanImageUses, type ImageUse, type Need } from './display-size.ts';
import { LIMITS } from './limits.ts';
import { slideScale } from './slide-size.ts';
import { CONTENT_TYPES_PART, ContentTypes, parseRels, sourceOfRels } from './opc.ts';
import { decodeXml } from './xml-text.ts';
import { openEntryStream, readEntry, type OpenPackage, type PackageEntry } from './zip-read.ts';

export interface Analysis {
  /** The `[Content_Types].xml` entry, written first. */
  contentTypesEntry: PackageEntry;
  /** Image parts (lower-cased names) with the pixels their drawings need, or null when unknown. */
  images: Map<string, Need | null>;
}

/**
 * Reads the package structure: content types, every relationships part, and each part whose
 * relationships point at an image, to learn how large each image is shown. Only
 * `[Content_Types].xml` and `.rels` parts are held in memory; drawings are parsed as they inflate.
 */
export async function analyzePackage(pkg: OpenPackage, signal: AbortSignal): Promise<Analysis> {
  const byName = new Map(pkg.entries.filter((e) => !e.isDirectory).map((e) => [e.name.toLowerCase(), e]));
  const contentTypesEntry = byName.get(CONTENT_TYPES_PART.toLowerCase());
  if (!contentTypesEntry || !byName.has('_rels/.rels')) {
    throw new JobError('office.not_ooxml', 'The zip has no [Content_Types].xml or _rels/.rels, so it is not an Office Open XML (DOCX/PPTX) package.');
  }
  const types = ContentTypes.parse(decodeXml(await readPackageXml(pkg, contentTypesEntry)));

  const images = new Map<string, Need | null>();
  for (const e of byName.values()) {
    if ((types.of(e.name) ?? '').toLowerCase().startsWith('image/')) images.set(e.name.toLowerCase(), null);
  }

  const rootRels = parseRels(decodeXml(await readPackageXml(pkg, byName.get('_rels/.rels')!)), '_rels/.rels', '');
  const main = rootRels.find((r) => r.type.endsWith('/officeDocument') && r.part)?.part;
  const mainEntry = main ? byName.get(main.toLowerCase()) : undefined;
  const scale = mainEntry && mainEntry.uncompressedSize <= LIMITS.maxScanBytes ? await readSlideScale(pkg, mainEntry) : 1;

  const uses: ImageUse[] = [];
  for (const rels of pkg.entries.filter((e) => !e.isDirectory && /\.rels$/i.test(e.name))) {
    signal.throwIfAborted();
    const source = sourceOfRels(rels.name);
    if (source === null) continue;
    const imageRels = new Map<string, string>();
    for (const rel of parseRels(decodeXml(await readPackageXml(pkg, rels)), rels.name, source)) {
      if (rel.part && images.has(rel.part.toLowerCase())) imageRels.set(rel.id, rel.part);
    }
    if (imageRels.size === 0) continue;
    const sourceEntry = byName.get(source.toLowerCase());
    const scanned = sourceEntry && sourceEntry.uncompressedSize <= LIMITS.maxScanBytes ? await scanPart(pkg, sourceEntry, imageRels) : null;
    // A part that cannot be read as a drawing leaves its pictures at their size.
    uses.push(...(scanned ?? [...imageRels.values()].map((part) => ({ part, need: null }))));
  }
  for (const [part, need] of combineUses(uses.map((u) => ({ part: u.part, need: u.need && { width: u.need.width * scale, height: u.need.height * scale } })))) if (images.has(part)) images.set(part, need);
  return { contentTypesEntry, images };
}

async function scanPart(pkg: OpenPackage, entry: PackageEntry, imageRels: Map<string, string>): Promise<ImageUse[] | null> {
  const stream = await openEntryStream(pkg.zip, entry);
  try {
    return await scanImageUses(stream, imageRels);
  } catch {
    stream.destroy();
    return null;
  }
}

async function readSlideScale(pkg: OpenPackage, entry: PackageEntry): Promise<number> {
  const stream = await openEntryStream(pkg.zip, entry);
  try {
    return await slideScale(stream);
  } catch {
    return 1;
  } finally {
    stream.destroy();
  }
}

async function readPackageXml(pkg: OpenPackage, entry: PackageEntry): Promise<Buffer> {
  if (entry.uncompressedSize > LIMITS.maxPackageXmlBytes) {
    throw new JobError('office.damaged', `The package part ${entry.name} is ${entry.uncompressedSize} bytes; at most ${LIMITS.maxPackageXmlBytes} are accepted.`);
  }
  return readEntry(pkg.zip, entry);
}
