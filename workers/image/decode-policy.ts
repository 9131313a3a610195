import sharp from 'sharp';
import type { SharpOptions } from 'sharp';
import { JobError } from '../contract.ts';
import { peakBytes, reserveMemory } from '../shared/memory.ts';

// libvips's operation cache is process-wide and outlives the worker threads: it kept the pictures of
// past jobs (users' data) and their decoded pixels, 233 MB above a fresh start after 60 JPEG searches,
// 22 MB without it, at the same speed (a search decodes its input once; its encodes are new images).
sharp.cache(false);

/**
 * The decode policy every picture is read under, whichever way it arrives (image/door.ts is the
 * entry; the decoders of workers/decoders/ sit below it and read the same policy from here).
 *
 * Failure codes:
 * - `image.too_many_pixels`: the header declares more than MAX_PIXELS (all frames counted), checked
 *   before any pixel is decoded (decompression bombs).
 * - `image.truncated`: the pixel data is cut short.
 * - `image.unsupported_variant`: a variant of the format no decoder here reads.
 * - `image.decode_failed`: the header or the pixel data is corrupt in another way.
 */
export const MAX_PIXELS = 100_000_000;

/**
 * libvips's strictness: `error` refuses corrupt and truncated data (which would otherwise decode
 * as a half-grey picture) but not warnings. Warnings (extraneous bytes before a marker, a known
 * incorrect sRGB profile in a PNG, a spare byte after the end) are common in files from cameras
 * and old editors that every viewer shows correctly; refusing them turns a good picture into a
 * failed job. libvips's `truncated` level is below `error`, so cut files still fail.
 */
export const FAIL_ON = 'error' as const;

/** sharp input options of every decode: the strictness above, the pixel cap as a second guard. */
export function decodeOptions(extra: SharpOptions = {}): SharpOptions {
  return { failOn: FAIL_ON, limitInputPixels: MAX_PIXELS, ...extra };
}

/** Refuses a header that declares more pixels than the budget, before any pixel is decoded. */
export function checkPixelBudget(width: number, height: number, maxPixels = MAX_PIXELS, frames = 1): void {
  if (!(width >= 1 && height >= 1)) throw new JobError('image.decode_failed', 'The image header declares no dimensions.');
  if (width * height * frames > maxPixels) {
    throw new JobError(
      'image.too_many_pixels',
      `The image declares ${width}×${height}${frames > 1 ? `×${frames} frames` : ''} pixels, more than the limit of ${maxPixels / 1e6} megapixels.`,
    );
  }
}

/**
 * The pixel budget, then the node's memory budget for decoding this many pixels (all frames): waits
 * until running jobs leave room, or fails with `jobs.memory_budget` when it could never fit.
 */
export async function admitPixels(width: number, height: number, maxPixels = MAX_PIXELS, frames = 1): Promise<void> {
  checkPixelBudget(width, height, maxPixels, frames);
  await reserveMemory(peakBytes(width * height * frames), `A ${width}×${height}${frames > 1 ? `×${frames}-frame` : ''} picture`);
}

/** The one mapper from a codec error to the failure users see; JobErrors pass through. */
export function imageError(err: unknown): JobError {
  if (err instanceof JobError) return err;
  const message = err instanceof Error ? err.message.split('\n')[0] : String(err);
  if (/truncat|premature end|unexpected end|end of (file|data)|not enough data|short read/i.test(message)) {
    return new JobError('image.truncated', `The image data is cut short: ${message}`);
  }
  if (/unsupported image format/i.test(message)) return new JobError('image.unsupported_variant', `This variant of the format cannot be decoded: ${message}`);
  return new JobError('image.decode_failed', `The image could not be decoded: ${message}`);
}
