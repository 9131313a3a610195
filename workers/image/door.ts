import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobError } from '../contract.ts';
import { decodeImage } from '../decoders/index.ts';
import { openWithLibvips } from '../decoders/sharp-native.ts';
import { workerLog } from '../shared/log.ts';
import { MAX_PIXELS } from './decode-policy.ts';
import { checkSignature, firstBytes, type HeaderFacts, type ImageKind, type ImageSource } from './probe.ts';
import { luma, ssimOfLuma, type Pixels } from './ssim.ts';
import { greyPixels } from './pixels/kernels.ts';
import { pixelPipeline, type Pipeline } from './vips.ts';

export { imageError, MAX_PIXELS } from './decode-policy.ts';
export { readHeader, type HeaderFacts, type ImageKind, type ImageSource } from './probe.ts';

/**
 * The one door every picture comes in by: the JPG, PNG and GIF compressors, the universal
 * compressor, the compare previews, and the pictures inside PDF and Office documents all open it
 * with openImage, which takes its decode options, pixel budget and error codes from
 * decode-policy.ts; grey detection and the embedded-profile decision are here. The same bytes get
 * the same decision and the same failure code whichever way they arrive.
 *
 * Failure codes (besides the policy's `image.too_many_pixels`, `image.truncated`,
 * `image.unsupported_variant`, `image.decode_failed`, and the decoders' own):
 * - `image.empty`: the file has no bytes.
 * - `image.format_mismatch`: the bytes are not the format the job is for (e.g. a PDF named .jpg),
 *   or no image format read here.
 */

/** How a caller opens a picture. */
export type OpenAs =
  /** A same-format compressor: the bytes must be `kind`; `animated`: every frame, all counted against the budget. */
  | { kind: ImageKind; animated?: boolean }
  /** The universal compressor and the previews: the format from the bytes (`declared`, the extension, breaks ties), its decoder (workers/decoders/), the first frame. */
  | { declared: string; signal: AbortSignal }
  /**
   * A picture inside a document: whatever libvips reads. `memory: 'reserved'` when the document
   * reserved memory for its pictures (office/plan.ts, pdf/images.ts); `asStored`: samples without
   * colour management (a PDF's ColorSpace rules).
   */
  | { embedded: true; memory: 'reserve' | 'reserved'; asStored?: boolean };

export interface ImageFacts extends HeaderFacts {
  /** Which decoding path yields the pixels, e.g. `sharp:jpeg` or `libraw` (reported, logged). */
  via: string;
  /** An embedded profile the pixels are not converted through (an sRGB one, or a PDF's rules): they are the stored samples. */
  asStored?: boolean;
}

/** A picture opened: the pipeline (no pixel decoded yet, in its source colour space) and its header facts. */
export interface OpenedImage {
  image: Pipeline;
  facts: ImageFacts;
}

/**
 * Opens a picture, a path or its bytes. First the probe: no bytes is `image.empty`; the format from
 * the first bytes (the job's own format, or the decoder family); the header's facts; the pixel
 * budget (and the memory for it) before any pixel is decoded. Then the pipeline, with the policy's
 * strictness.
 */
export async function openImage(source: ImageSource, as: OpenAs): Promise<OpenedImage> {
  const head = await firstBytes(source, 16);
  if (head.length === 0) throw new JobError('image.empty', 'The file is empty.');
  if ('declared' in as) {
    const bytes = typeof source === 'string' ? await readFile(source) : Buffer.isBuffer(source) ? source : Buffer.from(source.buffer, source.byteOffset, source.length);
    const { family, decoded: d } = await decodeImage(bytes, as.declared, { maxPixels: MAX_PIXELS, signal: as.signal });
    return { image: d.image, facts: { format: family, width: d.width, height: d.height, pages: 1, orientation: d.orientation, exif: d.exif, via: d.via } };
  }
  if ('kind' in as) checkSignature(head, as.kind);
  const read = 'kind' in as ? { animated: as.animated, memory: 'reserve' as const } : { memory: as.memory, ignoreIcc: as.asStored };
  const { image, facts, asStored } = await openWithLibvips(source, read);
  return { image, facts: { ...facts, via: `sharp:${facts.format}`, ...(asStored ? { asStored } : {}) } };
}

/**
 * Grey within the decoder's rounding: colour conversions through an ICC profile move a grey
 * pixel's channels apart by one code value at most.
 */
const GREY_TOLERANCE = 1;

/**
 * Grey pixels as one channel (BT.601 luma, rounded; alpha dropped): what a grey picture is encoded
 * from, so that a JPEG of it has one component (a third of the scans, no chroma tables). Grey means
 * every pixel's R, G and B within `tolerance` of each other; for colour pixels, undefined (found in
 * the same pass, which stops at the first colour pixel). One channel is grey as it is.
 */
export function greyOf(p: Pixels, tolerance = GREY_TOLERANCE): Pixels | undefined {
  const { data, width, height, channels: c } = p;
  if (c < 3) return c === 1 ? p : undefined;
  const grey = greyPixels(data, width * height, c, tolerance);
  return grey && { data: grey, width, height, channels: 1 };
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
export async function profileDecision(img: Pipeline, icc: Buffer | undefined, fileBytes: number): Promise<ProfileDecision> {
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
async function roundTripSsim(img: Pipeline, icc: Buffer): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'icc-'));
  try {
    const path = join(dir, 'profile.icc');
    await writeFile(path, icc);
    const own = await img.clone().removeAlpha().keepIccProfile().raw().toBuffer({ resolveWithObject: true });
    const srgb = await img.clone().removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
    const raw = { width: srgb.info.width, height: srgb.info.height, channels: srgb.info.channels };
    const back = await pixelPipeline({ data: srgb.data, ...raw }).withIccProfile(path).raw().toBuffer({ resolveWithObject: true });
    const { width, height } = own.info;
    if (back.info.width !== width || back.info.height !== height) return 0;
    return ssimOfLuma(luma({ data: own.data, width, height, channels: own.info.channels }), luma({ data: back.data, width, height, channels: back.info.channels }), width, height);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
