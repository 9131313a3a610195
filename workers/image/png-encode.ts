import { losslessCompressPng } from '@napi-rs/image';
import sharp from 'sharp';
import type { Sharp } from 'sharp';
import { incompressible, oxipngFilters, quantiseEffort } from './budget.ts';
import { carryColourChunks, paletteEntries, pixelAndColourChunks } from './png-chunks.ts';
import { proxyOf } from './proxy.ts';
import { aimOnProxy, fromProxy, PERCEIVED_TARGET } from './perceived.ts';
import type { Pixels } from './ssim.ts';
import { Ssimulacra2Reference } from './ssimulacra2.ts';
import { estimatedProgress, type Toward } from '../shared/progress.ts';
import { phase } from '../shared/profile.ts';
import { spareCore } from '../shared/spare-core.ts';

export interface PngEncoded {
  data: Buffer;
  width: number;
  height: number;
  /** The perceived quality (SSIMULACRA2, predicted at full resolution) of a palette; absent for lossless output. */
  score?: number;
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
  /**
   * Whether the palette search may quantise, while a core is spare, the palettes its next step
   * may ask for (the default); false: only those it asks for. The answer is the same either way.
   */
  ahead?: boolean;
  /** The encode's progress, 0 to 1, and what it is doing: the palette search, or oxipng. */
  progress?: (fraction: number, step: 'analyzing' | 'encoding', toward?: Toward) => void;
}

/**
 * The perceived quality a palette must keep (SSIMULACRA2 at full resolution; with transparency,
 * the worse of a dark and a light background): every lossy encode's. A palette's flaws are
 * isolated dither speckles and steps in smooth gradients, which the metric's artefact maps see.
 */
export const PNG_PALETTE_TARGET = PERCEIVED_TARGET;
/**
 * libimagequant qualities tried; the smallest result that reaches the target wins (see
 * lossyCandidate). Low ones for pictures of few colours or that quantise well (a palette photo
 * passes at 30, 8.7 % smaller than at 50; coloured text 5.1 %), 5 apart near the top, where
 * gradients and anti-aliased edges pass (a sky gradient at 90, 6.8 % smaller than at 95; a logo at 85,
 * 5.1 %).
 */
const LOSSY_QUALITIES = [30, 40, 50, 65, 80, 85, 90, 95];
/** libimagequant's largest palette: a result with this many colours is what any higher quality gives too. */
const MAX_COLOURS = 256;

/**
 * A lossless candidate is optimised only when it could beat the palette candidate: its size is
 * predicted from a fast deflate of the tile proxy, and oxipng has never been seen to take more
 * than this fraction off such a prediction.
 */
const OXIPNG_BEST_GAIN = 0.45;

/**
 * PNG of a pipeline, the smallest of several candidates, each optimised losslessly by oxipng
 * (colour type, bit depth and palette reductions when exact, the row filters the work budget
 * allows, libdeflate at its strongest). `lossless` keeps every pixel (16-bit images stay 16-bit
 * unless the low bytes carry nothing). `lossy` adds a libimagequant palette at the lowest quality
 * whose SSIM reaches PNG_TARGET_SSIM, searched on the tile proxy and confirmed at full resolution,
 * and keeps whichever is smaller: a palette never makes a flat or 1-bit image bigger.
 * Incompressible noise (see budget.ts) skips both searches: the pixels are stored with one fast
 * deflate, and the callers' never-larger rule keeps the input when that is no smaller.
 */
export async function encodePng(img: Sharp, mode: 'lossy' | 'lossless', opts: PngEncodeOptions = {}): Promise<PngEncoded> {
  const { data, info } = await phase('decode', () => img.clone().raw().toBuffer({ resolveWithObject: true }));
  const size = { width: info.width, height: info.height };
  const steps = new Steps(info.width * info.height, mode, opts.progress);
  const optimise = (png: Buffer) => steps.optimise(() => phase('encode', () => optimisePng(opts.colourChunksFrom ? carryColourChunks(opts.colourChunksFrom, png) : png)));
  // oxipng is stricter than libspng on some files: those take the decode and re-encode path. The
  // input's pixel chunks are copied out only when this candidate is made (a copy of the whole file).
  const direct = async () => {
    const source = opts.unchanged && opts.colourChunksFrom ? pixelAndColourChunks(opts.colourChunksFrom) : undefined;
    return source ? await steps.optimise(() => phase('encode', () => optimisePng(source))).catch(() => undefined) : undefined;
  };
  const search = (p: Pixels) => steps.search(() => phase('search', () => lossyCandidate(p, opts.ahead ?? true)));
  // More bytes than one per sample: a 16-bit image, kept deep when lossless.
  if (data.length > info.width * info.height * info.channels) {
    const deep = (await direct()) ?? (await optimise(await img.clone().png({ compressionLevel: 0 }).toBuffer()));
    if (mode === 'lossless') return { data: deep, ...size };
    const eight = await img.clone().raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    const lossy = await search({ data: eight.data, ...size, channels: eight.info.channels });
    const best = lossy && (await optimise(lossy.png));
    return best && best.length < deep.length ? { data: best, ...size, score: lossy.score } : { data: deep, ...size };
  }
  const pixels: Pixels = { data, ...size, channels: info.channels };
  const proxy = proxyOf(pixels);
  if (await incompressible(proxy)) {
    // Noise: nothing lossless saves anything, and a palette search on millions of distinct colours
    // is the slowest thing libimagequant does (minutes) for a result no one asked for. The fast
    // encode is the only candidate; the callers keep the input when it is no smaller.
    const stored = await phase('encode', () => fromRaw(pixels).png({ compressionLevel: 1 }).toBuffer());
    return { data: opts.colourChunksFrom ? carryColourChunks(opts.colourChunksFrom, stored) : stored, ...size };
  }
  // Two colours at most (a bilevel scan, line art): the lossless palette is already one bit a
  // pixel, and no quality can take a colour away without losing the picture.
  const lossy = mode === 'lossy' && !atMostTwoColours(pixels) ? await search(pixels) : undefined;
  const palette = lossy && (await optimise(lossy.png));
  if (palette && palette.length < (await predictedLossless(proxy, pixels)) * (1 - OXIPNG_BEST_GAIN)) return { data: palette, ...size, score: lossy.score };
  const lossless = (await direct()) ?? (await optimise(await fromRaw(pixels).png({ compressionLevel: 0 }).toBuffer()));
  return palette && palette.length < lossless.length ? { data: palette, ...size, score: lossy.score } : { data: lossless, ...size };
}

/** Whether every pixel is one of at most two colours (all channels, alpha included). */
export function atMostTwoColours({ data, channels: c }: Pixels): boolean {
  let second = -1;
  for (let o = c; o < data.length; o += c) {
    let first = true;
    for (let k = 0; k < c; k++) if (data[o + k] !== data[k]) first = false;
    if (first) continue;
    if (second < 0) {
      second = o;
      continue;
    }
    for (let k = 0; k < c; k++) if (data[o + k] !== data[second + k]) return false;
  }
  return true;
}

/**
 * The encode's steps on one progress scale, each given its share of the predicted whole: a lossy
 * encode's palette search and up to two oxipng runs (the palette's, the lossless candidate's),
 * a lossless one's single run. A step that is skipped leaves its share to the caller's next report.
 */
class Steps {
  private at = 0;
  private readonly searchMs: number;
  private readonly optimiseMs: number;
  private readonly totalMs: number;

  constructor(
    pixels: number,
    mode: 'lossy' | 'lossless',
    private readonly report: PngEncodeOptions['progress'],
  ) {
    this.searchMs = SEARCH_MS + (pixels * SEARCH_NS_PER_PIXEL) / 1e6;
    this.optimiseMs = (pixels * OXIPNG_NS_PER_PIXEL) / 1e6;
    this.totalMs = mode === 'lossy' ? this.searchMs + 2 * this.optimiseMs : this.optimiseMs;
  }

  search<T>(work: () => Promise<T>): Promise<T> {
    return this.step(work, this.searchMs, 'analyzing');
  }

  optimise<T>(work: () => Promise<T>): Promise<T> {
    return this.step(work, this.optimiseMs, 'encoding');
  }

  private step<T>(work: () => Promise<T>, predictedMs: number, name: 'analyzing' | 'encoding'): Promise<T> {
    const { report } = this;
    if (!report) return work();
    const from = this.at;
    this.at = Math.min(1, from + predictedMs / this.totalMs);
    return estimatedProgress(work, { from, to: this.at, predictedMs }, (f, toward) => report(f, name, toward));
  }
}

/**
 * What the steps are predicted to take, for progress only: a palette search scores a few 1 MP
 * proxies (1.4-2.4 s measured on 1.4-12 MP pictures), and oxipng took 140-810 ns a pixel with its
 * default filters (a scan, a logo, a 12 MP photo-like picture: by how well the content deflates).
 */
const SEARCH_MS = 1200;
const SEARCH_NS_PER_PIXEL = 100;
const OXIPNG_NS_PER_PIXEL = 350;

/** Bytes of the whole image losslessly at fast deflate, scaled up from the proxy. */
async function predictedLossless(proxy: Pixels, full: Pixels): Promise<number> {
  const png = await fromRaw(proxy).png({ compressionLevel: 6, adaptiveFiltering: true }).toBuffer();
  return (png.length * full.width * full.height) / (proxy.width * proxy.height);
}

/**
 * oxipng's lossless optimisation with the row filters the work budget allows for the image's
 * size (image/budget.ts); pixels and ancillary chunks are untouched.
 */
export async function optimisePng(png: Buffer): Promise<Buffer> {
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  const filter = oxipngFilters(width * height, png[24], png[25] === 3);
  return losslessCompressPng(png, filter ? { force: true, filter } : { force: true });
}

function fromRaw(p: Pixels): Sharp {
  return sharp(p.data, { raw: { width: p.width, height: p.height, channels: p.channels as 1 | 2 | 3 | 4 } });
}

/**
 * The smallest palette PNG whose perceived quality reaches PNG_PALETTE_TARGET, among
 * LOSSY_QUALITIES, and its predicted score. The lowest quality is tried first (the answer of
 * many pictures), then the lowest that passes is found by bisection (the score rises with
 * quality, give or take dithering). It is not always the smallest file: on screenshots and
 * graphics with gradients a small palette dithers the gradients into noise that deflates badly,
 * and a larger palette is both closer and smaller (a UI screenshot: 28.9 KB at q50, 21.7 KB at
 * q95). So every quality from there upward is tried while the files shrink and the palette is
 * not yet full (a larger file ends the scan before it is scored), on the tile proxy (each probe
 * there costs about 1 MP whatever the image's size; for a large image the highest quality is
 * tried right after the lowest, and when both fail the search ends). The smallest passing one is encoded at full resolution and its tiles confirmed,
 * one quality up while they fall short (the proxy's palette sees fewer colours than the whole image).
 * The search is a chain of quantise (libvips's thread) then score (the job's thread): with
 * `mayAhead` and a core spare, the palettes its next step may ask for are quantised while one is
 * scored, and the first while the reference is prepared (the logo: 1.76 → 1.47 s, the same bytes).
 */
async function lossyCandidate(p: Pixels, mayAhead: boolean): Promise<{ png: Buffer; score: number } | undefined> {
  const proxy = proxyOf(p);
  const exact = proxy === p;
  const aim = aimOnProxy(PNG_PALETTE_TARGET, exact);
  const top = LOSSY_QUALITIES.length - 1;
  const quantised = new Map<number, Promise<Buffer>>();
  const scored = new Map<number, { score: number; png: Buffer }>();
  const reference = new Ssimulacra2Reference(proxy);
  try {
    const png = (i: number) => {
      let made = quantised.get(i);
      if (!made) {
        made = palettePng(proxy, LOSSY_QUALITIES[i]);
        quantised.set(i, made);
      }
      return made;
    };
    const score = async (i: number) => {
      let r = scored.get(i);
      if (!r) {
        const data = await png(i);
        r = { png: data, score: await scorePng(data, proxy.channels, { reference, aim }) };
        scored.set(i, r);
      }
      return r;
    };
    // With a core spare, a palette the next step may ask for is quantised while this one is scored.
    const ahead = (...next: number[]) => {
      if (!mayAhead || !spareCore()) return;
      for (const i of next) if (i >= 0 && i <= top) png(i).catch(() => undefined);
    };
    const pass = (r: { score: number }) => r.score >= aim;
    const found = (r: { score: number; png: Buffer }) => ({ png: r.png, score: fromProxy(r.score, exact) });
    // The first palette is quantised while the reference is prepared: both are always needed.
    png(0).catch(() => undefined);
    reference.prepare();
    if (!exact) ahead(top);
    // A proxy stands for a large image: when even the top quality fails there, nothing will.
    const lowest = pass(await score(0));
    if (!lowest && !exact && !pass(await score(top))) return undefined;
    // The bracket [fails, passes] as indices into LOSSY_QUALITIES; top + 1: none known to pass.
    let fails = lowest ? -1 : 0;
    let passes = lowest ? 0 : scored.has(top) ? top : top + 1;
    while (passes - fails > 1) {
      const i = (fails + passes) >> 1;
      ahead(i - fails > 1 ? (fails + i) >> 1 : i + 1, passes - i > 1 ? (i + passes) >> 1 : passes + 1);
      if (pass(await score(i))) passes = i;
      else fails = i;
    }
    if (passes > top) return undefined;
    let best = passes;
    // A full palette at a quality is the palette of every higher one too.
    for (let i = best + 1; i <= top && paletteEntries(scored.get(best)!.png) < MAX_COLOURS; i++) {
      if ((await png(i)).length >= scored.get(best)!.png.length) break;
      ahead(i + 1);
      if (pass(await score(i))) best = i;
    }
    if (exact) return found(scored.get(best)!);
    for (const quality of LOSSY_QUALITIES.slice(best)) {
      const data = await palettePng(p, quality);
      const r = { png: data, score: await scorePng(data, p.channels, { reference, aim, view: proxyOf }) };
      if (pass(r)) return found(r);
    }
    return undefined;
  } finally {
    reference.dispose();
  }
}

/** How a palette PNG is judged: against `reference`, through `view` (the tiles the reference was made of), with `aim` the score that passes. */
interface PaletteJudge {
  reference: Ssimulacra2Reference;
  aim: number;
  view?: (q: Pixels) => Pixels;
}

/** A palette PNG of `p` at a quantisation quality. */
function palettePng(p: Pixels, quality: number): Promise<Buffer> {
  // A middle deflate level: enough to rank the candidates by size; oxipng compresses the one kept.
  return fromRaw(p).png({ palette: true, quality, effort: quantiseEffort(p.width * p.height), dither: 1, compressionLevel: 6 }).toBuffer();
}

/** The score of a palette PNG's decode; a score under `aim` is only known to be under it (Ssimulacra2Reference.score). */
async function scorePng(png: Buffer, channels: number, { reference, aim, view = (q) => q }: PaletteJudge): Promise<number> {
  const decoded = await decodeAs(png, channels);
  return decoded === undefined ? -Infinity : reference.score(view(decoded), aim);
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
