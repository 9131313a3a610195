import { PngRowFilter } from '@napi-rs/image';
import sharp from 'sharp';
import { PROXY_TILES, proxyPixels } from './proxy.ts';
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
 * Below this many pixels (a 256×256 picture) nothing is called noise: a palette search there
 * costs milliseconds, and a small photo deflates little for want of redundancy, not for being
 * noise (a 64×43 photo: 8.5 KB lossless, 3.4 KB as a palette at SSIM 0.997).
 */
const NOISE_FROM_PIXELS = 65_536;

/**
 * Whether the pixels are incompressible noise, decided in a fraction of a second from a sample
 * (the tile proxy of the quality searches, at most about 1 MP): fast deflate with adaptive row
 * filters, compared with the raw bytes. Uniform noise scores about 1.0; the noisiest camera
 * photos stay well below 0.8, and anything with structure far below.
 */
export async function incompressible(sample: Pixels): Promise<boolean> {
  if (sample.width * sample.height < NOISE_FROM_PIXELS) return false;
  const raw = sample.width * sample.height * sample.channels;
  const png = await sharp(sample.data, { raw: { width: sample.width, height: sample.height, channels: sample.channels as 1 | 2 | 3 | 4 } })
    .png({ compressionLevel: 1, adaptiveFiltering: true })
    .toBuffer();
  return png.length >= raw * INCOMPRESSIBLE_RATIO;
}

/**
 * How much one picture's JPEG quality search and encode may spend. `probes`: most trial encodes
 * (each on the proxy, scored); when they run out the search answers the lowest quality seen to
 * pass (it goes on while none has, or while the answer would take 4:4:4 chroma: see searchDone),
 * so a smaller budget costs bytes, never quality. `proxyTiles`: size of the
 * proxy. `start`: a quality known to suit similar pictures, probed first. `fastEncode`: the final
 * encode skips trellis quantisation and the progressive scan search (5-10 times faster on large
 * scans, 2-13 % more bytes); its pixels are then at least as close to the original as the probed
 * ones, which had trellis.
 */
export interface SearchBudget {
  probes: number;
  proxyTiles: number;
  start?: number;
  fastEncode: boolean;
  /**
   * Probes it will probably ask for next may start ahead of need while a core is spare
   * (spare-core.ts): a single image's search. A document's pictures fill the cores themselves
   * (lanes.ts).
   */
  ahead?: boolean;
  /**
   * The JPEG form (tables, chroma) is chosen per picture (encode.ts: chooseForm): a single
   * image's search. A document's pictures keep mozjpeg's default form: the form's probes would
   * add a third to every full search, outside the document budget.
   */
  forms?: boolean;
  /**
   * With forms: jpegli's among them (jpegli.ts). Not where the output is encoded from other pixels
   * than the searched ones (a kept profile other than sRGB: libvips's pipeline encodes those).
   */
  jpegli?: boolean;
  /**
   * The caller encodes the answer from the searched pixels with finalJpeg: with `ahead`, that
   * encode may begin while the search's last probe decides (encode.ts: encodeAhead).
   */
  encodesAnswer?: boolean;
  /** With encodesAnswer: the caller encodes a lower quality when the answer's file is over these bytes (universal.ts: the size rule). */
  answerWithin?: number;
}

/** A search with nothing held back: every normal document picture's. */
export const FULL_SEARCH: SearchBudget = { probes: Infinity, proxyTiles: PROXY_TILES, fastEncode: false };
/** A single image's search: nothing held back, its form chosen (jpegli's too), and work ahead of need on a spare core. */
export const IMAGE_SEARCH: SearchBudget = { ...FULL_SEARCH, ahead: true, forms: true, jpegli: true };

/** One picture of a document, as the document budget sees it before decoding anything. */
export interface DocumentPicture {
  /** Size the picture is searched and encoded at (after any resampling). */
  width: number;
  height: number;
  /** Pixels decoded: the picture as stored. */
  decoded: number;
  /**
   * Pictures with the same class are alike to the search: same size, channels, source codec
   * and quantisation, same placement (pages from one scanner, photos from one camera).
   */
  similar: string;
}

/**
 * The document-wide budget (PDF and Office). A picture costs its searches, probes × (proxy
 * pixels + CALL_COST), plus its final encode, pixels × ENCODE_EFFORT (FAST_ENCODE_EFFORT) +
 * CALL_COST, in "probe pixels" (a probe pixel costs about 50-70 decoded pixels here: a trellis
 * encode, a decode, the page view and SSIM in JS). The budget is DOCUMENT_BASE (a document of up
 * to about eight large pictures: every one fully searched, as before) plus DOCUMENT_SHARE of the
 * document's size (decoded pixels + CALL_COST per picture: what any tool has to decode and
 * encode once). Over budget, the plan gives up, in this order, until it fits:
 * 1. `reuse`: in a class of similar pictures, the first SEARCHED_PER_CLASS are searched fully;
 *    the others start from the class's quality and get REUSE_PROBES (the start, and one step),
 *    or a single probe for a picture of fewer pixels than CALL_COST: its probes are mostly call
 *    overhead (600 pictures of 48×48: 2.3 s → 1.8 s), and a quality step moves a few bytes (+0.9 %);
 * 2. `small proxy`: every search runs on SMALL_PROXY_TILES tiles (about ¼ MP) instead of 64;
 * 3. `fast encode`: every final encode is the fast one (see SearchBudget);
 * 4. `single`: pictures past the budget, in document order, get one probe: the class's quality
 *    verified once (or a typical first guess; more only while none passes), then one encode.
 * From `reuse` on, the compressors also skip a picture that cannot gain: a JPEG kept at its size
 * and already as coarse as its class's quality is not decoded at all.
 */
export const DOCUMENT_BASE = 64e6;
export const DOCUMENT_SHARE = 0.05;
/** Fixed cost of one codec call (pipeline set-up, small buffers; 2-4 ms measured), in probe pixels. */
export const CALL_COST = 16_000;
/** mozjpeg's final encode (trellis, progressive scan search) and the fast one, per pixel, in probe pixels. */
const ENCODE_EFFORT = 0.8;
const FAST_ENCODE_EFFORT = 0.1;
export const FULL_PROBES = 6;
export const SEARCHED_PER_CLASS = 2;
export const REUSE_PROBES = 3;
export const TINY_REUSE_PROBES = 1;
export const SMALL_PROXY_TILES = 16;

export type DocumentLevel = 'full' | 'reuse' | 'small proxy' | 'fast encode' | 'single';
const LEVELS: DocumentLevel[] = ['full', 'reuse', 'small proxy', 'fast encode', 'single'];

export interface DocumentPlan {
  level: DocumentLevel;
  /** Work of the plan and the budget, in probe pixels. */
  cost: number;
  budget: number;
  /** Per picture, in the order given. */
  searches: SearchBudget[];
}

/** The budget of a document with these pictures. */
export function documentBudget(pictures: DocumentPicture[]): number {
  return DOCUMENT_BASE + DOCUMENT_SHARE * pictures.reduce((sum, p) => sum + p.decoded + CALL_COST, 0);
}

/** The first level (the most work) that fits the budget, and each picture's search at that level. */
export function planDocument(pictures: DocumentPicture[]): DocumentPlan {
  const budget = documentBudget(pictures);
  let plan: DocumentPlan | undefined;
  for (const level of LEVELS) {
    plan = planAt(level, pictures, budget);
    if (plan.cost <= budget) break;
  }
  return plan!;
}

function planAt(level: DocumentLevel, pictures: DocumentPicture[], budget: number): DocumentPlan {
  const rank = LEVELS.indexOf(level);
  const proxyTiles = rank >= 2 ? SMALL_PROXY_TILES : PROXY_TILES;
  const fastEncode = rank >= 3;
  const seen = new Map<string, number>();
  let cost = 0;
  const searches = pictures.map((p): SearchBudget => {
    const nth = seen.get(p.similar) ?? 0;
    seen.set(p.similar, nth + 1);
    const perProbe = proxyPixels(p.width, p.height, proxyTiles) + CALL_COST;
    const encode = p.width * p.height * (fastEncode ? FAST_ENCODE_EFFORT : ENCODE_EFFORT) + CALL_COST;
    let probes = rank >= 1 && nth >= SEARCHED_PER_CLASS ? (p.width * p.height < CALL_COST ? TINY_REUSE_PROBES : REUSE_PROBES) : FULL_PROBES;
    if (rank >= 4 && cost + probes * perProbe + encode > budget) probes = 1;
    cost += probes * perProbe + encode;
    return { probes: probes === FULL_PROBES ? Infinity : probes, proxyTiles, fastEncode };
  });
  return { level, cost, budget, searches };
}

/** What the search of one picture found: its quality, and for a resampled picture what resampling cost. */
export interface Finding {
  quality?: number;
  loss?: number;
}

/**
 * What the full searches of a document found, by class of similar pictures: where a search under
 * a reduced budget starts, whether a JPEG is already coarser than its class would get, and (PDF)
 * how much SSIM resampling spends on the class. Pictures are worked on several at a time
 * (lanes.ts), so a limited search must not depend on which pictures happen to have finished:
 * it waits for the full searches that precede it in document order, those of its own class or,
 * when its class has none, those of the whole document. The output is then the same whatever
 * the number of lanes and however the threads are scheduled.
 */
export class ClassQualities {
  private readonly settled: Promise<Finding>[];
  private readonly settle: ((f: Finding) => void)[] = [];
  /** The full searches, in document order: all of them, and by class. */
  private readonly full: number[] = [];
  private readonly fullByClass = new Map<string, number[]>();

  /** One entry per picture of the plan, in document order. */
  constructor(private readonly pictures: readonly { similar: string; search: SearchBudget }[]) {
    this.settled = pictures.map((_, i) => new Promise<Finding>((resolve) => (this.settle[i] = resolve)));
    pictures.forEach((p, j) => {
      if (p.search.probes !== Infinity) return;
      this.full.push(j);
      const own = this.fullByClass.get(p.similar) ?? [];
      own.push(j);
      this.fullByClass.set(p.similar, own);
    });
  }

  /**
   * Runs picture i's work with its share of the budget: its search (from knownFor's quality when
   * its probes are limited), what the full searches before it found, and where to report what it
   * finds. The picture counts as done when `work` settles, whatever the outcome.
   */
  async run<T>(i: number, work: (picture: BudgetedPicture) => Promise<T>): Promise<T> {
    let found: Finding = {};
    try {
      const known = await this.knownFor(i);
      const planned = this.pictures[i].search;
      const search = planned.probes === Infinity ? planned : { ...planned, start: known.quality };
      return await work({ search, known, found: (f) => (found = f) });
    } finally {
      this.settle[i](found);
    }
  }

  /**
   * For picture i under a limited search: the median quality and the largest resampling
   * loss of the full searches before it in its class, or the document's median quality when its
   * class has none yet. Nothing for a full search, which stands on its own.
   */
  private async knownFor(i: number): Promise<Finding> {
    const own = this.pictures[i];
    if (own.search.probes === Infinity) return {};
    // Index lists, so a document of thousands of pictures does not scan them all for each one.
    const before = (list: number[]) => Promise.all(list.filter((j) => j < i).map((j) => this.settled[j]));
    const classFound = await before(this.fullByClass.get(own.similar) ?? []);
    const quality = median(defined(classFound.map((f) => f.quality)));
    const losses = defined(classFound.map((f) => f.loss));
    const loss = losses.length ? Math.max(...losses) : undefined;
    if (quality !== undefined) return { quality, loss };
    const documentFound = await before(this.full);
    return { quality: median(defined(documentFound.map((f) => f.quality))), loss };
  }
}

/** One picture's share of its document's budget, as its compressor sees it (ClassQualities.run). */
export interface BudgetedPicture {
  /** The plan's search, starting from the class's quality when its probes are limited. */
  search: SearchBudget;
  /** What the full searches before it found (limited searches only). */
  known: Finding;
  /** Reports what this picture's search found, for the limited searches after it. */
  found(f: Finding): void;
}

function defined(list: (number | undefined)[]): number[] {
  return list.filter((v): v is number => v !== undefined);
}

/**
 * The median quality, rounded down between two middle values: a start that fails costs a probe,
 * one that passes too easily costs bytes (the search answers the lowest quality seen to pass).
 */
function median(list: number[]): number | undefined {
  if (list.length === 0) return undefined;
  const sorted = [...list].sort((a, b) => a - b);
  return Math.floor((sorted[(sorted.length - 1) >> 1] + sorted[sorted.length >> 1]) / 2);
}
