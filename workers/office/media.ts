import sharp, { type Sharp } from 'sharp';
import type { ResizeOptions } from '../../src/catalog/index.ts';
import { encodeJpegAuto, encodePng } from '../image/encode.ts';
import { targetSize } from '../image/resize.ts';
import { ssim } from '../image/ssim.ts';
import type { Need } from './display-size.ts';

/** Right-sizing starts only when a picture has this much more resolution than it needs. */
const RIGHT_SIZE_SLACK = 1.25;
/** A palette (lossy) PNG is kept only if it is this much smaller than the lossless one… */
const PNG_LOSSY_MIN_GAIN = 0.15;
/** …and looks the same: luma SSIM at least this, and colours off by at most this on average (0-255). */
const PNG_LOSSY_MIN_SSIM = 0.995;
const PNG_LOSSY_MAX_MEAN_ERROR = 1.5;

export type ImageFormat = 'jpeg' | 'png' | 'tiff';

/** The format of an image part, from its bytes (a part's name or content type can lie). */
export function sniffImage(data: Buffer): ImageFormat | null {
  if (data.length >= 3 && data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) return 'jpeg';
  if (data.length >= 8 && data.readUInt32BE(0) === 0x89504e47 && data.readUInt32BE(4) === 0x0d0a1a0a) return 'png';
  if (data.length >= 4 && (data.readUInt32BE(0) === 0x49492a00 || data.readUInt32BE(0) === 0x4d4d002a)) return 'tiff';
  return null;
}

export interface Recompressed {
  data: Buffer;
  width: number;
  height: number;
}

/**
 * A smaller encoding of an image part in its own format, or null to keep the part as it is.
 * JPEG: automatic quality (SSIM target of the image helpers). PNG: lossless, or a palette
 * only where it is visually clean (see the constants above). TIFF: lossless deflate. The size
 * is the smaller of what the resize option asks and TARGET_PPI of the displayed size, never larger
 * than the original. Animated PNG and multi-page TIFF are kept, since one frame would be lost.
 */
export async function recompressImage(data: Buffer, need: Need | null, resize?: ResizeOptions): Promise<Recompressed | null> {
  const format = sniffImage(data);
  if (!format || (format === 'png' && isAnimatedPng(data))) return null;
  try {
    const meta = await sharp(data).metadata();
    if (!meta.width || !meta.height || (meta.pages ?? 1) > 1) return null;
    const rotated = (meta.orientation ?? 1) >= 5;
    const size = scaledSize(meta.width, meta.height, need && (rotated ? { width: need.height, height: need.width } : need), resize);
    let img = sharp(data);
    if (size) img = img.resize(size.width, size.height, { fit: 'fill', kernel: 'lanczos3' });
    const out = await encode(img, format, (meta.orientation ?? 1) !== 1);
    return out.data.length < data.length ? out : null;
  } catch {
    // A picture sharp cannot decode stays as it is: the document opened with it before.
    return null;
  }
}

/** The smaller of the resize option's target and the right-sized target, or null to keep the size. */
export function scaledSize(width: number, height: number, need: Need | null, resize?: ResizeOptions): { width: number; height: number } | null {
  let scale = 1;
  if (need) {
    const s = Math.max(need.width / width, need.height / height);
    if (s * RIGHT_SIZE_SLACK <= 1) scale = s;
  }
  const option = targetSize(width, height, resize);
  if (option) scale = Math.min(scale, option.width / width, option.height / height);
  if (scale >= 1) return null;
  return { width: Math.max(1, Math.ceil(width * scale)), height: Math.max(1, Math.ceil(height * scale)) };
}

async function encode(img: Sharp, format: ImageFormat, keepOrientation: boolean): Promise<Recompressed> {
  if (format === 'jpeg') return encodeJpegAuto(img, { keepMetadata: keepOrientation });
  if (format === 'tiff') {
    const { data, info } = await img.tiff({ compression: 'deflate', predictor: 'horizontal' }).toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height };
  }
  return encodePngForDocument(img);
}

/** Lossless unless the palette version is clearly smaller and indistinguishable. */
async function encodePngForDocument(img: Sharp): Promise<Recompressed> {
  const lossy = await encodePng(img, 'lossy');
  const lossless = await encodePng(img, 'lossless');
  if (lossy.data.length < lossless.data.length * (1 - PNG_LOSSY_MIN_GAIN) && (await visuallyClean(img, lossy.data))) return lossy;
  return lossless;
}

async function visuallyClean(img: Sharp, candidate: Buffer): Promise<boolean> {
  const ref = await img.clone().raw().toBuffer({ resolveWithObject: true });
  const channels = ref.info.channels;
  let dec = sharp(candidate);
  dec = channels === 2 || channels === 4 ? dec.ensureAlpha() : dec.removeAlpha();
  if (channels <= 2) dec = dec.toColourspace('b-w');
  const got = await dec.raw().toBuffer({ resolveWithObject: true });
  if (got.info.channels !== channels || got.info.width !== ref.info.width || got.info.height !== ref.info.height) return false;
  let error = 0;
  for (let i = 0; i < ref.data.length; i++) error += Math.abs(ref.data[i] - got.data[i]);
  if (error / ref.data.length > PNG_LOSSY_MAX_MEAN_ERROR) return false;
  const a = { data: ref.data, width: ref.info.width, height: ref.info.height, channels };
  return ssim(a, { ...a, data: got.data }) >= PNG_LOSSY_MIN_SSIM;
}

/** An APNG has an acTL chunk before its first IDAT. */
function isAnimatedPng(data: Buffer): boolean {
  let o = 8;
  while (o + 8 <= data.length) {
    const type = data.toString('latin1', o + 4, o + 8);
    if (type === 'acTL') return true;
    if (type === 'IDAT') return false;
    o += 12 + data.readUInt32BE(o);
  }
  return false;
}
