import { OUR_FORMS } from './encode.ts';
import { MAX_QUALITY } from './quality-bracket.ts';
import { headerSegments, lumaQuantTable, ourQualityOf } from './jpeg-quant.ts';

/**
 * Our signature in every JPEG this service encodes at a chosen quality: a COM segment (15 bytes).
 * It is what tells our own output from another encoder's when both use the same tables, which
 * near quality 100 every encoder does.
 */
const SIGNATURE = Buffer.from('compressd/1', 'latin1');

/** The JPEG with our COM segment inserted after its APPn segments (where readers expect metadata). */
export function markAsOurs(jpeg: Buffer): Buffer {
  const at = afterAppSegments(jpeg);
  const segment = Buffer.alloc(4 + SIGNATURE.length);
  segment.writeUInt16BE(0xfffe, 0);
  segment.writeUInt16BE(2 + SIGNATURE.length, 2);
  SIGNATURE.copy(segment, 4);
  return Buffer.concat([jpeg.subarray(0, at), segment, jpeg.subarray(at)]);
}

/**
 * Who made this JPEG, as far as the bytes tell:
 * - `ours`: our signature and exactly our encoders' luminance table (any of the forms they
 *   choose from, see QuantTable) at a quality of its search range. A file edited elsewhere may keep the
 *   comment but not the table, and is not ours any more.
 * - `same-tables`: mozjpeg's table at a quality below the top of the search range, unsigned:
 *   an output of a compressd version that did not sign yet (those only wrote mozjpeg's tables),
 *   ours with its metadata stripped, or another mozjpeg optimiser's at a quality it chose. The
 *   top quality is left out: that is where our search stops only on rare hard images, and where
 *   mozjpeg "maximum quality" exports sit. The standard tables never count unsigned: they are
 *   what nearly every other encoder writes.
 * - `other`: anything else, including every quality-96–100 export (near all-ones tables).
 */
export async function jpegOrigin(jpeg: Buffer): Promise<'ours' | 'same-tables' | 'other'> {
  const table = lumaQuantTable(jpeg);
  if (!table) return 'other';
  const quality = await ourQualityOf(table);
  if (hasSignature(jpeg) && (quality !== undefined || (await anyOfOurTables(table)))) return 'ours';
  return quality !== undefined && quality < MAX_QUALITY ? 'same-tables' : 'other';
}

/** Whether the table is one of our encoders' at a quality of the search range, in any of the forms they may choose. */
async function anyOfOurTables(table: number[]): Promise<boolean> {
  for (const form of OUR_FORMS) if ((await ourQualityOf(table, form)) !== undefined) return true;
  return false;
}

function hasSignature(jpeg: Buffer): boolean {
  for (const { marker, start, end } of headerSegments(jpeg)) {
    if (marker === 0xfe && jpeg.subarray(start, end).equals(SIGNATURE)) return true;
  }
  return false;
}

/** Offset just past SOI and the APPn segments that follow it. */
function afterAppSegments(jpeg: Buffer): number {
  let at = 2;
  for (const { marker, end } of headerSegments(jpeg)) {
    if (marker < 0xe0 || marker > 0xef) break;
    at = end;
  }
  return at;
}
