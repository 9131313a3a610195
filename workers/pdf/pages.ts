import { PDFDict, PDFRef } from 'pdf-lib';
import type { PDFContext, PDFObject } from 'pdf-lib';
import { JobError } from '../contract.ts';
import { arrayOf, dictOf, get, name, numberOf, numbersOf } from './objects.ts';

export interface PageLeaf {
  ref: PDFRef;
  dict: PDFDict;
}

/**
 * The leaves of the page tree, in order. Stricter than pdf-lib's traversal: a kid that does not
 * resolve, or a tree that loops, means pages would be lost, so the document counts as damaged.
 */
export function pageLeaves(ctx: PDFContext): PageLeaf[] {
  const root = dictOf(ctx, ctx.trailerInfo.Root);
  const pagesRef = root?.get(name('Pages'));
  if (!root || !(pagesRef instanceof PDFRef)) throw new JobError('pdf.damaged', 'The PDF has no document catalog or page tree.');
  const leaves: PageLeaf[] = [];
  const seen = new Set<PDFRef>();
  const visit = (ref: PDFObject | undefined, depth: number): void => {
    if (!(ref instanceof PDFRef)) throw new JobError('pdf.damaged', 'The page tree holds a page that is not an indirect object.');
    if (seen.has(ref) || depth > 64) throw new JobError('pdf.damaged', 'The page tree loops.');
    seen.add(ref);
    const node = ctx.lookup(ref);
    if (!(node instanceof PDFDict)) throw new JobError('pdf.damaged', `Page tree node ${ref.toString()} is missing.`);
    const kids = arrayOf(ctx, node.get(name('Kids')));
    if (kids) for (const kid of kids) visit(kid, depth + 1);
    else leaves.push({ ref, dict: node });
  };
  visit(pagesRef, 0);
  return leaves;
}

/** A page attribute that may be inherited from an ancestor node (Resources, MediaBox…). */
export function inherited(ctx: PDFContext, page: PDFDict, key: string): PDFObject | undefined {
  let node: PDFDict | undefined = page;
  for (let depth = 0; node && depth < 64; depth++) {
    const v = get(ctx, node, key);
    if (v !== undefined) return v;
    node = dictOf(ctx, node.get(name('Parent')));
  }
  return undefined;
}

/** Page size in points (MediaBox scaled by UserUnit); Letter when the box is unreadable. */
export function pageSize(ctx: PDFContext, page: PDFDict): { width: number; height: number } {
  const box = numbersOf(ctx, inherited(ctx, page, 'MediaBox'));
  const unit = numberOf(ctx, page.get(name('UserUnit'))) ?? 1;
  if (!box || box.length !== 4) return { width: 612 * unit, height: 792 * unit };
  return { width: Math.abs(box[2] - box[0]) * unit, height: Math.abs(box[3] - box[1]) * unit };
}
