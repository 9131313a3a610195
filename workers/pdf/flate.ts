import { constants, deflateSync } from 'node:zlib';
import { paeth } from './decode.ts';

/** zlib at its strongest: PDF readers inflate any level at the same speed. */
export function deflateMax(data: Uint8Array): Buffer {
  return deflateSync(data, { level: constants.Z_BEST_COMPRESSION, memLevel: 9, strategy: constants.Z_DEFAULT_STRATEGY });
}

export interface FlateImage {
  data: Buffer;
  /** DecodeParms for the stream, or undefined when the rows are stored unpredicted. */
  predictor?: { Predictor: number; Colors: number; BitsPerComponent: number; Columns: number };
}

/** How image samples are laid out: pixels per row, components per pixel, bits per component, and whether they are palette indices. */
export interface SampleLayout {
  width: number;
  colors: number;
  bitsPerComponent: number;
  palette: boolean;
}

/**
 * Deflates image samples. 8-bit continuous-tone rows get per-row adaptive PNG filters (the
 * libpng minimum-sum-of-absolute-differences choice, signalled as Predictor 15); palette
 * indices and sub-byte samples are stored unfiltered, where filters only add noise.
 */
export function encodeFlateImage(samples: Uint8Array, { width, colors, bitsPerComponent, palette }: SampleLayout): FlateImage {
  if (palette || bitsPerComponent !== 8) return { data: deflateMax(samples) };
  const rowBytes = width * colors;
  const rows = Math.floor(samples.length / rowBytes);
  const out = new Uint8Array(rows * (rowBytes + 1));
  // The row above the first is zeros, as the PNG filters define it.
  const zeros = new Uint8Array(rowBytes);
  let trial = new Uint8Array(rowBytes);
  let best = new Uint8Array(rowBytes);
  for (let r = 0; r < rows; r++) {
    const row = samples.subarray(r * rowBytes, (r + 1) * rowBytes);
    const above = r > 0 ? samples.subarray((r - 1) * rowBytes, r * rowBytes) : zeros;
    let bestType = 0;
    let bestScore = Infinity;
    for (let type = 0; type < ROW_FILTERS.length; type++) {
      // A filter stops counting once it cannot win: ties go to the lower type.
      const score = ROW_FILTERS[type]({ row, above, colors, into: trial }, bestScore);
      if (score < bestScore) {
        bestScore = score;
        bestType = type;
        const kept = best;
        best = trial;
        trial = kept;
      }
    }
    out[r * (rowBytes + 1)] = bestType;
    out.set(best, r * (rowBytes + 1) + 1);
  }
  return { data: deflateMax(out), predictor: { Predictor: 15, Colors: colors, BitsPerComponent: 8, Columns: width } };
}

/** A row to filter (pixels of `colors` bytes), the row above it, and where the residuals go. */
interface FilterRows {
  row: Uint8Array;
  above: Uint8Array;
  colors: number;
  into: Uint8Array;
}

/**
 * A PNG filter type applied to a row, returning the sum of absolute residuals, or any sum at
 * least `limit` once it reaches it (the row then is partly filtered).
 */
type RowFilter = (rows: FilterRows, limit: number) => number;

/** A residual's distance from zero, as a signed byte. */
function cost(v: number): number {
  return v < 128 ? v : 256 - v;
}

/**
 * The PNG filter types in type order (0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth), one loop each;
 * the first pixel, which has no left neighbour (zeros), gets its own loop.
 */
const ROW_FILTERS: RowFilter[] = [
  ({ row, into }, limit) => {
    let score = 0;
    for (let i = 0; i < row.length && score < limit; i++) score += cost((into[i] = row[i]));
    return score;
  },
  ({ row, colors, into }, limit) => {
    let score = 0;
    const first = Math.min(colors, row.length);
    for (let i = 0; i < first; i++) score += cost((into[i] = row[i]));
    for (let i = first; i < row.length && score < limit; i++) score += cost((into[i] = (row[i] - row[i - colors]) & 0xff));
    return score;
  },
  ({ row, above, into }, limit) => {
    let score = 0;
    for (let i = 0; i < row.length && score < limit; i++) score += cost((into[i] = (row[i] - above[i]) & 0xff));
    return score;
  },
  ({ row, above, colors, into }, limit) => {
    let score = 0;
    const first = Math.min(colors, row.length);
    for (let i = 0; i < first; i++) score += cost((into[i] = (row[i] - (above[i] >> 1)) & 0xff));
    for (let i = first; i < row.length && score < limit; i++) score += cost((into[i] = (row[i] - ((row[i - colors] + above[i]) >> 1)) & 0xff));
    return score;
  },
  ({ row, above, colors, into }, limit) => {
    let score = 0;
    const first = Math.min(colors, row.length);
    // With no left neighbour Paeth predicts from above.
    for (let i = 0; i < first; i++) score += cost((into[i] = (row[i] - above[i]) & 0xff));
    for (let i = first; i < row.length && score < limit; i++) score += cost((into[i] = (row[i] - paeth(row[i - colors], above[i], above[i - colors])) & 0xff));
    return score;
  },
];
