import { losslessCompressPng, PngRowFilter } from '@napi-rs/image';
import sharp from 'sharp';
import type { Sharp } from 'sharp';
import { carryColourChunks, pixelAndColourChunks } from './png-chunks.ts';
import { luma, ssimOfLuma, type Pixels } from './ssim.ts';

export interface PngEncoded {
  data: Buffer;
  width: number;
  height: number;
}

export interface PngEncodeOptions {
  /**
   * The PNG the pixels came from: its colour chunks (ICC, gamma, sRGB…) are put into every
   * candidate before optimisation, so the optimiser knows them (it will not turn RGB pixels
   * described by an RGB ICC profile into greyscale) and they are in the result.
   */
  colourChunksFrom?: Buffer;
  /**
   * Set when the pipeline decodes `colourChunksFrom` unchanged (no resize): the PNG itself is
   * then the lossless candidate, given to the optimiser without a decode and re-encode.
   */
  unchanged?: boolean;
}

/**
 * PNG lossy target: the same perceptual bar as JPEG (mean luma SSIM at full resolution,
 * transparent pixels composited over white).
 */
export const PNG_TARGET_SSIM = 0.98;
/** libimagequant qualities tried in order; the first whose result reaches the target wins. */
const LOSSY_QUALITIES = [50, 65, 80, 95];

/**
 * PNG of a pipeline, the smallest of several candidates, each optimised losslessly by oxipng
 * (colour type, bit depth and palette reductions when exact, every row filter strategy,
 * libdeflate at its strongest). `lossless` keeps every pixel (16-bit images stay 16-bit unless
 * the low bytes carry nothing). `lossy` adds a libimagequant palette at the lowest quality whose
 * SSIM reaches PNG_TARGET_SSIM and keeps whichever is smaller: a palette never makes a flat or
 * 1-bit image bigger.
 */
export async function encodePng(img: Sharp, mode: 'lossy' | 'lossless', opts: PngEncodeOptions = {}): Promise<PngEncoded> {
  const source = opts.unchanged && opts.colourChunksFrom ? pixelAndColourChunks(opts.colourChunksFrom) : undefined;
  // oxipng is stricter than libspng on some files: those take the decode and re-encode path.
  const direct = source ? await optimisePng(source).catch(() => undefined) : undefined;
  if (direct && mode === 'lossless') {
    const { width, height } = await img.metadata();
    return { data: direct, width: width ?? 0, height: height ?? 0 };
  }
  const { data, info } = await img.clone().raw().toBuffer({ resolveWithObject: true });
  const size = { width: info.width, height: info.height };
  const optimise = (png: Buffer) => optimisePng(opts.colourChunksFrom ? carryColourChunks(opts.colourChunksFrom, png) : png);
  // More bytes than one per sample: a 16-bit image, kept deep when lossless.
  if (data.length > info.width * info.height * info.channels) {
    const deep = direct ?? (await optimise(await img.clone().png({ compressionLevel: 0 }).toBuffer()));
    if (mode === 'lossless') return { data: deep, ...size };
    const eight = await img.clone().raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    const lossy = await lossyCandidate({ data: eight.data, ...size, channels: eight.info.channels });
    const best = lossy ? await optimise(lossy) : deep;
    return { data: best.length < deep.length ? best : deep, ...size };
  }
  const pixels: Pixels = { data, ...size, channels: info.channels };
  const candidates = [direct ?? (await optimise(await fromRaw(pixels).png({ compressionLevel: 0 }).toBuffer()))];
  if (mode === 'lossy') {
    const lossy = await lossyCandidate(pixels);
    if (lossy) candidates.push(await optimise(lossy));
  }
  return { data: candidates.reduce((a, b) => (b.length < a.length ? b : a)), ...size };
}

/**
 * oxipng's lossless optimisation (its default preset); pixels and ancillary chunks are untouched.
 * Images of 1, 2 or 4 bits per pixel are only tried unfiltered: filters work on bytes, which
 * there pack several pixels, so they win nothing and cost seconds on large scans.
 */
export async function optimisePng(png: Buffer): Promise<Buffer> {
  const bitDepth = png[24];
  return losslessCompressPng(png, bitDepth < 8 ? { force: true, filter: [PngRowFilter.None] } : { force: true });
}

function fromRaw(p: Pixels): Sharp {
  return sharp(p.data, { raw: { width: p.width, height: p.height, channels: p.channels as 1 | 2 | 3 | 4 } });
}

async function lossyCandidate(p: Pixels): Promise<Buffer | undefined> {
  const reference = luma(p);
  for (const quality of LOSSY_QUALITIES) {
    // Fast deflate: the palette PNG is only scored here, oxipng compresses the one kept.
    const pal = await fromRaw(p).png({ palette: true, quality, effort: 10, dither: 1, compressionLevel: 1 }).toBuffer();
    const decoded = await decodeAs(pal, p.channels);
    if (decoded && ssimOfLuma(reference, luma(decoded), p.width, p.height) >= PNG_TARGET_SSIM) return pal;
  }
  return undefined;
}

/** Decodes a PNG to 8-bit pixels with the given channel count (grey/RGB, with or without alpha). */
export async function decodeAs(png: Buffer, channels: number): Promise<Pixels | undefined> {
  const grey = channels <= 2;
  const alpha = channels === 2 || channels === 4;
  let img = sharp(png).toColourspace(grey ? 'b-w' : 'srgb');
  img = alpha ? img.ensureAlpha() : img.removeAlpha();
  const { data, info } = await img.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  return info.channels === channels ? { data, width: info.width, height: info.height, channels } : undefined;
}
