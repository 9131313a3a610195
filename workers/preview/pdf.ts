import { readFile } from 'node:fs/promises';
import { PDFiumLibrary } from '@hyzyla/pdfium';
import sharp from 'sharp';
import { JobError } from '../contract.ts';
import { encodePreview, PREVIEW_EDGE, type PreviewImage } from './encode.ts';

/** One PDFium (WebAssembly) instance per worker thread, started on first use (~0.2 s). */
let library: Promise<PDFiumLibrary> | null = null;
const pdfium = (): Promise<PDFiumLibrary> => (library ??= PDFiumLibrary.init());

export interface RenderedPage {
  preview: PreviewImage;
  /** Page size in PDF points (1/72 in), rounded, as displayed (page rotation applied). */
  width: number;
  height: number;
}

/**
 * Renders page 1 with PDFium so that its longest edge is PREVIEW_EDGE pixels (a page is vector
 * data, so small pages are drawn larger rather than upscaled), on white, annotations and form
 * fields included, as a reader shows it.
 */
export async function renderFirstPage(path: string, signal: AbortSignal): Promise<RenderedPage> {
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
    if (doc.getPageCount() < 1) throw new JobError('compare.unavailable', 'The PDF has no pages.');
    const page = doc.getPage(0);
    const { originalWidth, originalHeight } = page.getOriginalSize();
    const scale = PREVIEW_EDGE / Math.max(originalWidth, originalHeight, 1);
    const bitmap = await page.render({ scale, render: 'bitmap', renderFormFields: true });
    signal.throwIfAborted();
    const image = sharp(bitmap.data, { raw: { width: bitmap.width, height: bitmap.height, channels: 4 } });
    return { preview: await encodePreview(image), width: Math.round(originalWidth), height: Math.round(originalHeight) };
  } finally {
    doc.destroy();
  }
}
