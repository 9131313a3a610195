import { ParseSpeeds, PDFDocument, PDFRawStream, type PDFContext, type PDFDict, type PDFObject } from 'pdf-lib';
import { JobError } from '../contract.ts';
import { DecodeLimitError, filtersOf, isGeneric, undoFilters } from '../pdf/decode.ts';
import { arrayOf, dictOf, get, name, nameOf, resolve } from '../pdf/objects.ts';
import { inherited, pageLeaves } from '../pdf/pages.ts';

/**
 * The most a page's content may inflate to (its content streams and the form XObjects it draws,
 * together) before PDFium is asked to draw it. PDFium keeps the inflated bytes and a parsed object
 * per operator in its WebAssembly heap (2 GiB at most, and an abort past it): 64 MiB of path
 * operators took 36 s and 1.1 GB to draw, past the compare time limit already, and a 1 MiB stream
 * inflating to 1 GiB aborted it.
 */
export const PAGE_CONTENT_MAX_BYTES = 64 * 1024 * 1024;

const tooLarge = (page: number) =>
  new JobError('compare.too_large', `Page ${page}'s content inflates past ${PAGE_CONTENT_MAX_BYTES / 1048576} MiB; previews are made only of pages up to that size.`);

/**
 * Throws `compare.too_large` when page `page` (1-based) of the PDF in `bytes` inflates past
 * PAGE_CONTENT_MAX_BYTES, counting every stream inflated at most once and stopping at the cap. Images
 * are not counted: PDFium decodes them downsampled to the drawn size. A page past the end passes (the
 * renderer answers it); a PDF pdf-lib cannot read is `compare.unavailable` (the compressor read it).
 */
export async function checkPageContent(bytes: Uint8Array, page: number): Promise<void> {
  let ctx: PDFContext;
  let leaf: PDFDict | undefined;
  try {
    ctx = (await PDFDocument.load(bytes, { ignoreEncryption: true, updateMetadata: false, throwOnInvalidObject: false, parseSpeed: ParseSpeeds.Fastest })).context;
    leaf = pageLeaves(ctx)[page - 1]?.dict;
  } catch (err) {
    throw new JobError('compare.unavailable', `The PDF cannot be read: ${(err as Error).message.split('\n')[0]}`);
  }
  if (!leaf) return;
  let left = PAGE_CONTENT_MAX_BYTES;
  const seen = new Set<PDFObject>();
  const pending: { streams: PDFObject[]; resources: PDFObject | undefined }[] = [{ streams: contentsOf(ctx, leaf.get(name('Contents'))), resources: inherited(ctx, leaf, 'Resources') }];
  while (pending.length > 0) {
    const { streams, resources } = pending.pop()!;
    for (const ref of streams) {
      if (seen.has(ref)) continue;
      seen.add(ref);
      const stream = resolve(ctx, ref);
      if (stream instanceof PDFRawStream) left -= inflatedSize(ctx, stream, left, page);
      if (left < 0) throw tooLarge(page);
    }
    const res = dictOf(ctx, resources);
    const xobjects = res && dictOf(ctx, get(ctx, res, 'XObject'));
    for (const ref of xobjects?.values() ?? []) {
      if (seen.has(ref)) continue;
      const form = resolve(ctx, ref);
      if (!(form instanceof PDFRawStream) || nameOf(ctx, form.dict.get(name('Subtype'))) !== 'Form') continue;
      pending.push({ streams: [ref], resources: form.dict.get(name('Resources')) });
    }
  }
}

/** A page's Contents: one stream or an array of them. */
function contentsOf(ctx: PDFContext, contents: PDFObject | undefined): PDFObject[] {
  if (contents === undefined) return [];
  return arrayOf(ctx, contents) ?? [contents];
}

/** Bytes `stream` inflates to, or more than `left` once past it (a stream with a filter we cannot undo counts as stored). */
function inflatedSize(ctx: PDFContext, stream: PDFRawStream, left: number, page: number): number {
  const filters = filtersOf(ctx, stream.dict);
  if (!filters.every(isGeneric)) return stream.contents.length;
  try {
    return undoFilters(ctx, filters, stream.contents, Math.max(0, left) + 1).length;
  } catch (err) {
    if (err instanceof DecodeLimitError) throw tooLarge(page);
    // A stream that does not inflate is drawn as far as it goes, which is no more than it holds.
    return stream.contents.length;
  }
}
