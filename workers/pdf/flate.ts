import { constants, deflateSync } from 'node:zlib';
import { filterRows } from '../image/pixels/kernels.ts';

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
  return { data: deflateMax(filterRows(samples, { rows, rowBytes, colors })), predictor: { Predictor: 15, Colors: colors, BitsPerComponent: 8, Columns: width } };
}
