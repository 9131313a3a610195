import { combineUses, scanImageUses, type ImageUse, type Need } from './display-size.ts';
import { LIMITS } from './limits.ts';
import { readPackageXml, type OfficePackage } from './package.ts';
import { slideScale } from './slide-size.ts';
import { parseRels, sourceOfRels } from './opc.ts';
import { decodeXml } from './xml-text.ts';
import { openEntryStream, type OpenPackage, type PackageEntry } from './zip-read.ts';

export interface Analysis {
  /** The `[Content_Types].xml` entry, written first. */
  contentTypesEntry: PackageEntry;
  /** Image parts (lower-cased names) with the pixels their drawings need, or null when unknown. */
  images: Map<string, Need | null>;
}

/**
 * Reads the package structure beyond what opening it read (package.ts): every relationships part,
 * and each part whose relationships point at an image, to learn how large each image is shown.
 * Only `[Content_Types].xml` and `.rels` parts are held in memory; drawings are parsed as they inflate.
 */
export async function analyzePackage(pkg: OfficePackage, signal: AbortSignal): Promise<Analysis> {
  const { parts: byName, contentTypesEntry, types, rootRels } = pkg;
  const images = new Map<string, Need | null>();
  for (const e of byName.values()) {
    if ((types.of(e.name) ?? '').toLowerCase().startsWith('image/')) images.set(e.name.toLowerCase(), null);
  }

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
