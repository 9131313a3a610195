import sharp from 'sharp';
import type { CreateRaw, JpegOptions, Sharp } from 'sharp';
import { IMAGE_SEARCH, type SearchBudget } from './budget.ts';
import { PROXY_TILES, proxyOf } from './proxy.ts';
import { spareCore } from '../shared/spare-core.ts';
import { isGrey, toGrey } from './door.ts';
import { bin2x2, ssimOfLuma, luma, type Pixels } from './ssim.ts';

/**
 * The perceptual target of automatic JPEG quality: the mean luma SSIM (8×8 windows, full
 * resolution, see ssim.ts) the encoded image must reach against the pixels it was made from.
 */
export const JPEG_TARGET_SSIM = 0.98;
/**
 * The proxy scores a little higher than the full image (its tiles miss some of the hardest
 * areas); measured gap on camera photos ≤ 0.0006, so every search on it (the JPG compressor's,
 * the universal compressor's target and floor) aims this much higher.
 */
export const PROXY_MARGIN = 0.0007;
/**
 * Quality bounds of every JPEG search (images, PDF and Office pictures): below 40 blocking shows
 * whatever SSIM says (or when a reader zooms into a page); above 95 bytes explode for nothing.
 */
export const MIN_QUALITY = 40;
export const MAX_QUALITY = 95;
/**
 * Chroma is kept at full resolution from this quality up, where fine colour detail is part of the
 * promise, but only in images that have fine colour detail (see hasFineChroma): elsewhere 4:4:4
 * costs up to 60 % more bytes for nothing the eye or the luma metric sees.
 */
const FULL_CHROMA_FROM = 90;
/**
 * An image has fine colour detail when 2×2 chroma averaging (4:2:0) moves more than this share of
 * its pixels (one in 200) by more than FRINGE levels of |ΔCb| + |ΔCr|: coloured text, thin
 * coloured lines, saturated small features. Measured on the quality search's proxy: camera photos
 * ≤ 0.01 %, photos dithered to 256 colours 0.24–0.32 % (noise, not detail), green text on white
 * 1.8 %, saturated harbour photos 2.8 %, red text on blue 8 %.
 */
const FINE_CHROMA_SHARE = 0.005;
const FRINGE = 32;

/**
 * Quantisation tables: mozjpeg's default (3, the ImageMagick/Klein–Silverstein–Carney set, tuned
 * for photos: it quantises the highest frequencies hardest) or the JPEG standard's own example
 * tables (0, Annex K: what libjpeg, ImageMagick and most cameras write). Where the picture's
 * detail is fine, high-frequency luma (the dither of an image saved as 256 colours, grain, fine
 * texture) table 3 only keeps it at quality 93-97, and table 0 reaches the same SSIM at 20 % fewer
 * bytes (bali.tif, a dithered BMP); on ordinary photos the two are within a few per cent.
 */
export type QuantTable = 0 | 3;
/** What one JPEG encode is set to. */
export interface JpegSetting {
  quality: number;
  table: QuantTable;
}
/**
 * The standard tables are also searched when table 3 needs at least this quality: below it the
 * picture has little fine detail and the two tables are within a few per cent of each other.
 */
const STANDARD_TABLES_FROM = 88;

export interface JpegAutoOptions {
  /** Carry EXIF, ICC and XMP over from the pipeline's input. */
  keepMetadata?: boolean;
  /** With keepMetadata: the embedded ICC profile is converted into (sRGB pixels, no profile) instead of kept (door.ts: profileDecision). */
  convertProfile?: boolean;
  progress?: (percent: number, phase: 'decoding' | 'analyzing' | 'encoding') => void;
  /** Full-resolution luma SSIM to reach instead of JPEG_TARGET_SSIM. */
  targetSsim?: number;
  /** Asked with the chosen setting before the full-size encode; false skips it (encodeJpegAuto then returns null). */
  worthEncoding?: (setting: JpegSetting) => Promise<boolean>;
}

export interface JpegEncoded {
  data: Buffer;
  quality: number;
  table: QuantTable;
  width: number;
  height: number;
}

/**
 * mozjpeg with trellis quantisation and progressive scans, the settings every encode here uses;
 * 4:4:4 chroma from FULL_CHROMA_FROM for images with fine colour detail (`fineChroma`).
 */
export function jpegOptions(quality: number, fineChroma = true, table: QuantTable = 3): JpegOptions {
  return {
    quality,
    mozjpeg: true,
    progressive: true,
    quantisationTable: table,
    chromaSubsampling: fineChroma && quality >= FULL_CHROMA_FROM ? '4:4:4' : '4:2:0',
  };
}

const fineChromaOf = new WeakMap<Uint8Array, boolean>();

/** jpegOptions for these pixels: whether they have fine colour detail is measured once, on their proxy. */
export function jpegOptionsFor(pixels: Pixels, setting: JpegSetting): JpegOptions {
  let fine = fineChromaOf.get(pixels.data);
  if (fine === undefined) {
    fine = hasFineChroma(probesOf(pixels).proxy);
    fineChromaOf.set(pixels.data, fine);
  }
  return jpegOptions(setting.quality, fine, setting.table);
}

/** Whether 4:2:0 would visibly shift colours: the share of pixels FRINGE levels off after 2×2 chroma averaging. */
export function hasFineChroma(p: Pixels): boolean {
  const { data, width, height, channels: c } = p;
  if (c < 3) return false;
  const chroma = (o: number): [number, number] => {
    const [r, g, b] = [data[o], data[o + 1], data[o + 2]];
    return [-0.168736 * r - 0.331264 * g + 0.5 * b, 0.5 * r - 0.418688 * g - 0.081312 * b];
  };
  let off = 0;
  for (let y = 0; y + 1 < height; y += 2) {
    for (let x = 0; x + 1 < width; x += 2) {
      const block = [0, 1, width, width + 1].map((d) => chroma((y * width + x + d) * c));
      const mb = (block[0][0] + block[1][0] + block[2][0] + block[3][0]) / 4;
      const mr = (block[0][1] + block[1][1] + block[2][1] + block[3][1]) / 4;
      for (const [cb, cr] of block) if (Math.abs(cb - mb) + Math.abs(cr - mr) > FRINGE) off++;
    }
  }
  return off > FINE_CHROMA_SHARE * width * height;
}

/**
 * The same quantisation as jpegOptions (trellis included, so the decoded pixels are identical,
 * byte for byte), without mozjpeg's progressive scan search: what a quality probe needs, since
 * only its pixels and its approximate size are used. (sharp keeps mozjpeg's progressive mode, and a
 * truly baseline encode would not do: mozjpeg's trellis decisions depend on the scan layout.)
 */
export function probeOptions(options: JpegOptions): JpegOptions {
  return { ...options, progressive: false, optimiseScans: false, optimiseCoding: false };
}

/**
 * Whether a quality search bracketed by [lo fails, hi passes] may stop, with `left` probes of its
 * budget left: when the bracket is closed, or when the budget is spent and hi is below
 * FULL_CHROMA_FROM. Above it the search goes on whatever its budget: MAX_QUALITY (nothing passed
 * yet) or a quality with 4:4:4 chroma costs far more bytes than a few more probes.
 */
export function searchDone(lo: number, hi: number, left: number): boolean {
  return hi - lo <= 1 || (left <= 0 && hi < FULL_CHROMA_FROM);
}

/**
 * The final encode of a document over its work budget (budget.ts): no trellis quantisation and
 * no progressive scan search, several times faster. Its pixels are at least as close to the
 * original as the trellis-quantised ones a quality probe scored.
 */
export function fastOptions(options: JpegOptions): JpegOptions {
  return { ...options, trellisQuantisation: false, optimiseScans: false };
}

/**
 * What the quality search compares: `full` resolution luma, or `sensor`, luma binned 2×2 for
 * pictures developed from a Bayer sensor (camera RAW). A Bayer sensor records one colour per
 * pixel, so half of a developed image's full-resolution detail is the demosaicing's guess, and
 * two demosaicing algorithms differ from each other by more than any JPEG quality (LibRaw's PPG
 * against dcraw's AHD on the same file: SSIM 0.969-0.994). Scored at full resolution, the search
 * spends its bytes on keeping that guess exactly (q95 4:4:4 on a 12 MP DNG, 6.9 MB).
 */
export type JudgedAt = 'full' | 'sensor';

/**
 * A full-resolution SSIM target as the equivalent target on 2×2-binned luma: half the loss
 * (1 - SSIM). Measured on camera photos, a full-resolution 0.98 reads 0.990-0.995 binned.
 */
export function binnedTarget(target: number): number {
  return 1 - (1 - target) / 2;
}

/**
 * Encodes a pipeline as JPEG at the lowest quality whose SSIM against the pipeline's own pixels
 * reaches JPEG_TARGET_SSIM (or opts.targetSsim). The quality is searched on a proxy of about 1 MP made of full-
 * resolution tiles sampled across the image (a downscaled proxy would hide exactly the
 * artefacts the metric must see), then the full image is encoded once.
 * CMYK inputs come out as sRGB (sharp converts through the embedded or a standard CMYK profile);
 * transparency is flattened onto white. With keepMetadata, EXIF (orientation included), ICC and
 * XMP are carried over and the pixels are not rotated.
 */
export async function encodeJpegAuto(img: Sharp, opts: JpegAutoOptions = {}): Promise<JpegEncoded | null> {
  const progress = opts.progress ?? (() => {});
  const base = img.clone().flatten({ background: '#ffffff' }).toColourspace('srgb');
  progress(10, 'decoding');
  const { data, info } = await base.clone().raw().toBuffer({ resolveWithObject: true });
  progress(30, 'analyzing');
  const target = (opts.targetSsim ?? JPEG_TARGET_SSIM) + PROXY_MARGIN;
  const rgb = { data, width: info.width, height: info.height, channels: info.channels };
  // Grey pictures (door.ts) are searched and encoded as one component.
  const grey = isGrey(rgb);
  const pixels = grey ? toGrey(rgb) : rgb;
  const setting = await chooseJpeg(pixels, target);
  if (opts.worthEncoding && !(await opts.worthEncoding(setting))) return null;
  progress(55, 'encoding');
  const encoder = opts.keepMetadata ? withMetadata(base.clone(), grey || opts.convertProfile === true) : jpegPipeline(pixels);
  if (grey) encoder.toColourspace('b-w');
  const out = await encoder.jpeg(jpegOptionsFor(pixels, setting)).toBuffer({ resolveWithObject: true });
  return { data: out.data, ...setting, width: out.info.width, height: out.info.height };
}

function rawOf(info: { width: number; height: number; channels: number }): CreateRaw {
  return { width: info.width, height: info.height, channels: info.channels as 1 | 2 | 3 | 4 };
}

/**
 * The input's metadata on the output: everything, or EXIF and XMP without the ICC profile (the
 * pixels then leave in sRGB, the profile-less default; an RGB profile cannot describe grey pixels).
 */
function withMetadata(img: Sharp, dropProfile: boolean): Sharp {
  return dropProfile ? img.keepExif().keepXmp() : img.keepMetadata();
}

/**
 * The setting of the smallest JPEG reaching the target: the quality search with mozjpeg's tables,
 * and for pictures with fine detail (STANDARD_TABLES_FROM) with the standard tables too, the two
 * answers compared by the size of their proxy probes. When a search stops at MAX_QUALITY short of
 * the target, the two are compared at the SSIM both reach.
 */
export async function chooseJpeg(pixels: Pixels, target = JPEG_TARGET_SSIM + PROXY_MARGIN, judgedAt: JudgedAt = 'full', search: SearchBudget = IMAGE_SEARCH): Promise<JpegSetting> {
  const guide = await guideOf(pixels, target, judgedAt, 3, search);
  // The standard tables reach a given SSIM a few qualities lower (measured: 2-5). Their search
  // starts below the guide's answer where there is one, so that with a spare core it can run
  // beside the confirmation of mozjpeg's when the guide already says it will be needed.
  const standardFrom = (start: number) => searchQuality(pixels, target, judgedAt, 0, { ...search, start });
  const early = guide && guide.quality >= STANDARD_TABLES_FROM - 1 && search.ahead && spareCore() ? standardFrom(guide.quality - 3) : undefined;
  early?.catch(() => {});
  let mozjpeg = await searchQuality(pixels, target, judgedAt, 3, search, guide);
  if (mozjpeg.quality < STANDARD_TABLES_FROM) return { quality: mozjpeg.quality, table: 3 };
  let standard = await (early ?? standardFrom((guide?.quality ?? mozjpeg.quality) - 3));
  const common = Math.min(mozjpeg.ssim, standard.ssim, target);
  if (mozjpeg.ssim < target || standard.ssim < target) {
    if (mozjpeg.quality === MAX_QUALITY && mozjpeg.ssim > common) mozjpeg = await searchQuality(pixels, common, judgedAt, 3, { ...search, start: MAX_QUALITY - 2 });
    if (standard.quality === MAX_QUALITY && standard.ssim > common) standard = await searchQuality(pixels, common, judgedAt, 0, { ...search, start: MAX_QUALITY - 3 });
  }
  const probes = probesOf(pixels, search.proxyTiles);
  const a: JpegSetting = { quality: mozjpeg.quality, table: 3 };
  const b: JpegSetting = { quality: standard.quality, table: 0 };
  return (await probes.size(b)) < (await probes.size(a)) ? b : a;
}

/**
 * The lowest quality in [MIN_QUALITY, MAX_QUALITY] whose proxy SSIM reaches the target (a
 * full-resolution target; with `judgedAt: 'sensor'` it is scored on binned luma against
 * binnedTarget(target)) with the given quantisation tables. Under a document budget (budget.ts)
 * the first probe is `search.start` and the search stops after `search.probes` once some quality
 * has passed (the check for a non-monotonic SSIM below still runs), answering the lowest quality
 * seen to pass.
 */
export async function chooseJpegQuality(
  pixels: Pixels,
  target = JPEG_TARGET_SSIM + PROXY_MARGIN,
  judgedAt: JudgedAt = 'full',
  search: SearchBudget = IMAGE_SEARCH,
  table: QuantTable = 3,
): Promise<number> {
  return (await searchQuality(pixels, target, judgedAt, table, search)).quality;
}

/** Whether a setting's proxy probe reaches a full-resolution SSIM target, as chooseJpegQuality judges it. */
export async function reaches(pixels: Pixels, setting: JpegSetting, target: number, judgedAt: JudgedAt = 'full'): Promise<boolean> {
  const s = await probesOf(pixels).score(setting, judgedAt);
  return s >= (judgedAt === 'sensor' ? binnedTarget(target) : target);
}

/** What a full search's guide (see searchQuality) found on the quarter-size proxy: its answer and its probes. */
interface Guide {
  quality: number;
  seen: Scored[];
}

/**
 * A full search is first run on a quarter-size proxy (a quarter of the cost per probe). Its
 * answer is the first probe on the full proxy, and its curve, shifted by what that probe
 * measured, aims the second: usually two or three probes where the search alone takes four to
 * six (corpus: 13 % less search time). The answer is still the lowest quality the full proxy
 * passes with the one below it failing, so it is the unguided search's own wherever SSIM rises
 * with quality (the same answer on every corpus image). No guide for a search under a document
 * budget, or where the full proxy is small already.
 */
async function guideOf(pixels: Pixels, target: number, judgedAt: JudgedAt, table: QuantTable, search: SearchBudget): Promise<Guide | undefined> {
  if (search.probes !== Infinity || search.proxyTiles <= GUIDE_TILES) return undefined;
  if (probesOf(pixels, GUIDE_TILES).proxy.data.length * 2 >= probesOf(pixels, search.proxyTiles).proxy.data.length) return undefined;
  return searchQuality(pixels, target, judgedAt, table, { ...search, proxyTiles: GUIDE_TILES }, null);
}

/**
 * chooseJpegQuality's answer and the proxy SSIM it reaches (as a full-resolution figure); the
 * first probe at the guide's answer (guideOf; `null`: none, as for the guide's own search, which
 * also skips the noisy check), else at `search.start` (a later search of the same picture starts
 * near an earlier answer).
 */
async function searchQuality(
  pixels: Pixels,
  target: number,
  judgedAt: JudgedAt,
  table: QuantTable,
  search: SearchBudget = IMAGE_SEARCH,
  guided?: Guide | null,
): Promise<{ quality: number; ssim: number; seen: Scored[] }> {
  const probes = probesOf(pixels, search.proxyTiles);
  const guide = guided === undefined ? await guideOf(pixels, target, judgedAt, table, search) : (guided ?? undefined);
  const start = guide?.quality ?? search.start ?? PROBE_QUALITY;
  const binned = judgedAt === 'sensor';
  if (binned) target = binnedTarget(target);
  const score = (q: number): Promise<number> => probes.score({ quality: q, table }, judgedAt);
  const reached = async (quality: number) => {
    const s = await score(quality);
    return { quality, ssim: binned ? 1 - 2 * (1 - s) : s };
  };
  // Probe two typical qualities (after a guide: its answer, then where its curve points), then
  // aim at the target along the secant of log(1 - SSIM), which is nearly linear in quality:
  // through the bracket [lo fails, hi passes] once both ends are measured, through the two
  // measurements nearest the target before that. A bracket end
  // that moves twice in a row pulls the next probe halfway to the middle (the Illinois safeguard
  // against creeping one quality at a time along a curved stretch). 3-5 proxy encodes in practice,
  // 2-3 after a guide.
  let lo = MIN_QUALITY - 1;
  let hi = MAX_QUALITY;
  const seen: Scored[] = [];
  let sameSide = 0;
  let left = search.probes;
  const probe = async (q: number): Promise<void> => {
    left--;
    const s = await score(q);
    seen.push({ q, s });
    const pass = s >= target;
    sameSide = seen.length > 1 && pass === seen[seen.length - 2].s >= target ? sameSide + 1 : 0;
    if (pass) hi = q;
    else lo = q;
  };
  const goal = logLoss(target);
  const first = Math.min(MAX_QUALITY - 1, Math.max(MIN_QUALITY, start));
  // With a spare core the probes a guided search most likely asks for next start at once:
  // its answer, the qualities either side, and the noisy check below it.
  if (guide && search.ahead && spareCore()) for (const q of [first, first - 1, first + 1, first - NOISY_CHECK]) if (q >= MIN_QUALITY && q <= MAX_QUALITY) score(q).catch(() => {});
  await probe(first);
  if (left > 0 && !searchDone(lo, hi, left)) {
    const pass = seen[0].s >= target;
    let second = pass ? first - PROBE_STEP : first + PROBE_STEP;
    if (guide) {
      const shift = logLoss(seen[0].s) - logLossAt(guide.seen, first);
      let q = first;
      if (pass) while (q - 1 > lo && logLossAt(guide.seen, q - 1) + shift <= goal) q--;
      else while (q + 1 < hi && logLossAt(guide.seen, q) + shift > goal) q++;
      second = q !== first ? q : pass ? first - 1 : first + 1;
    }
    await probe(Math.min(MAX_QUALITY, Math.max(MIN_QUALITY, second)));
  }
  while (!searchDone(lo, hi, left)) {
    const ends = seen.filter((p) => p.q === lo || p.q === hi);
    const [a, b] = ends.length === 2 ? ends : [...seen].sort((x, y) => Math.abs(logLoss(x.s) - goal) - Math.abs(logLoss(y.s) - goal));
    const la = logLoss(a.s);
    const lb = logLoss(b.s);
    let q = la !== lb ? Math.round(a.q + ((la - goal) / (la - lb)) * (b.q - a.q)) : Math.round((lo + hi) / 2);
    if (ends.length === 2 && sameSide >= 1) q = Math.round((q + (lo + hi) / 2) / 2);
    await probe(Math.min(hi - 1, Math.max(lo + 1, Math.min(q, seen[seen.length - 1].q + MAX_JUMP), seen[seen.length - 1].q - MAX_JUMP)));
  }
  // SSIM is monotonic in quality on ordinary images, but not where the signal is mostly noise a
  // few code values deep (nearly black or flat images): there whether trellis keeps that noise
  // flips from one quality to the next. One probe well below the answer tells; when it passes,
  // scan the qualities below it for the lowest that passes.
  const check = hi - NOISY_CHECK;
  if (guided !== null && check >= MIN_QUALITY && (await score(check)) >= target) {
    let found = check;
    for (let q = MIN_QUALITY; q < check; q += NOISY_STEP) {
      if ((await score(q)) >= target) {
        found = q;
        break;
      }
    }
    for (let q = found - 1; q > found - NOISY_STEP && q >= MIN_QUALITY; q--) if ((await score(q)) >= target) found = q;
    return { ...(await reached(found)), seen };
  }
  return { ...(await reached(Math.max(MIN_QUALITY, hi))), seen };
}

/** A probe's quality and the proxy SSIM it scored. */
interface Scored {
  q: number;
  s: number;
}

function logLoss(s: number): number {
  return Math.log(Math.max(1e-6, 1 - s));
}

/** log(1 - SSIM) at quality q along a search's probes: linear between the two nearest on either side, else through the two nearest. */
function logLossAt(points: Scored[], q: number): number {
  const sorted = [...points].sort((a, b) => a.q - b.q);
  const exact = sorted.find((p) => p.q === q);
  if (exact) return logLoss(exact.s);
  if (sorted.length < 2) return logLoss(sorted[0].s);
  // The first point above q closes the segment; beyond either end, the end's segment extends.
  const above = sorted.findIndex((p) => p.q > q);
  const i = above === -1 ? sorted.length - 1 : Math.max(1, above);
  const [a, b] = [sorted[i - 1], sorted[i]];
  return logLoss(a.s) + ((logLoss(b.s) - logLoss(a.s)) * (q - a.q)) / (b.q - a.q);
}

/** Distance below the answer of the probe that detects a non-monotonic SSIM, and the scan's step. */
const NOISY_CHECK = 10;
const NOISY_STEP = 3;

const PROBE_QUALITY = 80;
const PROBE_STEP = 5;
/** Tiles of the guide proxy of a full search (a quarter of PROXY_TILES). */
const GUIDE_TILES = 16;
/** Largest move of one extrapolated probe. */
const MAX_JUMP = 15;

interface Probes {
  proxy: Pixels;
  /** Proxy SSIM of a setting as judged at `judgedAt` (memoised). */
  score(setting: JpegSetting, judgedAt: JudgedAt): Promise<number>;
  /** Bytes of the proxy's probe encode of a setting (memoised with the scores). */
  size(setting: JpegSetting): Promise<number>;
}

const probesByPixels = new WeakMap<Uint8Array, Map<number, Probes>>();

/**
 * The quality probes of one image, shared by every search on it (the universal compressor's
 * target and floor searches probe many of the same qualities): the proxy is cut once, each
 * quality is encoded and decoded once, and each reference luma is computed once.
 */
export function probesOf(pixels: Pixels, tiles = PROXY_TILES): Probes {
  const byTiles = probesByPixels.get(pixels.data) ?? new Map<number, Probes>();
  probesByPixels.set(pixels.data, byTiles);
  const known = byTiles.get(tiles);
  if (known) return known;
  const proxy = proxyOf(pixels, tiles);
  const encodes = new Map<string, Promise<Buffer>>();
  const scores = new Map<string, Promise<number>>();
  const references = new Map<JudgedAt, Float32Array>();
  const view = (y: Float32Array, judgedAt: JudgedAt) => (judgedAt === 'sensor' ? bin2x2(y, proxy.width, proxy.height) : y);
  // One encode per setting, shared by its size and its scores.
  const encode = (s: JpegSetting): Promise<Buffer> => {
    const key = `${s.table}:${s.quality}`;
    let jpeg = encodes.get(key);
    if (!jpeg) {
      jpeg = jpegPipeline(proxy).jpeg(probeOptions(jpegOptionsFor(pixels, s))).toBuffer();
      encodes.set(key, jpeg);
    }
    return jpeg;
  };
  const probes: Probes = {
    proxy,
    size: async (s) => (await encode(s)).length,
    score: (s, judgedAt) => {
      const key = `${judgedAt}:${s.table}:${s.quality}`;
      let hit = scores.get(key);
      if (!hit) {
        hit = (async () => {
          const decoded = await sharp(await encode(s)).raw().toBuffer({ resolveWithObject: true });
          let reference = references.get(judgedAt);
          if (!reference) {
            reference = view(luma(proxy), judgedAt);
            references.set(judgedAt, reference);
          }
          const [w, h] = judgedAt === 'sensor' ? [proxy.width >> 1, proxy.height >> 1] : [proxy.width, proxy.height];
          return ssimOfLuma(reference, view(luma({ data: decoded.data, width: proxy.width, height: proxy.height, channels: decoded.info.channels }), judgedAt), w, h);
        })();
        scores.set(key, hit);
      }
      return hit;
    },
  };
  byTiles.set(tiles, probes);
  return probes;
}

/** A sharp pipeline over raw 1- or 3-channel pixels that encodes as many JPEG components (sharp writes one channel as three unless told it is grey). */
export function jpegPipeline(p: Pixels): Sharp {
  const img = sharp(p.data, { raw: rawOf(p) });
  return p.channels === 1 ? img.toColourspace('b-w') : img;
}

export { encodePng, type PngEncoded } from './png-encode.ts';
export { proxyOf } from './proxy.ts';
