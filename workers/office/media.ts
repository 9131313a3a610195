import type { ResizeOptions } from '../../src/catalog/index.ts';
import { FULL_SEARCH, type BudgetedPicture } from '../image/budget.ts';
import { greyOf, openImage } from '../image/door.ts';
import { chooseJpeg, fastOptions, jpegOptions, jpegPipeline } from '../image/encode.ts';
import { jpegOrigin, markAsOurs } from '../image/jpeg-mark.ts';
import { alreadyAsCoarse } from '../image/jpeg-quant.ts';
import { encodePng } from '../image/png-encode.ts';
import { targetSize } from '../image/resize.ts';
import { encodedPipeline, type Pipeline } from '../image/vips.ts';
import { PERCEIVED_TARGET, perceivedScore } from '../image/perceived.ts';
import { PNG_PALETTE_TARGET } from '../image/png-encode.ts';
import type { Need } from './display-size.ts';
import { phase } from '../shared/profile.ts';

/** A JPEG that is not resized is re-encoded only if that saves this much (each re-encode loses a little). */
const JPEG_MIN_GAIN = 0.1;
/** Right-sizing starts only when a picture has this much more resolution than it needs. */
const RIGHT_SIZE_SLACK = 1.25;
/**
 * Lossy PNG policy for documents: one palette version (libimagequant at PNG_LOSSY_QUALITY, with
 * dithering) is tried only when the lossless PNG is still this large. Quantising costs time by the
 * pixel, so a small picture costs milliseconds, and in a small document it is most of the bytes
 * (a 14 KB DOCX with an 8.5 KB PNG: 3 % saved without the palette, where unzip + pngquant + zip -9
 * saves 11 %); below this only headers would be left to gain…
 */
const PNG_LOSSY_FROM_BYTES = 4 * 1024;
const PNG_LOSSY_QUALITY = 80;
/** …and kept only if it is this much smaller than the lossless one… */
const PNG_LOSSY_MIN_GAIN = 0.15;
/**
 * …and indistinguishable: the perceived quality the PNG compressor's palettes keep
 * (PNG_PALETTE_TARGET); no 16×16 block whose mean colour moved more than this in any channel
 * (0-255, premultiplied: a local hue shift on a small area); alpha off by at most this on average.
 */
const PNG_LOSSY_MAX_BLOCK_SHIFT = 10;
const PNG_LOSSY_MAX_ALPHA_ERROR = 1;
const BLOCK = 16;

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
  /** Perceived quality (SSIMULACRA2, predicted at full resolution) of a lossy encode. */
  score?: number;
}

/**
 * A smaller encoding of an image part in its own format, or null to keep the part as it is.
 * JPEG: automatic quality (PERCEIVED_TARGET, as every picture; at its own size only for JPEG_MIN_GAIN). PNG:
 * lossless, or a palette only where it is visually clean (see the constants above). TIFF: lossless
 * deflate, for 8-bit RGB or grey only (CMYK and deep TIFF would not survive unchanged). The size
 * is the smaller of what the resize option asks and TARGET_PPI of the displayed size, never larger
 * than the original. Animated PNG and multi-page TIFF are kept, since one frame would be lost.
 */
export async function recompressImage(data: Buffer, need: Need | null, resize?: ResizeOptions, budget?: BudgetedPicture): Promise<Recompressed | null> {
  const format = sniffImage(data);
  if (!format || (format === 'png' && isAnimatedPng(data))) return null;
  try {
    // The document reserved memory for its pictures (plan.ts): the door checks the pixel budget only.
    const { image, facts: meta } = await openImage(data, { embedded: true, memory: 'reserved' });
    if (meta.pages > 1) return null;
    if (format === 'tiff' && (meta.depth !== 'uchar' || (meta.space !== 'srgb' && meta.space !== 'b-w'))) return null;
    const rotated = meta.orientation >= 5;
    const size = scaledSize(meta.width, meta.height, need && (rotated ? { width: need.height, height: need.width } : need), resize);
    // A JPEG this service already encoded (or one with its tables at a chosen quality) keeps its bytes at its size.
    if (format === 'jpeg' && !size && (await jpegOrigin(data)) !== 'other') return null;
    // Under a reduced document budget, a JPEG kept at its size and already as coarse as its class's quality cannot gain.
    const known = budget && budget.search.probes !== Infinity ? budget.known.quality : undefined;
    if (format === 'jpeg' && !size && known !== undefined && (await alreadyAsCoarse(data, known))) return null;
    const img = size ? image.resize(size.width, size.height, { fit: 'fill', kernel: 'lanczos3' }) : image;
    const out = await encode(img, format, meta.orientation !== 1, budget);
    const minGain = format === 'jpeg' && !size ? JPEG_MIN_GAIN : 0;
    return out.data.length < data.length * (1 - minGain) ? out : null;
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

async function encode(img: Pipeline, format: ImageFormat, keepOrientation: boolean, budget: BudgetedPicture | undefined): Promise<Recompressed> {
  if (format === 'jpeg') return encodeJpeg(img, keepOrientation, budget);
  if (format === 'tiff') {
    const { data, info } = await img.tiff({ compression: 'deflate', predictor: 'horizontal' }).toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height };
  }
  return encodePngForDocument(img);
}

/**
 * The image helpers' automatic-quality JPEG (proxy search within the document's budget, mozjpeg) at the document target. CMYK
 * becomes sRGB, transparency is flattened onto white; with an EXIF orientation the metadata stays
 * and the pixels are not rotated, so the picture shows as before in every reader.
 */
async function encodeJpeg(img: Pipeline, keepOrientation: boolean, budget: BudgetedPicture | undefined): Promise<Recompressed> {
  const base = img.clone().flatten({ background: '#ffffff' }).toColourspace('srgb');
  const { data, info } = await phase('decode', () => base.clone().raw().toBuffer({ resolveWithObject: true }));
  const rgb = { data, width: info.width, height: info.height, channels: info.channels };
  // A grey picture becomes a one-component JPEG (image/door.ts).
  const greyPixels = greyOf(rgb);
  const grey = greyPixels !== undefined;
  const pixels = greyPixels ?? rgb;
  const search = budget?.search ?? FULL_SEARCH;
  const setting = await chooseJpeg(pixels, PERCEIVED_TARGET, 'full', search);
  budget?.found({ quality: setting.quality });
  const encoder = keepOrientation ? (grey ? base.clone().keepExif() : base.clone().keepMetadata()) : jpegPipeline(pixels);
  if (grey) encoder.toColourspace('b-w');
  const options = jpegOptions(setting);
  const out = await phase('encode', () => encoder.jpeg(search.fastEncode ? fastOptions(options) : options).toBuffer({ resolveWithObject: true }));
  return { data: markAsOurs(out.data), width: out.info.width, height: out.info.height, score: setting.score };
}

/** Lossless unless the palette version is clearly smaller and indistinguishable. */
async function encodePngForDocument(img: Pipeline): Promise<Recompressed> {
  const lossless = await encodePng(img, 'lossless');
  if (lossless.data.length < PNG_LOSSY_FROM_BYTES) return lossless;
  const palette = await img.clone().png({ palette: true, quality: PNG_LOSSY_QUALITY, effort: 7, dither: 1 }).toBuffer();
  if (palette.length >= lossless.data.length * (1 - PNG_LOSSY_MIN_GAIN)) return lossless;
  const score = await cleanScore(img, palette);
  return score === undefined ? lossless : { data: palette, width: lossless.width, height: lossless.height, score };
}

/** The candidate's perceived quality when it is visually clean (see PNG_LOSSY_MAX_BLOCK_SHIFT and the constants around it), else undefined. */
async function cleanScore(img: Pipeline, candidate: Buffer): Promise<number | undefined> {
  const rgba = (s: Pipeline) => s.toColourspace('srgb').ensureAlpha().raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  const [ref, got] = await Promise.all([rgba(img.clone()), rgba(encodedPipeline(candidate))]);
  const { width, height } = ref.info;
  if (got.info.width !== width || got.info.height !== height || ref.info.channels !== 4 || got.info.channels !== 4) return undefined;
  const a = ref.data;
  const b = got.data;
  let alpha = 0;
  for (let i = 3; i < a.length; i += 4) alpha += Math.abs(a[i] - b[i]);
  if (alpha / (width * height) > PNG_LOSSY_MAX_ALPHA_ERROR) return undefined;
  for (let by = 0; by < height; by += BLOCK) {
    for (let bx = 0; bx < width; bx += BLOCK) {
      const shift = [0, 0, 0];
      let n = 0;
      for (let y = by; y < Math.min(height, by + BLOCK); y++) {
        for (let x = bx, i = (y * width + bx) * 4; x < Math.min(width, bx + BLOCK); x++, i += 4) {
          for (let k = 0; k < 3; k++) shift[k] += (a[i + k] * a[i + 3] - b[i + k] * b[i + 3]) / 255;
          n++;
        }
      }
      if (shift.some((s) => Math.abs(s / n) > PNG_LOSSY_MAX_BLOCK_SHIFT)) return undefined;
    }
  }
  const score = perceivedScore({ data: a, width, height, channels: 4 }, { data: b, width, height, channels: 4 });
  return score >= PNG_PALETTE_TARGET ? score : undefined;
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
