import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { type Compress, JobError } from './contract.ts';
import { decodeBmp } from './decoders/bmp.ts';
import { detectFamily, type Family } from './decoders/detect.ts';
import { insertExif } from './decoders/exif.ts';
import { decodeHeic } from './decoders/heic.ts';
import { MAX_PIXELS } from './decoders/limits.ts';
import { decodePsd } from './decoders/psd.ts';
import { decodeRaw } from './decoders/raw.ts';
import { decodeAvif, decodeWithSharp, sharpError } from './decoders/sharp-native.ts';
import type { Decoded, Decoder } from './decoders/types.ts';
import { encodeJpegAuto, encodePng } from './image/encode.ts';
import { applyResize, targetSize } from './image/resize.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';

/**
 * `image.universal-compress`: detect (magic bytes) → decode → upright 8-bit sRGB → alpha by
 * content → output format by the spec's table → the JPG/PNG encoders of the image compressors.
 *
 * Failure codes (besides the decoders' own, see workers/decoders/):
 * - `image.empty`: the file has no bytes.
 * - `image.format_mismatch`: the bytes are no image format this compressor reads.
 * - `image.too_many_pixels`: the header declares more than 100 MP (checked before decoding).
 * - `image.truncated`: the pixel data is cut short.
 * - `image.decode_failed`: the file is corrupt in another way.
 * - `image.unsupported_variant`: a variant of a listed format no decoder here reads.
 * - `raw.no_image_data`, `raw.unsupported`: see workers/decoders/raw.ts.
 */

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

export const compress: Compress = async (job, out, ctx) => {
  ctx.progress(1, 'decoding');
  const bytes = await readFile(job.inputPath);
  if (bytes.length === 0) throw new JobError('image.empty', 'The file is empty.');
  const family = detectFamily(bytes, job.format);
  const decoded = await DECODERS[family](bytes, { maxPixels: MAX_PIXELS, signal: ctx.signal });
  ctx.signal.throwIfAborted();
  ctx.progress(30, 'analyzing');

  const upright = await normalise(decoded);
  const opaque = upright.channels === 4 && fullyOpaque(upright.data);
  const pixels = opaque ? dropAlpha(upright.data, upright.width, upright.height) : upright.data;
  const channels = opaque ? 3 : upright.channels;
  const format = outputFormat(family, channels === 4);
  ctx.progress(45, 'encoding');

  const resize = job.options.resize;
  const resized = targetSize(upright.width, upright.height, resize) !== null;
  const img = applyResize(sharp(pixels, { raw: { width: upright.width, height: upright.height, channels } }), upright.width, upright.height, resize);
  const path = join(out.dir, `output.${format}`);
  let width: number;
  let height: number;
  if (format === 'jpg') {
    const enc = await encodeJpegAuto(img, { progress: (p) => ctx.progress(45 + p * 0.45, 'encoding') });
    await writeFile(path, insertExif(enc.data, decoded.exif));
    ({ width, height } = enc);
  } else {
    const enc = await encodePng(img, 'lossy');
    await writeFile(path, enc.data);
    ({ width, height } = enc);
  }
  ctx.progress(95, 'finalizing');
  // Never larger: only where the input is itself a valid output (same format, same size).
  const sameFormat = (family === 'jpeg' && format === 'jpg') || (family === 'png' && format === 'png');
  if (sameFormat && !resized) await keepInputUnlessSmaller(job.inputPath, path);
  ctx.progress(100, 'finalizing');
  return { path, format, contentType: format === 'jpg' ? 'image/jpeg' : 'image/png', width, height };
};

/** The spec's table: JPG and RAW inputs give JPG; every other format PNG when it has alpha, else JPG. */
export function outputFormat(family: Family, hasAlpha: boolean): 'jpg' | 'png' {
  if (family === 'jpeg' || family === 'raw') return 'jpg';
  return hasAlpha ? 'png' : 'jpg';
}

interface Upright {
  data: Buffer;
  width: number;
  height: number;
  channels: 3 | 4;
}

/**
 * Turns the decoded picture upright (EXIF orientation) and into 8-bit sRGB: libvips converts from
 * the embedded ICC profile (CMYK, wide gamut, 16-bit and HDR/PQ-tagged inputs alike, with a
 * standard CMYK profile for untagged CMYK), greyscale becomes RGB, alpha is kept.
 */
async function normalise(decoded: Decoded): Promise<Upright> {
  try {
    const img = decoded.image.rotate().toColourspace('srgb');
    const meta = await decoded.image.metadata();
    const withAlpha = meta.hasAlpha ? img.ensureAlpha() : img.removeAlpha();
    const { data, info } = await withAlpha.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height, channels: info.channels === 4 ? 4 : 3 };
  } catch (err) {
    throw sharpError(err);
  }
}

/**
 * "Has alpha" is decided by content: a format may declare an alpha channel (32-bit BMP, RGBA PNG,
 * PSD, lossless WebP) whose every pixel is fully opaque; such an image has no transparency to
 * keep and goes out as JPG.
 */
export function fullyOpaque(rgba: Uint8Array): boolean {
  for (let i = 3; i < rgba.length; i += 4) if (rgba[i] !== 255) return false;
  return true;
}

function dropAlpha(rgba: Buffer, width: number, height: number): Buffer {
  const n = width * height;
  const rgb = Buffer.allocUnsafe(n * 3);
  for (let i = 0, o = 0; i < n * 4; i += 4, o += 3) {
    rgb[o] = rgba[i];
    rgb[o + 1] = rgba[i + 1];
    rgb[o + 2] = rgba[i + 2];
  }
  return rgb;
}
