import sharp from 'sharp';
import type { SharpOptions } from 'sharp';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { JobError } from '../contract.ts';
import { peakBytes, reserveMemory } from '../shared/memory.ts';
import { endsComplete, kindOf } from './signatures.ts';

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

/** How far from its end a file's closing marker may sit (trailing padding some writers add). */
const TAIL_BYTES = 64 * 1024;

/**
 * Whether a JPEG, PNG or GIF lacks its closing marker (EOI, IEND, the trailer) near its end: read
 * from the file when libvips's message is lost. libvips keeps one error buffer per process, and a
 * thread that clears it after its own failure can take another's message with it ("Unknown error"
 * for 1 in 10 of two concurrent failures, measured), so a cut file would fail as `decode_failed`.
 */
function lacksClosingMarker(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const size = fstatSync(fd).size;
    const head = Buffer.alloc(8);
    readSync(fd, head, 0, 8, 0);
    const kind = kindOf(head);
    if (!kind) return false;
    const tail = Buffer.alloc(Math.min(size, TAIL_BYTES));
    readSync(fd, tail, 0, tail.length, size - tail.length);
    let length = tail.length;
    while (length > 0 && tail[length - 1] === 0) length--;
    return !endsComplete(kind, tail.subarray(0, length));
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The one mapper from a codec error to the failure users see; JobErrors pass through. With the
 * input's path, a failure whose reason libvips lost is told apart by the file's structure.
 */
export function imageError(err: unknown, inputPath?: string): JobError {
  if (err instanceof JobError) return err;
  const message = err instanceof Error ? err.message.split('\n')[0]! : String(err);
  const lost = /^(unknown error)?$/i.test(message.trim());
  if (/truncat|premature end|unexpected end|end of (file|data)|not enough data|short read/i.test(message) || (lost && inputPath !== undefined && lacksClosingMarker(inputPath))) {
    return new JobError('image.truncated', `The image data is cut short: ${message}`);
  }
  if (/unsupported image format/i.test(message)) return new JobError('image.unsupported_variant', `This variant of the format cannot be decoded: ${message}`);
  return new JobError('image.decode_failed', `The image could not be decoded: ${message}`);
}
