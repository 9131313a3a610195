import { JobError } from '../contract.ts';
import { LIMITS } from './limits.ts';
import { CONTENT_TYPES_PART, ContentTypes, parseRels, type Relationship } from './opc.ts';
import { decodeXml } from './xml-text.ts';
import { openPackage, readEntry, type OpenPackage, type PackageEntry } from './zip-read.ts';

/** An Office Open XML package, opened: its checked zip entries and what the package says about its parts. */
export interface OfficePackage extends OpenPackage {
  /** The files (not directories) by lower-cased part name. */
  parts: Map<string, PackageEntry>;
  /** The `[Content_Types].xml` entry. */
  contentTypesEntry: PackageEntry;
  types: ContentTypes;
  /** The package's own relationships (`_rels/.rels`): the main document, the properties, the thumbnail. */
  rootRels: Relationship[];
}

/**
 * Opens the package at `path` (zip-read.ts enforces the container limits) and reads its content
 * types and package relationships, which both the Office compressor and the compare preview
 * start from. Fails with `office.not_ooxml` when either is missing.
 */
export async function openOfficePackage(path: string): Promise<OfficePackage> {
  const pkg = await openPackage(path);
  try {
    const parts = new Map(pkg.entries.filter((e) => !e.isDirectory).map((e) => [e.name.toLowerCase(), e]));
    const contentTypesEntry = parts.get(CONTENT_TYPES_PART.toLowerCase());
    const rootRelsEntry = parts.get('_rels/.rels');
    if (!contentTypesEntry || !rootRelsEntry) {
      throw new JobError('office.not_ooxml', 'The zip has no [Content_Types].xml or _rels/.rels, so it is not an Office Open XML (DOCX/PPTX) package.');
    }
    const types = ContentTypes.parse(decodeXml(await readPackageXml(pkg, contentTypesEntry)));
    const rootRels = parseRels(decodeXml(await readPackageXml(pkg, rootRelsEntry)), '_rels/.rels', '');
    return { ...pkg, parts, contentTypesEntry, types, rootRels };
  } catch (err) {
    pkg.zip.close();
    throw err;
  }
}

/** A `[Content_Types].xml` or `.rels` part, inflated whole; a larger one than the limit makes the package damaged. */
export async function readPackageXml(pkg: OpenPackage, entry: PackageEntry): Promise<Buffer> {
  if (entry.uncompressedSize > LIMITS.maxPackageXmlBytes) {
    throw new JobError('office.damaged', `The package part ${entry.name} is ${entry.uncompressedSize} bytes; at most ${LIMITS.maxPackageXmlBytes} are accepted.`);
  }
  return readEntry(pkg.zip, entry);
}
