import { GifRecompressor } from './recompress.ts';

/**
 * Visual bar of lossy GIF: mean luma SSIM of the displayed frames, full resolution, against
 * the input's displayed frames (see recompress.ts).
 */
export const GIF_TARGET_SSIM = 0.98;
/** Largest colour error the lossy LZW may trade per pixel (weighted RGB distance). */
const MAX_THRESHOLD = 64;

/**
 * The smallest recompression of `gif` whose displayed frames stay within GIF_TARGET_SSIM of the
 * originals: a bisection over the lossy LZW threshold (SSIM falls as the threshold grows), with
 * the exact (threshold 0) re-encode as the floor.
 */
export async function smallestLossyGif(gif: Uint8Array, onStep?: (fraction: number) => void): Promise<{ data: Buffer; threshold: number; ssim: number }> {
  const gifs = new GifRecompressor(gif);
  let best = { data: gifs.recompress(0).data, threshold: 0, ssim: 1 };
  let lo = 0;
  let hi = MAX_THRESHOLD + 1;
  const steps = Math.ceil(Math.log2(hi));
  for (let i = 0; hi - lo > 1; i++) {
    const t = (lo + hi) >> 1;
    const { data, ssim } = gifs.recompress(t);
    if (ssim >= GIF_TARGET_SSIM) {
      lo = t;
      if (data.length < best.data.length) best = { data, threshold: t, ssim };
    } else {
      hi = t;
    }
    onStep?.((i + 1) / steps);
    await new Promise((r) => setImmediate(r));
  }
  return best;
}
