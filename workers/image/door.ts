import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import type { Sharp, SharpOptions } from 'sharp';
import { JobError } from '../contract.ts';
import { workerLog } from '../shared/log.ts';
import { peakBytes, reserveMemory } from '../shared/memory.ts';
import { luma, ssimOfLuma, type Pixels } from './ssim.ts';

// libvips's operation cache is process-wide and outlives the worker threads: it kept the pictures of
// past jobs (users' data) and their decoded pixels, 233 MB above a fresh start after 60 JPEG searches,
// 22 MB without it, at the same speed (a search decodes its input once; its encodes are new images).
sharp.cache(false);

/**
 * The one door every picture comes in by: the JPG, PNG and GIF compressors, the universal
 * compressor's decoders, and the pictures inside PDF and Office documents all take their decode
 * options, pixel budget, error codes, grey detection and embedded-profile decision from here, so
 * the same bytes get the same decision and the same failure code whichever way they arrive.
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

/**
 * Grey within the decoder's rounding: colour conversions through an ICC profile move a grey
 * pixel's channels apart by one code value at most.
 */
const GREY_TOLERANCE = 1;

/** Whether every pixel of 3- or 4-channel pixels has R, G and B within `tolerance` of each other. */
export function isGrey(p: Pixels, tolerance = GREY_TOLERANCE): boolean {
  const { data, channels: c } = p;
  if (c < 3) return c >= 1;
  for (let o = 0; o + 2 < data.length; o += c) {
    const r = data[o];
    const g = data[o + 1];
    const b = data[o + 2];
    if (Math.abs(r - g) > tolerance || Math.abs(g - b) > tolerance || Math.abs(r - b) > tolerance) return false;
  }
  return true;
}

/**
 * One channel (BT.601 luma, rounded; alpha dropped) of grey RGB pixels: what a grey picture is
 * encoded from, so that a JPEG of it has one component (a third of the scans, no chroma tables).
 */
export function toGrey(p: Pixels): Pixels {
  if (p.channels === 1) return p;
  const n = p.width * p.height;
  const c = p.channels;
  const out = Buffer.allocUnsafe(n);
  for (let i = 0, o = 0; i < n; i++, o += c) out[i] = Math.round(0.299 * p.data[o] + 0.587 * p.data[o + 1] + 0.114 * p.data[o + 2]);
  return { data: out, width: p.width, height: p.height, channels: 1 };
}

/**
 * An embedded profile is kept when it is small (Display P3, Adobe RGB and most camera profiles
 * are a few hundred bytes to a few KB) or when it costs no more than the rest of the file.
 */
export const SMALL_PROFILE_BYTES = 16 * 1024;
/**
 * Converting into sRGB loses only what lies outside sRGB's gamut; the conversion is taken when
 * going back into the profile reproduces the profile's own pixels to this luma SSIM (the JPEG
 * target: the clipping costs no more than the encode is allowed to).
 */
const CONVERT_MIN_SSIM = 0.98;

export type ProfileDecision = { keep: true; reason: string } | { keep: false; reason: string; ssim: number };

/**
 * What to do with the input's embedded ICC profile. A profile is converted into (the pixels made
 * sRGB, the profile dropped) only when it costs more than the picture (`fileBytes` is the whole
 * input) and is large, and when the conversion holds CONVERT_MIN_SSIM; the decision and its
 * reason are logged.
 */
export async function profileDecision(img: Sharp, icc: Buffer | undefined, fileBytes: number): Promise<ProfileDecision> {
  if (!icc) return { keep: true, reason: 'no embedded profile' };
  const decide = (d: ProfileDecision): ProfileDecision => {
    workerLog.info({ event: 'image.icc_profile', profileBytes: icc.length, fileBytes, ...d }, d.keep ? 'embedded ICC profile kept' : 'embedded ICC profile converted into sRGB');
    return d;
  };
  if (icc.length <= SMALL_PROFILE_BYTES || icc.length <= fileBytes - icc.length) return { keep: true, reason: 'the profile costs less than the picture' };
  const ssim = await roundTripSsim(img, icc);
  return ssim >= CONVERT_MIN_SSIM
    ? decide({ keep: false, reason: `the ${icc.length}-byte profile costs more than the picture and sRGB holds its colours (SSIM ${ssim.toFixed(4)})`, ssim })
    : decide({ keep: true, reason: `the profile's gamut does not survive sRGB (SSIM ${ssim.toFixed(4)})` });
}

/** Luma SSIM of the profile's own pixels against the same pixels taken into sRGB and back. */
async function roundTripSsim(img: Sharp, icc: Buffer): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'icc-'));
  try {
    const path = join(dir, 'profile.icc');
    await writeFile(path, icc);
    const own = await img.clone().removeAlpha().keepIccProfile().raw().toBuffer({ resolveWithObject: true });
    const srgb = await img.clone().removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
    const raw = { width: srgb.info.width, height: srgb.info.height, channels: srgb.info.channels };
    const back = await sharp(srgb.data, { raw }).withIccProfile(path).raw().toBuffer({ resolveWithObject: true });
    const { width, height } = own.info;
    if (back.info.width !== width || back.info.height !== height) return 0;
    return ssimOfLuma(luma({ data: own.data, width, height, channels: own.info.channels }), luma({ data: back.data, width, height, channels: back.info.channels }), width, height);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
