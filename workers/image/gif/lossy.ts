import { GifRecompressor } from './recompress.ts';

/**
 * Visual bar of lossy GIF: mean luma SSIM of the displayed frames, full resolution, against
 * the input's displayed frames (see recompress.ts).
 */
export const GIF_TARGET_SSIM = 0.98;
/**
 * The search aims this much higher: the same SSIM taken over all frames stacked into one tall
 * image (as the benchmark and the tests measure it, windows straddling frame edges included)
 * comes out up to about 0.0002 lower than the mean of the frames' own.
 */
const MARGIN = 0.0005;
/** Largest colour error the lossy LZW may trade per pixel (weighted RGB distance). */
const MAX_THRESHOLD = 64;
/** Lossy encodes tried at most; the search stops early once one lands within CLOSE above the target. */
const MAX_STEPS = 8;
/**
 * Every step re-encodes every frame's rectangle and scores the screen where it changed: its cost
 * is the pixels of all frames' rectangles, the same measure a single-shot tool's (gifsicle's)
 * time follows. The steps are bounded by this many of those pixel-passes (an animation whose
 * frames draw 3.8 M pixels gets 5), never fewer than MIN_STEPS: then the search plus the exact
 * floor (cheaper than a lossy step) cost a fixed few single encodes at any size.
 */
const STEP_BUDGET = 20e6;
const MIN_STEPS = 4;
const CLOSE = 0.001;
const FIRST_THRESHOLD = 8;
const UPWARD_STEEPER = 1.3;

/**
 * The smallest recompression of `gif` whose displayed frames stay within GIF_TARGET_SSIM of the
 * originals. The threshold is real-valued; 1 − SSIM grows about as a power of it (close to a
 * straight line on log-log axes), so each step aims at the target along the line through the
 * last two measurements, kept inside the bracket of known pass and fail. The exact (threshold
 * 0) re-encode is the floor.
 */
export async function smallestLossyGif(gif: Uint8Array, onStep?: (fraction: number) => void): Promise<{ data: Buffer; threshold: number; ssim: number }> {
  const gifs = new GifRecompressor(gif);
  const steps = Math.max(MIN_STEPS, Math.min(MAX_STEPS, Math.floor(STEP_BUDGET / Math.max(1, gifs.framePixels))));
  let best = { data: gifs.recompress(0).data, threshold: 0, ssim: 1 };
  let lo = 0;
  let hi = MAX_THRESHOLD;
  let t = FIRST_THRESHOLD;
  const seen: { t: number; loss: number }[] = [];
  for (let i = 0; i < steps; i++) {
    const { data, ssim } = gifs.recompress(t);
    onStep?.((i + 1) / steps);
    await new Promise((r) => setImmediate(r));
    if (ssim >= GIF_TARGET_SSIM + MARGIN) {
      lo = t;
      if (data.length < best.data.length) best = { data, threshold: t, ssim };
      if (ssim < GIF_TARGET_SSIM + MARGIN + CLOSE) break;
    } else {
      hi = t;
    }
    if (hi - lo < 0.02 * hi) break;
    seen.push({ t, loss: Math.max(1e-6, 1 - ssim) });
    t = Math.min(hi - 0.1 * (hi - lo), Math.max(lo + 0.1 * (hi - lo), aim(seen, 1 - GIF_TARGET_SSIM - MARGIN)));
  }
  return best;
}

/**
 * Threshold where the log-log line through the last two points (slope 2 with one) reaches `loss`.
 * The curve steepens toward low thresholds (its log-log slope falls from about 7 to 3 on
 * photo-like animations), so a step up from a passing point takes the slope 1.3 times steeper
 * than the secant: it lands below the target, a result, more often than above it, a wasted step.
 */
function aim(seen: { t: number; loss: number }[], loss: number): number {
  const b = seen[seen.length - 1];
  const a = seen.length > 1 ? seen[seen.length - 2] : undefined;
  let slope = 2;
  if (a && a.t !== b.t) {
    const s = Math.log(b.loss / a.loss) / Math.log(b.t / a.t);
    if (Number.isFinite(s) && s > 0.5 && s < 5) slope = s;
  }
  if (b.loss < loss) slope *= UPWARD_STEEPER;
  return b.t * (loss / b.loss) ** (1 / slope);
}
