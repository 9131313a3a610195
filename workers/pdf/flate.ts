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
  const trial = new Uint8Array(rowBytes);
  const best = new Uint8Array(rowBytes);
  for (let r = 0; r < rows; r++) {
    const cur = r * rowBytes;
    const up = cur - rowBytes;
    let bestType = 0;
    let bestScore = Infinity;
    for (let type = 0; type <= 4; type++) {
      let score = 0;
      for (let i = 0; i < rowBytes; i++) {
        const x = samples[cur + i];
        const a = i >= colors ? samples[cur + i - colors] : 0;
        const b = r > 0 ? samples[up + i] : 0;
        const c = r > 0 && i >= colors ? samples[up + i - colors] : 0;
        const pred = type === 0 ? 0 : type === 1 ? a : type === 2 ? b : type === 3 ? (a + b) >> 1 : paeth(a, b, c);
        const v = (x - pred) & 0xff;
        trial[i] = v;
        score += v < 128 ? v : 256 - v;
        if (score >= bestScore) break;
      }
      if (score < bestScore) {
        bestScore = score;
        bestType = type;
        best.set(trial);
      }
    }
    out[r * (rowBytes + 1)] = bestType;
    out.set(best, r * (rowBytes + 1) + 1);
  }
  return { data: deflateMax(out), predictor: { Predictor: 15, Colors: colors, BitsPerComponent: 8, Columns: width } };
}
