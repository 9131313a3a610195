import type { Readable } from 'node:stream';
import { SaxesParser } from 'saxes';
import { xmlText } from './xml-text.ts';

/** The default 16:9 slide (13.333 × 7.5 in), the largest size slides are designed for. */
const REFERENCE_SLIDE_EMU = { cx: 12_192_000, cy: 6_858_000 };

/**
 * How much a presentation's slide extents shrink before they are read as inches. A slide has no
 * physical size of its own: it is shown scaled to a screen or page, so an oversized slide (a PDF
 * import can make one 70 in wide) counts as if it fitted the default 16:9 slide. Slides at or below
 * that size keep their inches. Returns 1 for parts without `p:sldSz` (any non-presentation document).
 */
export async function slideScale(mainPart: Readable): Promise<number> {
  const parser = new SaxesParser();
  let scale = 1;
  let found = false;
  parser.on('opentag', (tag) => {
    if (found || !/(^|:)sldSz$/.test(tag.name)) return;
    found = true;
    const attrs = tag.attributes as Record<string, string>;
    const cx = Number(attrs.cx);
    const cy = Number(attrs.cy);
    if (cx > 0 && cy > 0) scale = Math.min(1, REFERENCE_SLIDE_EMU.cx / cx, REFERENCE_SLIDE_EMU.cy / cy);
  });
  for await (const text of xmlText(mainPart)) {
    parser.write(text);
    if (found) break;
  }
  if (!found) parser.close();
  return scale;
}
