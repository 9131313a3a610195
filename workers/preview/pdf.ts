import { readFile } from 'node:fs/promises';
import { PDFiumLibrary } from '@hyzyla/pdfium';
import { JobError } from '../contract.ts';
import { pixelPipeline } from '../image/vips.ts';
import { checkPageContent } from './pdf-content.ts';
import type { PreviewImage, PreviewSize } from '../../src/catalog/contract.ts';
import { encodePreview, FULL_PAGE_EDGE, PREVIEW_EDGE } from './encode.ts';

/**
 * One PDFium (WebAssembly) instance per worker thread, started on first use (~0.2 s), and dropped
 * after any fault that is not a JobError: an abort (out of memory) leaves its heap in an unknown
 * state, where the next document read past its bounds ("memory access out of bounds") for every
 * account. Dropped, its memory (up to 2 GiB) goes with it and the next render starts a clean one.
 */
let library: Promise<PDFiumLibrary> | null = null;
const pdfium = (): Promise<PDFiumLibrary> => (library ??= startPdfium());

/**
 * A new instance. Its Emscripten build defines about 160 getters on the global object (warnings for
 * symbols it no longer exports) on its first start, and their closures keep that instance, memory and
 * all, reachable for the thread's life: a dropped first instance would never be collected (1 GB
 * stayed after a fault). They are diagnostics only, so they go.
 */
async function startPdfium(): Promise<PDFiumLibrary> {
  const before = new Set(Object.getOwnPropertyNames(globalThis));
  try {
    return await PDFiumLibrary.init();
  } finally {
    for (const name of Object.getOwnPropertyNames(globalThis)) {
      if (!before.has(name) && Object.getOwnPropertyDescriptor(globalThis, name)?.configurable) delete (globalThis as Record<string, unknown>)[name];
    }
  }
}

export interface RenderedPage {
  preview: PreviewImage;
  /** Page size in PDF points (1/72 in), rounded, as displayed (page rotation applied). */
  width: number;
  height: number;
  /** Pages in the document. */
  pageCount: number;
}

/**
 * Renders page `page` (1-based) with PDFium so that its longest edge is PREVIEW_EDGE pixels, or
 * FULL_PAGE_EDGE for `full` (a page is vector data, so small pages are drawn larger rather than
 * upscaled), on white, annotations and form fields included, as a reader shows it. A page past
 * the end is `compare.invalid_query`; a page whose content inflates past PAGE_CONTENT_MAX_BYTES is
 * `compare.too_large`, found before PDFium reads it.
 */
export async function renderPage(path: string, page: number, size: PreviewSize, signal: AbortSignal): Promise<RenderedPage> {
  const bytes = await readFile(path);
  await checkPageContent(bytes, page);
  signal.throwIfAborted();
  const instance = pdfium();
  try {
    return await render(await instance, bytes, { page, size, signal });
  } catch (err) {
    if (err instanceof JobError || signal.aborted) throw err;
    if (library === instance) library = null;
    throw new JobError('compare.unavailable', `PDFium failed on this PDF: ${(err as Error).message}`);
  }
}

/** The page drawn and encoded (see renderPage). */
async function render(lib: PDFiumLibrary, bytes: Buffer, want: { page: number; size: PreviewSize; signal: AbortSignal }): Promise<RenderedPage> {
  const { page, size, signal } = want;
  let doc;
  try {
    doc = await lib.loadDocument(bytes);
  } catch (err) {
    // PDFium's own refusal of the file (its error codes): the instance is sound.
    if (/^(Unknown error|File not|Password|Unsupported security|Page not found|PDF Loading)/.test((err as Error).message)) {
      throw new JobError('compare.unavailable', `PDFium cannot open the PDF: ${(err as Error).message}`);
    }
    throw err;
  }
  try {
    const pageCount = doc.getPageCount();
    if (pageCount < 1) throw new JobError('compare.unavailable', 'The PDF has no pages.');
    if (page > pageCount) throw new JobError('compare.invalid_query', `page must be between 1 and ${pageCount}: the PDF has ${pageCount} page${pageCount === 1 ? '' : 's'}.`);
    const p = doc.getPage(page - 1);
    const { originalWidth, originalHeight } = p.getOriginalSize();
    const edge = size === 'full' ? FULL_PAGE_EDGE : PREVIEW_EDGE;
    const scale = edge / Math.max(originalWidth, originalHeight, 1);
    const bitmap = await p.render({ scale, render: 'bitmap', renderFormFields: true });
    signal.throwIfAborted();
    const image = pixelPipeline({ data: bitmap.data, width: bitmap.width, height: bitmap.height, channels: 4 });
    return { preview: await encodePreview(image, edge), width: Math.round(originalWidth), height: Math.round(originalHeight), pageCount };
  } finally {
    doc.destroy();
  }
}
