import { readFile } from 'node:fs/promises';
import { PDFiumLibrary } from '@hyzyla/pdfium';
import sharp from 'sharp';
import { JobError } from '../contract.ts';
import { encodePreview, FULL_PAGE_EDGE, PREVIEW_EDGE, type PreviewImage, type PreviewSize } from './encode.ts';

/** One PDFium (WebAssembly) instance per worker thread, started on first use (~0.2 s). */
let library: Promise<PDFiumLibrary> | null = null;
const pdfium = (): Promise<PDFiumLibrary> => (library ??= PDFiumLibrary.init());

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
 * the end is `compare.invalid_query`.
 */
export async function renderPage(path: string, page: number, size: PreviewSize, signal: AbortSignal): Promise<RenderedPage> {
  const bytes = await readFile(path);
  signal.throwIfAborted();
  const lib = await pdfium();
  let doc;
  try {
    doc = await lib.loadDocument(bytes);
  } catch (err) {
    throw new JobError('compare.unavailable', `PDFium cannot open the PDF: ${(err as Error).message}`);
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
    const image = sharp(bitmap.data, { raw: { width: bitmap.width, height: bitmap.height, channels: 4 } });
    return { preview: await encodePreview(image, edge), width: Math.round(originalWidth), height: Math.round(originalHeight), pageCount };
  } finally {
    doc.destroy();
  }
}
