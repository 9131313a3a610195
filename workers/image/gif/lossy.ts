import { PERCEIVED_TARGET } from '../perceived.ts';
import { Ssimulacra2Reference } from '../ssimulacra2.ts';
import { GifRecompressor, type Pending } from './recompress.ts';
import { noteGifThreshold, phase } from '../../shared/profile.ts';

/**
 * Frames the perceived check looks at, spread evenly over the animation: at most this many, and
 * at most CHECKED_PIXELS of them, scored whole (a tile proxy of stacked frames, dithered as GIFs
 * are, scored 3 points above the frames themselves).
 */
const CHECKED_FRAMES = 8;
const CHECKED_PIXELS = 2_500_000;
/** Perceived steps after the first; a pass this close above the target ends them. */
const PERCEIVED_STEPS = 4;
const PERCEIVED_CLOSE = 2;
/** Where the perceived steps aim: the middle of the band they stop in. */
const AIM = PERCEIVED_TARGET + PERCEIVED_CLOSE / 2;
/** Largest colour error the lossy LZW may trade per pixel (weighted RGB distance). */
const MAX_THRESHOLD = 64;
/**
 * The first threshold judged: where the corpus's animations and the made ones pass or fail by a
 * few points (exifr-readme 81.2, lena 80.6, a sprite loop 81.2; a photo pan fails, a screen
 * recording passes with room), so the answer or a bracket is usually known after it.
 */
const FIRST_THRESHOLD = 8;

/**
 * The smallest recompression of `gif` whose watched displayed frames reach the perceived target
 * (see confirmPerceived), with that score when lossy. The exact (threshold 0) re-encode is the
 * floor; it is made first, and there each frame's choice of colour table and clear is made.
 */
export async function smallestLossyGif(gif: Uint8Array, onStep?: (fraction: number) => void): Promise<Candidate> {
  const gifs = new GifRecompressor(gif);
  gifs.watch(checkedFrames(gifs.screen));
  const steps = PERCEIVED_STEPS + 2;
  const found = await phase('search', async () => {
    gifs.recompress(0);
    onStep?.(1 / steps);
    await turn();
    const first = { ...gifs.begin(FIRST_THRESHOLD), threshold: FIRST_THRESHOLD };
    onStep?.(2 / steps);
    await turn();
    return confirmPerceived(gifs, first, (i) => onStep?.((i + 3) / steps));
  });
  noteGifThreshold(found.threshold);
  return found;
}

/**
 * The threshold judged by the perceived target (SSIMULACRA2 of the checked displayed frames,
 * stacked), from a first one: PERCEIVED_STEPS times at most, up toward MAX_THRESHOLD (doubling)
 * while it passes with room to spare and no failure is known, down toward the exact re-encode
 * (threshold 0, displayed identically; halving) while nothing lossy has passed, and inside the
 * bracket once both ends are known (between; the score drops a few points at the first lossy step,
 * then slowly, then fast: on exifr-readme-animated.gif 100, 84.3, 82.9, 76.1, 69.5 at thresholds
 * 0, 1, 4, 8, 16). The answer is the smallest file seen to pass, or the exact re-encode when none
 * did. Mean luma SSIM used to choose the first threshold, in 4-8 more recompressions, but the
 * perceived steps then moved far from its answer, either way, on most animations (see
 * docs/benchmarks.md).
 */
async function confirmPerceived(gifs: GifRecompressor, found: Found, onStep: (step: number) => void): Promise<Candidate> {
  const reference = new Ssimulacra2Reference(gifs.inputFrames());
  try {
    // A threshold is scored on its watched frames; only one that passes is encoded to the end.
    const score = (r: Pending) => reference.score(r.frames!);
    const first = score(found);
    const passed = first >= PERCEIVED_TARGET;
    const firstData = passed ? found.finish().data : undefined;
    const exact: Candidate = { data: gifs.recompress(0).data, threshold: 0 };
    // Lossy is not always smaller: trading pixels can undo the exact encode's inter-frame savings.
    let best: Candidate = firstData && firstData.length < exact.data.length ? { data: firstData, threshold: found.threshold, score: first } : exact;
    // The bracket [lo passes, hi fails], with their scores; no failure known yet when the answer passed.
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
      const tried = gifs.begin(threshold);
      const s = score(tried);
      onStep(i);
      await turn();
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
      const { data } = tried.finish();
      if (data.length < best.data.length) best = { data, threshold, score: s };
      if (s < PERCEIVED_TARGET + PERCEIVED_CLOSE) break;
    }
    return best;
  } finally {
    reference.dispose();
  }
}

/** Between recompressions the thread turns its event loop, where a stop request arrives. */
function turn(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/** A recompression of the search's answer: its threshold (0: the exact re-encode) and, when lossy, its perceived score. */
interface Candidate {
  data: Buffer;
  threshold: number;
  score?: number;
}

/** A recompression begun and its threshold (lossy: above 0). */
type Found = Pending & { threshold: number };

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
