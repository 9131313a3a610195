import { decodeAvif } from './avif.ts';
import { decodeBmp } from './bmp.ts';
import { detectFamily, type Family } from './detect.ts';
import { decodeHeic } from './heic.ts';
import { decodePsd } from './psd.ts';
import { decodeRaw } from './raw.ts';
import { decodeWithSharp } from './sharp-native.ts';
import type { Decoded, Decoder, DecodeLimits } from './types.ts';

export type { Family } from './detect.ts';
export type { Decoded, DecodeLimits } from './types.ts';

/** One decoder per family: openImage (image/door.ts) reads every picture whose format is found from its bytes (the universal compressor, compare previews) through this table. */
const DECODERS: Record<Family, Decoder> = {
  jpeg: decodeWithSharp,
  png: decodeWithSharp,
  gif: decodeWithSharp,
  webp: decodeWithSharp,
  avif: decodeAvif,
  tiff: decodeWithSharp,
  heic: decodeHeic,
  bmp: decodeBmp,
  psd: decodePsd,
  raw: decodeRaw,
};

/**
 * Decodes an image file's bytes: the format from its magic bytes (the declared extension breaks
 * the ties, see detect.ts), the pixel budget checked from the header before any pixel is decoded.
 * Pictures come in by openImage (image/door.ts), which refuses an empty file first.
 */
export async function decodeImage(bytes: Buffer, declaredFormat: string, limits: DecodeLimits): Promise<{ family: Family; decoded: Decoded }> {
  const family = detectFamily(bytes, declaredFormat);
  return { family, decoded: await DECODERS[family](bytes, limits) };
}
