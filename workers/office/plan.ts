import type { ResizeOptions } from '../../src/catalog/index.ts';
import { ClassQualities, planDocument, type DocumentPicture, type DocumentPlan } from '../image/budget.ts';
import { readHeader } from '../image/door.ts';
import { lumaQuantSum } from '../image/jpeg-quant.ts';
import type { Analysis } from './analyze.ts';
import { LIMITS } from './limits.ts';
import { DocumentCaps, DOCUMENT_LIMITS } from '../shared/document-caps.ts';
import { reserveMemory } from '../shared/memory.ts';
import { scaledSize, sniffImage } from './media.ts';
import { openEntryStream, type OpenPackage, type PackageEntry } from './zip-read.ts';

/** Enough of a picture part to read its header (a camera's EXIF block included). */
const HEADER_BYTES = 256 * 1024;

export interface PicturePlan {
  /** Picture parts carried over without being decoded (tiny, past the document's caps, or too large for the memory budget). */
  carried: Set<string>;
  /** Pictures recompressed at once (lanes.ts), within the memory budget. */
  lanes: number;
  plan: DocumentPlan;
  /** Index in the plan by entry name, for the JPEG pictures (the only ones with a quality search). */
  pictures: Map<string, number>;
  classes: ClassQualities;
  /** Pixels of every picture whose header reads, by entry name: how much memory decoding it takes. */
  pixels: Map<string, number>;
}

/**
 * The document budget of a package's JPEG pictures (budget.ts), from their headers alone (which
 * also give every picture's pixel count, for lanes.ts): the
 * size each will be searched at (after right-sizing and the resize option) and its class (size,
 * quantisation and target size alike: photos from one camera shown alike).
 */
export async function planPictures(pkg: OpenPackage, analysis: Analysis, resize: ResizeOptions | undefined, signal: AbortSignal): Promise<PicturePlan> {
  const found: { entry: PackageEntry; picture: DocumentPicture }[] = [];
  const pixels = new Map<string, number>();
  const caps = new DocumentCaps();
  for (const entry of pkg.entries) {
    signal.throwIfAborted();
    const key = entry.name.toLowerCase();
    if (!analysis.images.has(key) || entry.uncompressedSize > LIMITS.maxMediaBytes) continue;
    if (caps.full()) {
      caps.carry(entry.name);
      continue;
    }
    const head = await readHead(pkg, entry);
    const format = sniffImage(head);
    // A tiny PNG is told by its IHDR alone, without a decoder's round trip (thousands of icons).
    if (format === 'png' && head.length >= 24 && head.readUInt32BE(16) * head.readUInt32BE(20) <= DOCUMENT_LIMITS.maxTinyPixels) {
      caps.carry(entry.name);
      continue;
    }
    // The door's probe alone: only the head of the part is at hand, and no pixel is decoded here.
    const meta = format ? await readHeader(head).catch(() => undefined) : undefined;
    // A picture whose header does not read counts as a large one (it runs alone, lanes.ts).
    if (!caps.admit(entry.name, meta?.width && meta.height ? meta.width * meta.height : undefined)) continue;
    if (!meta?.width || !meta.height) continue;
    pixels.set(entry.name, meta.width * meta.height);
    if (format !== 'jpeg') continue;
    const need = analysis.images.get(key) ?? null;
    const rotated = meta.orientation >= 5;
    const size = scaledSize(meta.width, meta.height, need && (rotated ? { width: need.height, height: need.width } : need), resize) ?? { width: meta.width, height: meta.height };
    const similar = [meta.width, meta.height, lumaQuantSum(head), size.width, size.height].join(' ');
    found.push({ entry, picture: { width: size.width, height: size.height, decoded: meta.width * meta.height, similar } });
  }
  const plan = planDocument(found.map((f) => f.picture));
  const classes = new ClassQualities(found.map((f, i) => ({ similar: f.picture.similar, search: plan.searches[i] })));
  await reserveMemory(caps.peakBytes(), 'This document');
  return { plan, pictures: new Map(found.map((f, i) => [f.entry.name, i])), classes, pixels, carried: caps.carried, lanes: caps.lanes() };
}

async function readHead(pkg: OpenPackage, entry: PackageEntry): Promise<Buffer> {
  const stream = await openEntryStream(pkg.zip, entry);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= HEADER_BYTES) break;
    }
  } catch {
    // A part that cannot be inflated fails later, where it is copied; here it is just not planned.
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks);
}
