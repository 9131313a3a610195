import { copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PDFDocument, PDFStreamWriter } from 'pdf-lib';
import type { Compress } from './contract.ts';
import { optimizeImages } from './pdf/images.ts';
import { loadPdf } from './pdf/load.ts';
import { pageLeaves } from './pdf/pages.ts';
import { displaySizes } from './pdf/placements.ts';
import { dedupeStreams, dropPrivateData, recompressStreams, removeUnreferenced } from './pdf/structure.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';
import { onScale } from './shared/progress.ts';

/** Objects per object stream: larger groups deflate better, and readers fetch them as a unit. */
const OBJECTS_PER_STREAM = 100;

/**
 * `document.pdf-compress`. Images are recompressed (see pdf/images.ts), the structure is rebuilt
 * with object streams and a compressed cross-reference stream, unreachable objects are dropped and
 * identical streams merged. Text, fonts, links, bookmarks, forms, annotations, the tag tree and
 * the document metadata are carried over untouched (content streams are only re-deflated).
 * Failures: `pdf.encrypted`, `pdf.damaged` (see pdf/load.ts).
 */
export const compress: Compress = async (job, out, ctx) => {
  ctx.progress(0, 'analyzing');
  const { doc, pages } = await loadPdf(job.inputPath);
  const context = doc.context;
  dropPrivateData(context, pages);
  removeUnreferenced(context);
  dedupeStreams(context);
  const sizes = displaySizes(context, pages);
  ctx.signal.throwIfAborted();
  ctx.progress(10, 'analyzing');

  const { perceived } = await optimizeImages(context, sizes, onScale(10, 75, (p, toward) => ctx.progress(p, 'images', toward)), ctx.signal);

  ctx.progress(85, 'writing');
  await recompressStreams(context);
  removeUnreferenced(context);
  ctx.signal.throwIfAborted();
  const bytes = await PDFStreamWriter.forContext(context, Infinity, true, OBJECTS_PER_STREAM).serializeToBuffer();

  ctx.progress(95, 'finalizing');
  const path = join(out.dir, 'output.pdf');
  await writeFile(path, bytes);
  // A rewrite that does not read back with every page is never delivered: the input is.
  const readable = await samePageCount(bytes, pages.length);
  if (!readable) await copyFile(job.inputPath, path);
  const keptInput = !readable || (await keepInputUnlessSmaller(job.inputPath, path));
  ctx.progress(100, 'finalizing');
  return { path, format: 'pdf', contentType: 'application/pdf', ...(keptInput || perceived === undefined ? {} : { perceivedQuality: perceived }) };
};

async function samePageCount(bytes: Uint8Array, expected: number): Promise<boolean> {
  try {
    const doc = await PDFDocument.load(bytes, { updateMetadata: false });
    return pageLeaves(doc.context).length === expected;
  } catch {
    return false;
  }
}
