import { PDFArray, PDFRawStream, PDFRef } from 'pdf-lib';
import type { PDFContext, PDFDict } from 'pdf-lib';
import { findDraws, IDENTITY, multiply, type Matrix } from './content.ts';
import { filtersOf, undoFilters } from './decode.ts';
import { dictOf, get, nameOf, name, numberOf, numbersOf, resolve } from './objects.ts';
import { inherited, pageSize, type PageLeaf } from './pages.ts';

/** The largest size, in points, at which an image is drawn anywhere in the document. */
export interface DisplaySize {
  width: number;
  height: number;
}

const MAX_CONTENT_BYTES = 64 * 1024 * 1024;
const MAX_FORM_DEPTH = 16;

/**
 * Where every image XObject is drawn, from the content streams of the pages and of the forms
 * they use: the image fills the unit square under the CTM at its `Do`, so its size on the page
 * is the length of the CTM's two column vectors. An image listed in a page's resources whose
 * drawing could not be traced is assumed to fill the page, which never underestimates its size.
 */
export function displaySizes(ctx: PDFContext, pages: PageLeaf[]): Map<PDFRef, DisplaySize> {
  const sizes = new Map<PDFRef, DisplaySize>();
  const listed = new Map<PDFRef, DisplaySize>();
  const grow = (map: Map<PDFRef, DisplaySize>, ref: PDFRef, w: number, h: number): void => {
    const s = map.get(ref);
    map.set(ref, { width: Math.max(s?.width ?? 0, w), height: Math.max(s?.height ?? 0, h) });
  };

  const list = (resources: PDFDict | undefined, page: DisplaySize): PDFDict | undefined => {
    const xobjects = resources && dictOf(ctx, resources.get(name('XObject')));
    for (const [, ref] of xobjects?.entries() ?? []) {
      if (ref instanceof PDFRef && nameOf(ctx, dictOf(ctx, ref)?.get(name('Subtype'))) === 'Image') grow(listed, ref, page.width, page.height);
    }
    return xobjects;
  };

  /** `forms`: the forms being drawn around this content (a form drawing itself is not followed). */
  const walk = (content: Uint8Array, resources: PDFDict | undefined, { start, page, forms }: { start: Matrix; page: DisplaySize; forms: Set<PDFRef> }): void => {
    const xobjects = list(resources, page);
    if (!xobjects) return;
    for (const draw of findDraws(content, start)) {
      const ref = xobjects.get(name(draw.name));
      if (!(ref instanceof PDFRef)) continue;
      const target = ctx.lookup(ref);
      if (!(target instanceof PDFRawStream)) continue;
      const subtype = nameOf(ctx, target.dict.get(name('Subtype')));
      const [a, b, c, d] = draw.ctm;
      if (subtype === 'Image') grow(sizes, ref, Math.hypot(a, b), Math.hypot(c, d));
      else if (subtype === 'Form' && !forms.has(ref) && forms.size < MAX_FORM_DEPTH) {
        const bytes = contentOf(ctx, target);
        if (!bytes) continue;
        const m = numbersOf(ctx, target.dict.get(name('Matrix')));
        const matrix = m?.length === 6 ? (m as Matrix) : IDENTITY;
        const own = dictOf(ctx, target.dict.get(name('Resources')));
        walk(bytes, own ?? resources, { start: multiply(matrix, draw.ctm), page, forms: new Set([...forms, ref]) });
      }
    }
  };

  for (const page of pages) {
    const size = pageSize(ctx, page.dict);
    const unit = numberOf(ctx, page.dict.get(name('UserUnit'))) ?? 1;
    const content = pageContent(ctx, page.dict);
    const resources = dictOf(ctx, inherited(ctx, page.dict, 'Resources'));
    list(resources, size);
    if (content) walk(content, resources, { start: [unit, 0, 0, unit, 0, 0], page: size, forms: new Set() });
  }
  for (const [ref, size] of listed) if (!sizes.has(ref)) sizes.set(ref, size);
  return sizes;
}

function contentOf(ctx: PDFContext, stream: PDFRawStream): Uint8Array | undefined {
  try {
    return undoFilters(ctx, filtersOf(ctx, stream.dict), stream.contents, MAX_CONTENT_BYTES);
  } catch {
    return undefined;
  }
}

/** A page's content streams joined as readers join them (with whitespace between parts). */
function pageContent(ctx: PDFContext, page: PDFDict): Uint8Array | undefined {
  const contents = get(ctx, page, 'Contents');
  const parts = (contents instanceof PDFArray ? contents.asArray() : [contents]).map((p) => resolve(ctx, p));
  const chunks: Uint8Array[] = [];
  for (const part of parts) {
    if (!(part instanceof PDFRawStream)) continue;
    const bytes = contentOf(ctx, part);
    if (!bytes) return undefined;
    chunks.push(bytes, new Uint8Array([10]));
  }
  return chunks.length ? Buffer.concat(chunks) : undefined;
}
