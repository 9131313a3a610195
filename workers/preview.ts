import type { Comparison, PreviewJob, Size } from '../src/catalog/contract.ts';
import { encodePreview, FULL_EDGE, PREVIEW_EDGE } from './preview/encode.ts';
import { openPicture } from './preview/image.ts';
import { largestPicture, pictureAt } from './preview/office.ts';
import { renderPage } from './preview/pdf.ts';

const OFFICE = new Set(['docx', 'pptx']);

/**
 * Before/after previews of one job (see docs/api.md: Compare previews). Images: the decoded input and
 * the output. PDF: the asked page of each, rendered by PDFium. DOCX/PPTX: the largest embedded
 * picture of the input and the same part of the output. Fails with `compare.unavailable` when
 * there is nothing to show, `compare.invalid_query` for a page the PDF does not have.
 */
export async function makeComparison(job: PreviewJob, signal: AbortSignal): Promise<Comparison> {
  const input = job.inputFormat.toLowerCase();
  const edge = job.size === 'full' ? FULL_EDGE : PREVIEW_EDGE;
  if (input === 'pdf') {
    const before = await renderPage(job.inputPath, job.page, job.size, signal);
    const after = await renderPage(job.outputPath, job.page, job.size, signal);
    return { before: before.preview, after: after.preview, input: sizeOf(before), output: sizeOf(after), page: { number: job.page, count: before.pageCount } };
  }
  if (OFFICE.has(input)) {
    const original = await largestPicture(job.inputPath, signal);
    const compressed = await pictureAt(job.outputPath, original.part, signal);
    const before = await encodePreview(original.image, edge);
    signal.throwIfAborted();
    return { before, after: await encodePreview(compressed.image, edge), input: sizeOf(original), output: sizeOf(compressed), picture: original.part };
  }
  const original = await openPicture(job.inputPath, input, signal);
  const before = await encodePreview(original.image, edge);
  signal.throwIfAborted();
  const compressed = await openPicture(job.outputPath, job.outputFormat.toLowerCase(), signal);
  return { before, after: await encodePreview(compressed.image, edge), input: sizeOf(original), output: sizeOf(compressed) };
}

const sizeOf = (s: Size): Size => ({ width: s.width, height: s.height });
