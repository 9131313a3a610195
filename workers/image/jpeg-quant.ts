import { DEFAULT_FORM, encodeJpeg, type JpegForm } from './encode.ts';
import { JpegliFailed } from './jpegli.ts';
import { MAX_QUALITY, MIN_QUALITY } from './quality-bracket.ts';

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
  for (const { marker, start, end } of headerSegments(jpeg)) {
    if (marker !== 0xdb) continue;
    for (let q = start; q < end; ) {
      const precision = jpeg[q] >> 4;
      const id = jpeg[q] & 15;
      if (id === 0) {
        return Array.from({ length: 64 }, (_, k) => (precision ? (jpeg[q + 1 + 2 * k] << 8) | jpeg[q + 2 + 2 * k] : jpeg[q + 1 + k]));
      }
      q += 1 + (precision ? 128 : 64);
    }
  }
  return undefined;
}

/** Components of the frame (SOF0–SOF15 but DHT, JPG and DAC), from the header alone; undefined without a frame header. */
export function frameComponents(jpeg: Uint8Array): number | undefined {
  for (const { marker, start, end } of headerSegments(jpeg)) {
    const frame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (frame && start + 5 < end) return jpeg[start + 5];
  }
  return undefined;
}

/** The marker segments before the first scan: marker byte and payload bounds. */
export function* headerSegments(jpeg: Uint8Array): Generator<{ marker: number; start: number; end: number }> {
  let p = 2;
  while (p + 4 <= jpeg.length && jpeg[p] === 0xff) {
    const marker = jpeg[p + 1];
    if (marker === 0xda || marker === 0xd9) return;
    const end = p + 2 + ((jpeg[p + 2] << 8) | jpeg[p + 3]);
    yield { marker, start: p + 4, end };
    p = end;
  }
}

const ours = new Map<string, Promise<number[]>>();

/**
 * The luminance table our own encoder uses at `quality` with `form` (found by encoding a tiny image
 * once). mozjpeg's depends on the table set alone, jpegli's on the chroma subsampling too; none
 * (empty) where jpegli does not load.
 */
function ourTable(quality: number, form: JpegForm): Promise<number[]> {
  const chroma = form.table === 'jpegli' ? form.chroma : '4:4:4';
  const key = `${form.table}:${chroma}:${quality}`;
  let table = ours.get(key);
  if (table === undefined) {
    const grey = { data: new Uint8Array(16 * 16 * 3).fill(128), width: 16, height: 16, channels: 3 };
    table = encodeJpeg(grey, { quality, table: form.table, chroma }).then(
      (probe) => lumaQuantTable(probe) ?? [],
      (err: unknown) => {
        if (err instanceof JpegliFailed) return [];
        throw err;
      },
    );
    ours.set(key, table);
  }
  return table;
}

export async function ourLumaQuantSum(quality: number, form: JpegForm = DEFAULT_FORM): Promise<number> {
  return (await ourTable(quality, form)).reduce((a, b) => a + b, 0);
}

/**
 * The quality in our search range (MIN_QUALITY–MAX_QUALITY) at which our encoder produces exactly
 * this luminance table with `tables`, if any. Qualities above the range are never matched: there every encoder's
 * table converges to all ones, so equality says nothing about who wrote the file, and our encoder
 * never writes them. Binary search on the table sum, which falls as quality rises.
 */
export async function ourQualityOf(table: number[], form: JpegForm = DEFAULT_FORM): Promise<number | undefined> {
  const sum = table.reduce((a, b) => a + b, 0);
  let lo = MIN_QUALITY;
  let hi = MAX_QUALITY;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((await ourLumaQuantSum(mid, form)) > sum) lo = mid + 1;
    else hi = mid;
  }
  const candidate = await ourTable(lo, form);
  return candidate.length === 64 && candidate.every((v, i) => v === table[i]) ? lo : undefined;
}

/**
 * A JPEG is re-encoded only when the chosen quality quantises luma at least this much more
 * coarsely than the input already is (sums of the luminance tables). Closer than that, the input
 * is already about as compressed as our target allows (our own output resubmitted lands here),
 * and a second encode would compound the loss for a few per cent.
 */
const MIN_COARSER = 1.25;

/** Whether a JPEG is already about as coarse as our encoder at `quality` with `form` (see MIN_COARSER). */
export async function alreadyAsCoarse(jpeg: Uint8Array, quality: number, form: JpegForm = DEFAULT_FORM): Promise<boolean> {
  const input = lumaQuantSum(jpeg);
  return input !== undefined && (await ourLumaQuantSum(quality, form)) < input * MIN_COARSER;
}
