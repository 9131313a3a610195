import { PngRowFilter } from '@napi-rs/image';
import sharp from 'sharp';
import type { Pixels } from './ssim.ts';

/**
 * Bounded work per job. Every search here costs about pixels × candidates × effort, so each
 * one takes its candidates and effort from a budget of "pixel-passes" instead of a fixed list:
 * a thumbnail gets every candidate, a 12 MP scan as many as fit, and no input can make a job
 * run unbounded. The budgets are sized so a 12 MP image stays within a few single encodes of
 * the time a single-shot tool (pngquant + optipng, gifsicle, cjpeg) takes on it.
 */

/**
 * oxipng's cost: it tries its row-filter strategies with a fast deflate, then compresses the best
 * one with libdeflate at its strongest, the step that dominates. Its default set (the adaptive
 * strategies included, 5-7 % smaller on photos than Paeth alone) costs about 2.5 single-filter
 * runs; 40 M pixel-passes keep the default set up to 16 MP.
 */
const OXIPNG_BUDGET = 40e6;
const DEFAULT_SET_PASSES = 2.5;

/**
 * The row filters oxipng may try on a PNG of this many pixels, or undefined for its default set.
 * Beyond the budget one filter: Paeth for photos, None for palette images (indices do not
 * predict). Images of 1, 2 or 4 bits per pixel always try None only: their filters work on bytes
 * that pack several pixels, so they win nothing and cost seconds on large scans.
 */
export function oxipngFilters(pixels: number, bitDepth: number, palette: boolean): PngRowFilter[] | undefined {
  if (bitDepth < 8) return [PngRowFilter.None];
  if (pixels * DEFAULT_SET_PASSES <= OXIPNG_BUDGET) return undefined;
  return [palette ? PngRowFilter.None : PngRowFilter.Paeth];
}

/**
 * libimagequant effort (sharp's 1-10, pngquant's speed 11 - effort) for one palette of this many
 * pixels: the slowest, best palette up to 2 MP, pngquant's default speed (3) at 12 MP and above.
 */
export function quantiseEffort(pixels: number): number {
  if (pixels <= 2e6) return 10;
  if (pixels <= 6e6) return 9;
  return 8;
}

/**
 * Deflate gets less than this fraction off the sampled pixels (after PNG row filtering): the
 * image is noise to a lossless coder, and no lossless re-encode will save anything worth its cost.
 */
const INCOMPRESSIBLE_RATIO = 0.9;

/**
 * Whether the pixels are incompressible noise, decided in a fraction of a second from a sample
 * (the tile proxy of the quality searches, at most about 1 MP): fast deflate with adaptive row
 * filters, compared with the raw bytes. Uniform noise scores about 1.0; the noisiest camera
 * photos stay well below 0.8, and anything with structure far below.
 */
export async function incompressible(sample: Pixels): Promise<boolean> {
  const raw = sample.width * sample.height * sample.channels;
  const png = await sharp(sample.data, { raw: { width: sample.width, height: sample.height, channels: sample.channels as 1 | 2 | 3 | 4 } })
    .png({ compressionLevel: 1, adaptiveFiltering: true })
    .toBuffer();
  return png.length >= raw * INCOMPRESSIBLE_RATIO;
}
