import { promisify } from 'node:util';
import { constants, deflate } from 'node:zlib';
import { filterRows } from '../image/pixels/kernels.ts';

const deflateAsync = promisify(deflate);

/** Output per hop to libuv's thread and back: zlib's 16 KB default makes a megabyte sixty-four hops. */
const DEFLATE_CHUNK = 256 * 1024;

/**
 * zlib at its strongest: PDF readers inflate any level at the same speed. It runs on libuv's
 * threads, so the job's thread meanwhile scores the other picture in flight (a multi-page scan
 * spent 0.6 s of its 3.8 s deflating on the job's thread, the other core idle).
 */
export function deflateMax(data: Uint8Array): Promise<Buffer> {
  return deflateAsync(data, { level: constants.Z_BEST_COMPRESSION, memLevel: 9, strategy: constants.Z_DEFAULT_STRATEGY, chunkSize: DEFLATE_CHUNK });
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
export async function encodeFlateImage(samples: Uint8Array, { width, colors, bitsPerComponent, palette }: SampleLayout): Promise<FlateImage> {
  if (palette || bitsPerComponent !== 8) return { data: await deflateMax(samples) };
  const rowBytes = width * colors;
  const rows = Math.floor(samples.length / rowBytes);
  return { data: await deflateMax(filterRows(samples, { rows, rowBytes, colors })), predictor: { Predictor: 15, Colors: colors, BitsPerComponent: 8, Columns: width } };
}
