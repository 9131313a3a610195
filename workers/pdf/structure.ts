import { createHash } from 'node:crypto';
import { PDFRawStream, PDFRef } from 'pdf-lib';
import type { PDFContext, PDFDict } from 'pdf-lib';
import { filtersOf, isGeneric, undoFilters } from './decode.ts';
import { deflateMax } from './flate.ts';
import { dictOf, name, nameOf, rawStreams, reachableRefs, replaceStream, rewriteRefs } from './objects.ts';
import type { PageLeaf } from './pages.ts';

const MAX_STREAM_BYTES = 256 * 1024 * 1024;

/**
 * Drops what no reader needs to show the document: page thumbnails (/Thumb and the XMP
 * thumbnail), application-private data (/PieceInfo on the catalog, pages and forms), and the
 * print-production /OutputIntents with their ICC profiles — except in PDF/A files, whose
 * conformance requires them.
 */
export function dropPrivateData(ctx: PDFContext, pages: PageLeaf[]): void {
  for (const { dict } of pages) {
    dict.delete(name('Thumb'));
    dict.delete(name('PieceInfo'));
  }
  for (const [, stream] of rawStreams(ctx)) {
    if (nameOf(ctx, stream.dict.get(name('Subtype'))) === 'Form') stream.dict.delete(name('PieceInfo'));
  }
  const catalog = dictOf(ctx, ctx.trailerInfo.Root);
  if (!catalog) return;
  catalog.delete(name('PieceInfo'));
  const metadataRef = catalog.get(name('Metadata'));
  const metadata = metadataRef instanceof PDFRef ? ctx.lookup(metadataRef) : undefined;
  const xmp = metadata instanceof PDFRawStream ? xmpText(ctx, metadata) : undefined;
  const plain = metadata instanceof PDFRawStream && filtersOf(ctx, metadata.dict).length === 0;
  // Only a packet that is valid UTF-8 is edited as text; UTF-16 packets are left alone.
  if (xmp !== undefined && plain && Buffer.from(xmp, 'utf8').equals(metadata.contents)) {
    const slim = slimXmp(xmp);
    if (slim !== xmp) replaceStream(ctx, metadataRef as PDFRef, metadata.dict.clone(ctx), Buffer.from(slim, 'utf8'));
  }
  if (!xmp?.includes('pdfaid:part')) catalog.delete(name('OutputIntents'));
}

function xmpText(ctx: PDFContext, stream: PDFRawStream): string | undefined {
  try {
    return Buffer.from(undoFilters(ctx, filtersOf(ctx, stream.dict), stream.contents, MAX_STREAM_BYTES)).toString('utf8');
  } catch {
    return undefined;
  }
}

/**
 * XMP without its embedded JPEG thumbnail and without the packet's trailing padding (blank room
 * left for in-place edits). Everything else in the packet is kept verbatim.
 */
export function slimXmp(xmp: string): string {
  return xmp
    .replace(/<(xmp|xap):Thumbnails\b[^>]*>[\s\S]*?<\/\1:Thumbnails>\s*/g, '')
    .replace(/\s{64,}(<\?xpacket end=)/, '\n$1');
}

/**
 * Stores identical streams once (fonts embedded per page, logos repeated by an export tool):
 * streams whose dictionary and bytes are equal share one object. Repeated until nothing merges,
 * since merging soft masks or font files makes the dictionaries that point at them equal.
 * Returns how many streams were merged.
 */
export function dedupeStreams(ctx: PDFContext): number {
  let total = 0;
  for (let pass = 0; pass < 8; pass++) {
    const merged = dedupePass(ctx);
    total += merged;
    if (merged === 0) break;
  }
  return total;
}

function dedupePass(ctx: PDFContext): number {
  const byHash = new Map<string, PDFRef>();
  const map = new Map<PDFRef, PDFRef>();
  for (const [ref, stream] of rawStreams(ctx)) {
    if (nameOf(ctx, stream.dict.get(name('Type'))) === 'Metadata') continue;
    const hash = createHash('sha256').update(stream.dict.toString()).update('\0').update(stream.contents).digest('hex');
    const first = byHash.get(hash);
    if (first) map.set(ref, first);
    else byHash.set(hash, ref);
  }
  rewriteRefs(ctx, map);
  for (const ref of map.keys()) ctx.delete(ref);
  return map.size;
}

/** Streams deflating at once on libuv's threads: the job's thread inflates the next meanwhile. */
const STREAM_LANES = 2;

/**
 * Re-deflates every non-image stream at the maximum level (content streams, fonts, ICC profiles…),
 * and deflates unfiltered ones. Predictor parameters are carried over unchanged since the
 * predicted bytes are kept. The XMP metadata stays uncompressed (PDF/A-1 wants it readable).
 * Up to STREAM_LANES deflates run at once, their inflated bytes together within
 * MAX_STREAM_BYTES unless one alone is larger, so memory stays what one stream at a time held.
 */
export async function recompressStreams(ctx: PDFContext): Promise<number> {
  let replaced = 0;
  let held = 0;
  const pending = new Set<Promise<void>>();
  for (const [ref, stream] of rawStreams(ctx)) {
    const plain = plainStream(ctx, stream);
    if (!plain) continue;
    while (pending.size >= STREAM_LANES || (pending.size > 0 && held + plain.bytes.length > MAX_STREAM_BYTES)) await Promise.race(pending);
    held += plain.bytes.length;
    const done: Promise<void> = deflateMax(plain.bytes)
      .then((packed) => {
        if (packed.length >= stream.contents.length) return;
        replaceStream(ctx, ref, plain.dict, packed);
        replaced++;
      })
      .finally(() => {
        held -= plain.bytes.length;
        pending.delete(done);
      });
    // A failure reaches the job through the wait that includes it; one settling after the job failed is no one's.
    done.catch(() => {});
    pending.add(done);
  }
  await Promise.all(pending);
  return replaced;
}

/** A stream recompressStreams deflates again: its inflated bytes and the dictionary they will be stored with, or undefined when it is left as it is. */
function plainStream(ctx: PDFContext, stream: PDFRawStream): { bytes: Uint8Array; dict: PDFDict } | undefined {
  const dict = stream.dict;
  if (nameOf(ctx, dict.get(name('Subtype'))) === 'Image' || nameOf(ctx, dict.get(name('Type'))) === 'Metadata') return undefined;
  const filters = filtersOf(ctx, dict);
  if (!filters.every(isGeneric)) return undefined;
  const withParms = filters.filter((f) => f.parms);
  if (withParms.length > 1 || (withParms[0] && withParms[0].name !== 'FlateDecode' && withParms[0].name !== 'LZWDecode')) return undefined;
  let bytes: Uint8Array;
  try {
    bytes = undoFilters(ctx, filters, stream.contents, MAX_STREAM_BYTES);
  } catch {
    return undefined;
  }
  const next = dict.clone(ctx);
  next.set(name('Filter'), name('FlateDecode'));
  const parms = withParms[0]?.parms?.clone(ctx);
  parms?.delete(name('EarlyChange'));
  if (parms) next.set(name('DecodeParms'), parms);
  else next.delete(name('DecodeParms'));
  return { bytes, dict: next };
}

/** Deletes every object the trailer cannot reach (old revisions, linearization hints, dropped data). */
export function removeUnreferenced(ctx: PDFContext): number {
  const keep = reachableRefs(ctx);
  let removed = 0;
  for (const [ref] of ctx.enumerateIndirectObjects()) {
    if (!keep.has(ref)) {
      ctx.delete(ref);
      removed++;
    }
  }
  return removed;
}
