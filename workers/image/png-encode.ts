import sharp from 'sharp';
import type { Sharp } from 'sharp';
import { luma, ssimOfLuma, type Pixels } from './ssim.ts';

export interface PngEncoded {
  data: Buffer;
  width: number;
  height: number;
}

/**
 * PNG lossy target: the same perceptual bar as JPEG (mean luma SSIM at full resolution,
 * transparent pixels composited over white).
 */
export const PNG_TARGET_SSIM = 0.98;
/** libimagequant qualities tried in order; the first whose result reaches the target wins. */
const LOSSY_QUALITIES = [50, 65, 80, 95];

/**
 * PNG of a pipeline, the smallest of several candidates. `lossless` keeps every pixel: an exact
 * palette at the smallest bit depth when the image has at most 256 distinct colours, otherwise
 * zlib level 9 with adaptive filtering (16-bit images stay 16-bit). `lossy` adds libimagequant
 * palettes at the lowest quality whose SSIM reaches PNG_TARGET_SSIM, and still falls back to the
 * lossless candidates when they are smaller: a palette never makes a flat or 1-bit image bigger.
 */
export async function encodePng(img: Sharp, mode: 'lossy' | 'lossless'): Promise<PngEncoded> {
  const { data, info } = await img.clone().raw().toBuffer({ resolveWithObject: true });
  // More bytes than one per sample: a 16-bit image, kept deep when lossless.
  if (data.length > info.width * info.height * info.channels) {
    const deep = await img.clone().png({ compressionLevel: 9, adaptiveFiltering: true }).toBuffer();
    if (mode === 'lossless') return { data: deep, width: info.width, height: info.height };
    const eight = await img.clone().raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    const best = await smallestPng({ data: eight.data, width: info.width, height: info.height, channels: eight.info.channels }, mode);
    return { data: best.length < deep.length ? best : deep, width: info.width, height: info.height };
  }
  const pixels: Pixels = { data, width: info.width, height: info.height, channels: info.channels };
  return { data: await smallestPng(pixels, mode), width: info.width, height: info.height };
}

async function smallestPng(p: Pixels, mode: 'lossy' | 'lossless'): Promise<Buffer> {
  const candidates = await losslessCandidates(p);
  if (mode === 'lossy') {
    const lossy = await lossyCandidate(p);
    if (lossy) candidates.push(lossy);
  }
  return candidates.reduce((a, b) => (b.length < a.length ? b : a));
}

function fromRaw(p: Pixels): Sharp {
  return sharp(p.data, { raw: { width: p.width, height: p.height, channels: p.channels as 1 | 2 | 3 | 4 } });
}

/** Truecolour deflate, plus an exact palette when it reproduces every pixel. */
export async function losslessCandidates(p: Pixels): Promise<Buffer[]> {
  const out = [await fromRaw(p).png({ compressionLevel: 9, adaptiveFiltering: true }).toBuffer()];
  const colours = countColours(p, 257);
  if (colours <= 256) {
    // Deliberately palette: `colours` sets the bit depth (1, 2, 4 or 8); the result is kept only if exact.
    const pal = await fromRaw(p).png({ palette: true, quality: 100, dither: 0, effort: 10, colours: Math.max(2, colours) }).toBuffer();
    if (await samePixels(p, pal)) out.push(pal);
  }
  return out;
}

async function lossyCandidate(p: Pixels): Promise<Buffer | undefined> {
  const reference = luma(p);
  for (const quality of LOSSY_QUALITIES) {
    const pal = await fromRaw(p).png({ palette: true, quality, effort: 10, dither: 1 }).toBuffer();
    const decoded = await decodeAs(pal, p.channels);
    if (decoded && ssimOfLuma(reference, luma(decoded), p.width, p.height) >= PNG_TARGET_SSIM) return pal;
  }
  return undefined;
}

/** Number of distinct pixel values, counting no further than `limit`. */
export function countColours(p: Pixels, limit: number): number {
  const seen = new Set<number>();
  const { data, channels: c } = p;
  for (let o = 0; o < data.length; o += c) {
    let v = 0;
    for (let k = 0; k < c; k++) v = v * 256 + data[o + k];
    seen.add(v);
    if (seen.size >= limit) break;
  }
  return seen.size;
}

/** Decodes a PNG to 8-bit pixels with the given channel count (grey/RGB, with or without alpha). */
async function decodeAs(png: Buffer, channels: number): Promise<Pixels | undefined> {
  const grey = channels <= 2;
  const alpha = channels === 2 || channels === 4;
  let img = sharp(png).toColourspace(grey ? 'b-w' : 'srgb');
  img = alpha ? img.ensureAlpha() : img.removeAlpha();
  const { data, info } = await img.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  return info.channels === channels ? { data, width: info.width, height: info.height, channels } : undefined;
}

/** Whether a PNG decodes to exactly the given pixels. */
export async function samePixels(p: Pixels, png: Buffer): Promise<boolean> {
  const decoded = await decodeAs(png, p.channels);
  return decoded !== undefined && Buffer.compare(toBuffer(decoded.data), toBuffer(p.data)) === 0;
}

function toBuffer(a: Uint8Array): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}
