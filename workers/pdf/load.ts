import { readFile } from 'node:fs/promises';
import { PDFDocument } from 'pdf-lib';
import { JobError } from '../contract.ts';
import { pageLeaves, type PageLeaf } from './pages.ts';

/**
 * Parses a PDF for rewriting. pdf-lib reads the file body object by object and rebuilds the
 * cross-reference table from what it finds, so a broken or missing xref (bad offsets, a
 * truncated trailer section) is repaired on the way in. What cannot be repaired fails cleanly:
 * - `pdf.encrypted`: the file is encrypted (even with an empty user password); rewriting would
 *   need the keys and would drop the protection, so the job fails instead.
 * - `pdf.damaged`: not a PDF, unparsable, or its page tree is missing or broken.
 */
export async function loadPdf(path: string): Promise<{ doc: PDFDocument; pages: PageLeaf[]; bytes: Uint8Array }> {
  const bytes = await readFile(path);
  let doc: PDFDocument;
  try {
    doc = await PDFDocument.load(bytes, { ignoreEncryption: true, updateMetadata: false, throwOnInvalidObject: false });
  } catch (e) {
    throw new JobError('pdf.damaged', `The PDF cannot be read: ${(e as Error).message.split('\n')[0]}`);
  }
  if (doc.isEncrypted) throw new JobError('pdf.encrypted', 'The PDF is encrypted; remove the password or the protection and try again.');
  let pages: PageLeaf[];
  try {
    pages = pageLeaves(doc.context);
  } catch (e) {
    if (e instanceof JobError) throw e;
    throw new JobError('pdf.damaged', `The page tree cannot be read: ${(e as Error).message}`);
  }
  if (pages.length === 0) throw new JobError('pdf.damaged', 'The PDF has no pages.');
  return { doc, pages, bytes };
}
