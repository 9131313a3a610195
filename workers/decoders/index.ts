import { JobError } from '../contract.ts';
import { decodeBmp } from './bmp.ts';
import { detectFamily, type Family } from './detect.ts';
import { decodeHeic } from './heic.ts';
import { decodePsd } from './psd.ts';
import { decodeRaw } from './raw.ts';
import { decodeAvif, decodeWithSharp } from './sharp-native.ts';
import type { Decoded, Decoder, DecodeLimits } from './types.ts';

export type { Family } from './detect.ts';
export type { Decoded, DecodeLimits } from './types.ts';

/** One decoder per family: every feature that reads an input image (compression, compare previews) goes through this table. */
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
 * An empty file fails with `image.empty`.
 */
export async function decodeImage(bytes: Buffer, declaredFormat: string, limits: DecodeLimits): Promise<{ family: Family; decoded: Decoded }> {
  if (bytes.length === 0) throw new JobError('image.empty', 'The file is empty.');
  const family = detectFamily(bytes, declaredFormat);
  return { family, decoded: await DECODERS[family](bytes, limits) };
}
