import { defaultSetting, jpegOptions, probeOptions, proxyOf } from '../image/encode.ts';
import { Bracket, MAX_QUALITY, MIN_QUALITY, PROBE_QUALITY, PROBE_STEP, secantProbe } from '../image/quality-bracket.ts';
import { CALL_COST, FULL_SEARCH, type SearchBudget } from '../image/budget.ts';
import { aimOnProxy, fromProxy, PERCEIVED_TARGET } from '../image/perceived.ts';
import type { Pixels } from '../image/ssim.ts';
import { Ssimulacra2Reference, ssimulacra2 } from '../image/ssimulacra2.ts';
import { encodedPipeline, pixelPipeline } from '../image/vips.ts';
import { bilinearMagnify, boxAverage, type Spans } from '../image/pixels/kernels.ts';
import { noteProbe } from '../shared/profile.ts';

/**
 * The resolution a page is judged at: 100 % zoom on a typical screen, which is also how the
 * issue measures pages (pdftoppm at 100 dpi). An image drawn finer than this is seen averaged
 * down, so JPEG noise finer than a screen pixel is never seen at this zoom; one drawn coarser is
 * seen magnified, so its flaws are seen larger.
 */
export const VIEW_PPI = 100;
/**
 * The perceived quality (SSIMULACRA2) an image must keep as seen at VIEW_PPI: every picture's.
 * The page promise stays luma SSIM ≥ 0.95 on every page at 100 dpi (the tests check it with
 * pdftoppm); this target is stricter on every picture measured.
 */
export const VIEW_TARGET = PERCEIVED_TARGET;

/** Magnification beyond this adds nothing to judge (each image pixel is already a block of screen pixels). */
const MAX_MAGNIFICATION = 3;

/**
 * A magnified view is judged at most this large: past it the view only repeats the same flaws
 * bigger, while the metric's time and memory (about 80 bytes a pixel) grow with it.
 */
const MAX_VIEW_PIXELS = 2_000_000;

/** Screen pixels per image pixel at VIEW_PPI (an unknown placement counts as 1:1), for a picture of `pixels`. */
export function viewScale(ppi: number | undefined, pixels = 0): number {
  const scale = ppi === undefined || !(ppi > 0) ? 1 : Math.min(MAX_MAGNIFICATION, VIEW_PPI / ppi);
  return scale > 1 && pixels > 0 ? Math.max(1, Math.min(scale, Math.sqrt(MAX_VIEW_PIXELS / pixels))) : scale;
}

/** What chooseViewQuality aims at and may spend. */
export interface ViewSearch {
  /** Perceived quality to keep as seen at VIEW_PPI. */
  target?: number;
  /** The document's budget for this picture (budget.ts). */
  search?: SearchBudget;
  /** The picture's own final encode, used as the probe of a small picture (see chooseViewQuality). */
  final?: (quality: number) => Promise<Buffer>;
  /** Bytes at which the JPEG is of no use: the caller keeps another encoding unless the JPEG is smaller (see chooseViewQuality). */
  ceiling?: number;
}

/** What chooseViewQuality found; `encoded`: the answer's final file when the search made it. */
export interface ViewQuality {
  quality: number;
  encoded?: Buffer;
  score?: number;
}

/**
 * The lowest JPEG quality at which `p`, drawn at `ppi` on its page, keeps the perceived `target`
 * as seen at VIEW_PPI (see asSeen; on a proxy, aimOnProxy), probed on the JPG compressor's tile
 * proxy (full-resolution tiles on the MCU grid, so the proxy's blocks are the image's blocks).
 * A full search probes as the JPG compressor's does (PROBE_QUALITY, a step toward the target,
 * then along the secant of log(100 - score): secantProbe); bisection took a third more probes
 * (600 pictures of 48×48: 2,942 → 2,248) to the same answers on every corpus document.
 * Under a document budget (budget.ts) the search starts from `search.start` (then one step below
 * it, or above) and bisects until `search.probes` are spent (see searchDone): the answer is the
 * lowest quality seen to pass, and bisection's long steps down find a lower one within the
 * budget than the secant's (30 photos of 12 MP: the secant's answers 2.2 % larger).
 * A picture of fewer pixels than CALL_COST is its own proxy and its probes are mostly call
 * overhead: it is probed with `final`, its final encode, and the answer's file comes back as
 * `encoded` (one codec call less per picture; 600 pictures of 48×48: 1.6 → 1.3 s).
 *
 * With a `ceiling`, a search whose answer cannot be a JPEG below it ends without one (undefined):
 * when a failing probe's file, scaled from the proxy to the picture, reaches the ceiling, the
 * final encode one quality above it, the smallest file the answer can have (a file does not
 * shrink as quality rises), is made once; at or above the ceiling the search stops. Artwork
 * that stays Flate was searched to its answer only to be thrown away (a 1.6 MP picture of an
 * ocrmypdf page: 6 probes, 3.4 s, for a JPEG twice its Flate).
 */
export async function chooseViewQuality(p: Pixels, ppi: number | undefined, aimed: ViewSearch = {}): Promise<ViewQuality | undefined> {
  const { target = VIEW_TARGET, search = FULL_SEARCH, final, ceiling = Infinity } = aimed;
  const proxy = proxyOf(p, search.proxyTiles);
  const scale = viewScale(ppi, proxy.width * proxy.height);
  const width = Math.max(8, Math.round(proxy.width * scale));
  const height = Math.max(8, Math.round(proxy.height * scale));
  const reference = new Ssimulacra2Reference(asSeen(proxy, width, height));
  const exact = proxy === p;
  const aim = aimOnProxy(target, exact);
  const scores = new Map<number, number>();
  const probeWithFinal = exact && p.width * p.height < CALL_COST ? final : undefined;
  const finals = new Map<number, Buffer>();
  const toPicture = (p.width * p.height) / (proxy.width * proxy.height);
  let bytes = 0;
  const measure = async (q: number): Promise<number> => {
    noteProbe(proxy.width * proxy.height);
    const jpeg = probeWithFinal ? await probeWithFinal(q) : await pixelPipeline(proxy).jpeg(probeOptions(jpegOptions(defaultSetting(q)))).toBuffer();
    if (probeWithFinal) finals.set(q, jpeg);
    bytes = jpeg.length;
    const { data, info } = await encodedPipeline(jpeg).raw().toBuffer({ resolveWithObject: true });
    const score = reference.score(asSeen({ data, width: info.width, height: info.height, channels: info.channels }, width, height));
    scores.set(q, fromProxy(score, exact));
    return score;
  };
  const bracket = new Bracket(measure, aim, search.probes);
  let overCeiling = false;
  let confirmed = false;
  const probe = async (q: number): Promise<void> => {
    await bracket.probe(q);
    const { lo, hi } = bracket;
    if (lo === q && !confirmed && final && bytes * toPicture >= ceiling && hi - lo > 1) {
      // Once only: where the scaled probe misjudged, the search goes on with this file at hand.
      confirmed = true;
      const floor = finals.get(lo + 1) ?? (await final(lo + 1));
      finals.set(lo + 1, floor);
      overCeiling = floor.length >= ceiling;
    }
  };
  try {
    const full = search.probes === Infinity;
    await probe(Math.min(MAX_QUALITY - 1, Math.max(MIN_QUALITY, search.start ?? PROBE_QUALITY)));
    if (bracket.hasLeft && !bracket.done && !overCeiling) {
      const { lo, hi } = bracket;
      const step = full ? PROBE_STEP : START_STEP;
      await probe(hi < MAX_QUALITY ? Math.max(lo + 1, hi - step) : Math.min(hi - 1, lo + step));
    }
    while (!bracket.done && !overCeiling) await probe(full ? secantProbe(bracket) : (bracket.lo + bracket.hi) >> 1);
    if (overCeiling) return undefined;
    // MAX_QUALITY is the answer unprobed when the quality below it failed: its score is not known.
    const { hi } = bracket;
    return { quality: hi, encoded: finals.get(hi), score: scores.get(hi) };
  } finally {
    // Its memory serves the next picture's reference at once instead of after a collection.
    reference.dispose();
  }
}

/** Second probe of a search with a start: this far below a start that passed, above one that failed. */
const START_STEP = 4;

/**
 * Perceived quality (SSIMULACRA2 points) lost by replacing `original`, drawn at `ppi`, with
 * `resampled` (same placement, other pixel size), both as seen at VIEW_PPI: asSeen streams the
 * samples into the views, scored whole up to MAX_VIEW_PIXELS and on the same tiles of both beyond
 * (a view can be tens of megapixels). An estimate, not a bound: no proxy margin is added, which
 * would raise every resampled picture's JPEG target by it.
 */
export function resamplingLoss(original: Pixels, resampled: Pixels, ppi: number | undefined): number {
  const scale = viewScale(ppi, original.width * original.height);
  const width = Math.max(8, Math.round(original.width * scale));
  const height = Math.max(8, Math.round(original.height * scale));
  const [a, b] = [asSeen(original, width, height), asSeen(resampled, width, height)];
  const whole = width * height <= MAX_VIEW_PIXELS;
  return Math.max(0, 100 - ssimulacra2(whole ? a : proxyOf(a), whole ? b : proxyOf(b)));
}

/**
 * 1- or 3-channel pixels as a renderer shows them at `W`×`H`, modelled on poppler: reduced, each
 * screen pixel is the plain average of the image pixels it covers (columns ⌊x·w/W⌋ to
 * ⌊(x+1)·w/W⌋, rows likewise), the most revealing of the usual scalers (smoother kernels hide
 * more JPEG noise); magnified under 4×, it is interpolated bilinearly. This predicted pdftoppm's
 * pages to about 0.001 luma SSIM.
 */
export function asSeen(p: Pixels, W: number, H: number): Pixels {
  const magnified = p.width > 1 && p.height > 1 && W > p.width && H > p.height && W < 4 * p.width && H < 4 * p.height;
  return { data: magnified ? bilinear(p, W, H) : box(p, W, H), width: W, height: H, channels: p.channels };
}

/**
 * The sample a float32 view value rounds to: the views were float32 planes rounded at the end,
 * and the float32 step can tip a value onto a half.
 */
function seen(v: number): number {
  return Math.round(Math.fround(v));
}

/** Source spans [x0, x1) of `W` area-average cells over `w` samples (repeating samples where the size grows). */
function spans(w: number, W: number): Spans {
  const x0 = new Int32Array(W);
  const x1 = new Int32Array(W);
  let widest = 1;
  for (let x = 0; x < W; x++) {
    x0[x] = Math.min(w - 1, Math.floor((x * w) / W));
    x1[x] = Math.max(x0[x] + 1, Math.floor(((x + 1) * w) / W));
    widest = Math.max(widest, x1[x] - x0[x]);
  }
  return { x0, x1, widest };
}

/** Largest integer a float32 holds exactly with every integer below it. */
const FLOAT32_EXACT = 2 ** 24;

/**
 * Area-average samples, channels interleaved, rounded. Each cell's sum is taken down the columns
 * first, then across (boxAverage): while no cell can sum past FLOAT32_EXACT this is the same
 * integer the row-by-row float32 sums gave, so the same view; larger cells keep that order
 * (boxInRowOrder).
 */
function box(p: Pixels, W: number, H: number): Uint8Array {
  const { data, width: w, height: h, channels: c } = p;
  const xs = spans(w, W);
  const ys = spans(h, H);
  if (255 * xs.widest * ys.widest > FLOAT32_EXACT) return boxInRowOrder(p, xs, ys);
  return boxAverage(data, { w, c }, xs, ys);
}

/** box for cells whose sums pass FLOAT32_EXACT: each source row's cell sum added to a float32 sum in row order, as the view was defined. */
function boxInRowOrder(p: Pixels, xs: Spans, ys: Spans): Uint8Array {
  const { data, width: w, channels: c } = p;
  const { x0, x1 } = xs;
  const W = x0.length;
  const row = new Float32Array(W * c);
  const out = new Uint8Array(W * ys.x0.length * c);
  for (let r = 0; r < ys.x0.length; r++) {
    const a = ys.x0[r];
    const b = ys.x1[r];
    row.fill(0);
    for (let i = a; i < b; i++) {
      const base = i * w * c;
      for (let x = 0; x < W; x++) {
        for (let k = 0; k < c; k++) {
          let sum = 0;
          for (let j = base + x0[x] * c + k, e = base + x1[x] * c; j < e; j += c) sum += data[j];
          row[x * c + k] += sum;
        }
      }
    }
    for (let x = 0; x < W; x++) for (let k = 0; k < c; k++) out[(r * W + x) * c + k] = seen(row[x * c + k] / ((b - a) * (x1[x] - x0[x])));
  }
  return out;
}

/** Bilinear magnification of interleaved samples, pixel centres aligned, rounded (bilinearMagnify, given the view's columns). */
function bilinear(p: Pixels, W: number, H: number): Uint8Array {
  const { width: w, height: h, channels: c } = p;
  const xi = new Int32Array(W);
  const xf = new Float32Array(W);
  for (let x = 0; x < W; x++) {
    const sx = Math.min(w - 1, Math.max(0, ((x + 0.5) * w) / W - 0.5));
    xi[x] = Math.min(w - 2, Math.floor(sx));
    xf[x] = sx - xi[x];
  }
  return bilinearMagnify(p.data, { w, h, c }, { xi, xf }, H);
}
