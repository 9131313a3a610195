import type { Sharp } from 'sharp';

/**
 * What a decoder hands the universal pipeline: a sharp pipeline over the picture (still in its
 * source colour space, with its ICC profile attached when it has one) and the facts the output
 * step needs. Decoders check the pixel budget from the header before decoding any pixel.
 */
export interface Decoded {
  image: Sharp;
  /** Stored dimensions of the pixels the pipeline yields (before EXIF orientation). */
  width: number;
  height: number;
  /** EXIF orientation the pipeline must still apply (1 when the pixels are upright). */
  orientation: number;
  /** EXIF block (TIFF structure, with or without the `Exif\0\0` marker) to carry into a JPG. */
  exif?: Buffer;
  /** Which decoding path produced the pixels, e.g. `libraw` or `raw-preview` (reported, logged). */
  via: string;
}

export interface DecodeLimits {
  maxPixels: number;
  signal: AbortSignal;
}

export type Decoder = (bytes: Buffer, limits: DecodeLimits) => Promise<Decoded>;
