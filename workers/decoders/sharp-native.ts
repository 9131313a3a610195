import sharp from 'sharp';
import type { Metadata } from 'sharp';
import { JobError } from '../contract.ts';
import { withColrRange } from './av1-colour.ts';
import { admitPixels, decodeOptions, imageError } from '../image/door.ts';
import type { Decoded, DecodeLimits } from './types.ts';

/**
 * JPEG, PNG, WebP, AVIF, TIFF and GIF: formats sharp's prebuilt libvips decodes correctly.
 * Only the first frame or page is decoded (animated WebP/GIF/AVIF, multi-page TIFF); the pixel
 * budget is checked on that page from the header. Decoded with the image door's strictness
 * (image/door.ts): corrupt or truncated pixel data fails the job instead of producing a half-grey picture.
 */
export async function decodeWithSharp(bytes: Buffer, limits: DecodeLimits): Promise<Decoded> {
  let meta: Metadata;
  try {
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch (err) {
    throw imageError(err);
  }
  const width = meta.width ?? 0;
  const height = meta.pageHeight ?? meta.height ?? 0;
  await admitPixels(width, height, limits.maxPixels);
  const image = sharp(bytes, decodeOptions({ limitInputPixels: limits.maxPixels, page: 0, pages: 1 }));
  return { image, width, height, orientation: meta.orientation ?? 1, exif: meta.exif, via: `sharp:${meta.format}` };
}

/**
 * AVIF, including image sequences (animated AVIF): libvips recognises a HEIF file by its major
 * brand and does not know the sequence brand `avis`, although such files also carry a still
 * primary image (the first frame, as libavif writes them). A sequence with a primary item is
 * therefore read through a copy whose major brand says `avif`; one without fails as an
 * unsupported variant. The colour range is the file's `colr` property's (see av1-colour.ts).
 */
export function decodeAvif(input: Buffer, limits: DecodeLimits): Promise<Decoded> {
  const bytes = withColrRange(input);
  const sequence = bytes.length > 16 && bytes.toString('latin1', 8, 12) === 'avis';
  if (!sequence) return decodeWithSharp(bytes, limits);
  const meta = bytes.indexOf('meta', 0, 'latin1');
  if (meta < 0 || meta > 4096 || bytes.indexOf('pitm', meta, 'latin1') < 0) {
    throw new JobError('image.unsupported_variant', 'This animated AVIF has no still primary image to read the first frame from.');
  }
  const still = bytes === input ? Buffer.from(bytes) : bytes;
  still.write('avif', 8, 'latin1');
  return decodeWithSharp(still, limits);
}
