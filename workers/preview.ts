import { encodePreview, type PreviewImage } from './preview/encode.ts';
import { openPicture } from './preview/image.ts';
import { largestPicture, pictureAt } from './preview/office.ts';
import { renderFirstPage } from './preview/pdf.ts';

/** What the compare endpoint needs made from a finished job's files. */
export interface PreviewJob {
  inputPath: string;
  /** Dotless input format as submitted. */
  inputFormat: string;
  outputPath: string;
  /** Dotless output format. */
  outputFormat: string;
}

export interface Size {
  width: number;
  height: number;
}

export interface Comparison {
  before: PreviewImage;
  after: PreviewImage;
  /** What was compared at full size: image pixels, a PDF page in points, an Office document's picture. */
  input: Size;
  output: Size;
}

const OFFICE = new Set(['docx', 'pptx']);

/**
 * Before/after previews of one job (see docs/api.md: Compare previews). Images: the decoded input and
 * the output. PDF: page 1 of each, rendered by PDFium. DOCX/PPTX: the largest embedded picture of
 * the input and the same part of the output. Fails with `compare.unavailable` when there is
 * nothing to show.
 */
export async function makeComparison(job: PreviewJob, signal: AbortSignal): Promise<Comparison> {
  const input = job.inputFormat.toLowerCase();
  if (input === 'pdf') {
    const before = await renderFirstPage(job.inputPath, signal);
    const after = await renderFirstPage(job.outputPath, signal);
    return { before: before.preview, after: after.preview, input: sizeOf(before), output: sizeOf(after) };
  }
  if (OFFICE.has(input)) {
    const original = await largestPicture(job.inputPath, signal);
    const compressed = await pictureAt(job.outputPath, original.part, signal);
    const before = await encodePreview(original.image);
    signal.throwIfAborted();
    return { before, after: await encodePreview(compressed.image), input: sizeOf(original), output: sizeOf(compressed) };
  }
  const original = await openPicture(job.inputPath, input, signal);
  const before = await encodePreview(original.image);
  signal.throwIfAborted();
  const compressed = await openPicture(job.outputPath, job.outputFormat.toLowerCase(), signal);
  return { before, after: await encodePreview(compressed.image), input: sizeOf(original), output: sizeOf(compressed) };
}

const sizeOf = (s: Size): Size => ({ width: s.width, height: s.height });
