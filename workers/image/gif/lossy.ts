import { PERCEIVED_TARGET } from '../perceived.ts';
import { Ssimulacra2Reference } from '../ssimulacra2.ts';
import { GifRecompressor, type Recompressed } from './recompress.ts';
import { noteGifThreshold, phase } from '../../shared/profile.ts';

/**
 * The cheap first filter of lossy GIF: mean luma SSIM of the displayed frames, full resolution,
 * against the input's displayed frames (see recompress.ts), scored incrementally as each step
 * re-encodes. From its answer the perceived target then moves the threshold (confirmPerceived).
 */
export const GIF_TARGET_SSIM = 0.98;
/**
 * Frames the perceived check looks at, spread evenly over the animation: at most this many, and
 * at most CHECKED_PIXELS of them, scored whole (a tile proxy of stacked frames, dithered as GIFs
 * are, scored 3 points above the frames themselves).
 */
const CHECKED_FRAMES = 8;
const CHECKED_PIXELS = 2_500_000;
/** Perceived steps from the luma search's answer; a pass this close above the target ends them. */
const PERCEIVED_STEPS = 3;
const PERCEIVED_CLOSE = 2;
/** Where the perceived steps aim: the middle of the band they stop in. */
const AIM = PERCEIVED_TARGET + PERCEIVED_CLOSE / 2;
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
 * originals and reach the perceived target (confirmPerceived), with that score when lossy. The
 * exact (threshold 0) re-encode is the floor.
 */
export async function smallestLossyGif(gif: Uint8Array, onStep?: (fraction: number) => void): Promise<{ data: Buffer; threshold: number; ssim: number; score?: number }> {
  const gifs = new GifRecompressor(gif);
  gifs.watch(checkedFrames(gifs.screen));
  const found = await phase('search', async () => confirmPerceived(gifs, await lumaSearch(gifs, onStep)));
  noteGifThreshold(found.threshold);
  return found;
}

/**
 * The threshold judged by the perceived target (SSIMULACRA2 of the checked displayed frames,
 * stacked), starting from the luma search's answer. Luma SSIM ranks thresholds well but is no
 * measure of what is seen: its bar let through screen recordings at 40 and left photo
 * animations at 88. So from its answer the search moves either way, PERCEIVED_STEPS times at
 * most: up toward MAX_THRESHOLD while the answer passes with room to spare, down toward the exact
 * re-encode (threshold 0, displayed identically) while it fails, and inside the bracket once both
 * ends are known (between; the score drops a few points at the first lossy step, then slowly, then
 * fast: on exifr-readme-animated.gif 100, 84.3, 82.9, 76.1, 69.5 at thresholds 0, 1, 4, 8, 16).
 * The answer is the smallest file seen to pass, or the exact re-encode when none did.
 */
async function confirmPerceived(gifs: GifRecompressor, found: Found): Promise<{ data: Buffer; threshold: number; ssim: number; score?: number }> {
  const reference = new Ssimulacra2Reference(gifs.inputFrames());
  try {
    const score = (r: Recompressed) => reference.score(r.frames!);
    const first = found.threshold === 0 ? 100 : score(found);
    type Candidate = { data: Buffer; threshold: number; ssim: number; score?: number };
    const answer = ({ data, threshold, ssim }: Found): Candidate => ({ data, threshold, ssim });
    let best: Candidate = first >= PERCEIVED_TARGET ? { ...answer(found), score: found.threshold === 0 ? undefined : first } : { data: gifs.recompress(0).data, threshold: 0, ssim: 1 };
    // The bracket [lo passes, hi fails], with their scores; no failure known yet when the answer passed.
    const passed = first >= PERCEIVED_TARGET;
    let lo: Tried = passed ? { t: found.threshold, s: first } : { t: 0, s: 100 };
    let hi: Tried | undefined = passed ? undefined : { t: found.threshold, s: first };
    if (passed && first < PERCEIVED_TARGET + PERCEIVED_CLOSE) return best;
    let lastPassed: boolean | undefined;
    let narrowed = false;
    for (let i = 0; i < PERCEIVED_STEPS && lo.t < MAX_THRESHOLD; i++) {
      let threshold: number;
      if (hi === undefined) threshold = Math.min(MAX_THRESHOLD, Math.max(1, 2 * lo.t));
      else if (lo.t === 0) threshold = hi.t / 2;
      else {
        threshold = narrowed ? between(lo, hi) : Math.sqrt(lo.t * hi.t);
        narrowed = true;
      }
      const tried = gifs.recompress(threshold);
      const { data, ssim } = tried;
      const s = score(tried);
      await new Promise((r) => setImmediate(r));
      const pass = s >= PERCEIVED_TARGET;
      // Illinois: an end that stays while the other moves twice in a row counts half as far from the aim.
      const other = pass ? hi : lo;
      if (other && lastPassed === pass) other.s = AIM + (other.s - AIM) / 2;
      lastPassed = pass;
      if (!pass) {
        hi = { t: threshold, s };
        continue;
      }
      lo = { t: threshold, s };
      if (data.length < best.data.length) best = { data, threshold, ssim, score: s };
      if (s < PERCEIVED_TARGET + PERCEIVED_CLOSE) break;
    }
    return best;
  } finally {
    reference.dispose();
  }
}

/** A recompression the luma search found, with its threshold. */
type Found = Recompressed & { threshold: number };

/** A threshold tried and its perceived score. */
interface Tried {
  t: number;
  s: number;
}

/**
 * A threshold inside a bracket already narrowed once: where the score, taken as linear in
 * log(threshold) between the bracket's ends, reaches AIM, kept a tenth of the bracket from either
 * end. A fresh bracket is a doubling or a halving wide, and across it the score can fall off a
 * cliff (a screen recording: 90.3 at threshold 9.7, 37.0 at 19.4), so its first step is the
 * midpoint of log(threshold); after it, the ends are close enough to interpolate. Midpoints
 * alone left 3 of 6 animations 3.5-8.6 points above the target after their three steps.
 */
function between(lo: Tried, hi: Tried): number {
  const fraction = Math.min(0.9, Math.max(0.1, (lo.s - AIM) / (lo.s - hi.s)));
  return lo.t * (hi.t / lo.t) ** fraction;
}

/** The frames the perceived check looks at: CHECKED_FRAMES at most, CHECKED_PIXELS at most, spread evenly. */
function checkedFrames({ width, height, frames }: { width: number; height: number; frames: number }): number[] {
  const count = Math.max(1, Math.min(frames, CHECKED_FRAMES, Math.floor(CHECKED_PIXELS / Math.max(1, width * height))));
  return Array.from({ length: Math.min(count, frames) }, (_, i) => Math.floor((i * frames) / count));
}

/**
 * The luma search (see GIF_TARGET_SSIM). The threshold is real-valued; 1 − SSIM grows about as a
 * power of it (close to a straight line on log-log axes), so each step aims at the target along
 * the line through the last two measurements, kept inside the bracket of known pass and fail.
 */
async function lumaSearch(gifs: GifRecompressor, onStep?: (fraction: number) => void): Promise<Found> {
  const steps = Math.max(MIN_STEPS, Math.min(MAX_STEPS, Math.floor(STEP_BUDGET / Math.max(1, gifs.framePixels))));
  let best: Found = { ...gifs.recompress(0), threshold: 0 };
  let lo = 0;
  let hi = MAX_THRESHOLD;
  let t = FIRST_THRESHOLD;
  const seen: { t: number; loss: number }[] = [];
  for (let i = 0; i < steps; i++) {
    const tried = gifs.recompress(t);
    const { data, ssim } = tried;
    onStep?.((i + 1) / steps);
    await new Promise((r) => setImmediate(r));
    if (ssim >= GIF_TARGET_SSIM + MARGIN) {
      lo = t;
      if (data.length < best.data.length) best = { ...tried, threshold: t };
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
