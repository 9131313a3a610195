import sharp from 'sharp';
import { jpegOptions } from './encode.ts';

/**
 * Sum of the luminance quantisation table (id 0) of a JPEG: a measure of how coarsely it was
 * quantised, comparable across encoders. Undefined when the file has no such table.
 */
export function lumaQuantSum(jpeg: Uint8Array): number | undefined {
  const table = lumaQuantTable(jpeg);
  return table && table.reduce((a, b) => a + b, 0);
}

/** The 64 values of the luminance quantisation table (id 0), in file order. */
export function lumaQuantTable(jpeg: Uint8Array): number[] | undefined {
  let p = 2;
  while (p + 4 <= jpeg.length && jpeg[p] === 0xff) {
    const marker = jpeg[p + 1];
    const len = (jpeg[p + 2] << 8) | jpeg[p + 3];
    if (marker === 0xda || marker === 0xd9) return undefined;
    if (marker === 0xdb) {
      for (let q = p + 4; q < p + 2 + len; ) {
        const precision = jpeg[q] >> 4;
        const id = jpeg[q] & 15;
        const size = precision ? 128 : 64;
        if (id === 0) {
          return Array.from({ length: 64 }, (_, k) => (precision ? (jpeg[q + 1 + 2 * k] << 8) | jpeg[q + 2 + 2 * k] : jpeg[q + 1 + k]));
        }
        q += 1 + size;
      }
    }
    p += 2 + len;
  }
  return undefined;
}

const ours = new Map<number, number[]>();

/** The luminance table our own encoder uses at `quality` (found by encoding a tiny image once). */
async function ourTable(quality: number): Promise<number[]> {
  let table = ours.get(quality);
  if (table === undefined) {
    const probe = await sharp({ create: { width: 16, height: 16, channels: 3, background: '#808080' } }).jpeg(jpegOptions(quality)).toBuffer();
    table = lumaQuantTable(probe) ?? [];
    ours.set(quality, table);
  }
  return table;
}

export async function ourLumaQuantSum(quality: number): Promise<number> {
  return (await ourTable(quality)).reduce((a, b) => a + b, 0);
}

/**
 * The quality at which our encoder produces exactly this luminance table, if any: the input was
 * made by this encoder (our own output, or another mozjpeg-based optimiser) whose quality was
 * already chosen. Binary search on the table sum, which falls as quality rises.
 */
export async function ourQualityOf(table: number[]): Promise<number | undefined> {
  const sum = table.reduce((a, b) => a + b, 0);
  let lo = 1;
  let hi = 100;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((await ourLumaQuantSum(mid)) > sum) lo = mid + 1;
    else hi = mid;
  }
  const candidate = await ourTable(lo);
  return candidate.length === 64 && candidate.every((v, i) => v === table[i]) ? lo : undefined;
}
