import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResizeOptions } from '../src/catalog/index.ts';
import type { Compress } from './contract.ts';
import { insertExif } from './decoders/exif.ts';
import { chooseJpeg, chooseJpegQuality, encodeJpeg, encodePng, finalJpeg, jpegOptions, jpegPipeline, PREDICTED_SEARCH_MS, predictedEncodeMs, predictedScore, probesOf, reaches, type JpegChoice, type JpegSetting, type JudgedAt } from './image/encode.ts';
import { MIN_QUALITY } from './image/quality-bracket.ts';
import { estimatedProgress, onScale, type Toward } from './shared/progress.ts';
import { IMAGE_SEARCH } from './image/budget.ts';
import { greyOf, imageError, openImage, type OpenedImage } from './image/door.ts';
import { jpegOrigin, markAsOurs } from './image/jpeg-mark.ts';
import { JpegliFailed } from './image/jpegli.ts';
import { applyResize, targetSize } from './image/resize.ts';
import type { Pixels } from './image/ssim.ts';
import { pixelPipeline } from './image/vips.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';
import { noteSetting, phase, phaseSync } from './shared/profile.ts';

/**
 * `image.universal-compress`: detect (magic bytes) → decode → upright 8-bit sRGB (resized in the
 * same pipeline) → alpha by content → output format by the spec's table → JPG at the automatic
 * quality within the input's size (see encodeJpegWithin), or the PNG encoder's smallest candidate.
 *
 * Failure codes (besides the decoders' own, see workers/decoders/):
 * - `image.empty`: the file has no bytes.
 * - `image.format_mismatch`: the bytes are no image format this compressor reads.
 * - `image.too_many_pixels`: the header declares more than 100 MP (checked before decoding).
 * - `image.truncated`: the pixel data is cut short.
 * - `image.decode_failed`: the file is corrupt in another way.
 * - `image.unsupported_variant`: a variant of a listed format no decoder here reads.
 * - `raw.no_image_data`, `raw.unsupported`: see workers/decoders/raw.ts.
 */

export const compress: Compress = async (job, out, ctx) => {
  const bytes = await phase('read', () => readFile(job.inputPath));
  const decode = () => phase('decode', () => openImage(bytes, { declared: job.format, signal: ctx.signal }));
  const opened = await estimatedProgress(decode, { from: 1, to: 30, predictedMs: PREDICTED_DECODE_MS }, (p, toward) => ctx.progress(p, 'decoding', toward));
  const { format: family, via, exif } = opened.facts;
  ctx.signal.throwIfAborted();
  ctx.progress(30, 'analyzing');

  const resize = job.options.resize;
  const upright = await estimatedProgress(
    () => phase('normalise', () => normalise(opened, { resize, inputPath: job.inputPath })),
    { from: 30, to: 45, predictedMs: PREDICTED_NORMALISE_MS },
    (p, toward) => ctx.progress(p, 'analyzing', toward),
  );
  const opaque = upright.channels === 4 && phaseSync('analyse', () => fullyOpaque(upright.data));
  const pixels: Pixels = opaque ? { ...upright, data: dropAlpha(upright.data), channels: 3 } : upright;
  const format = outputFormat(family, pixels.channels === 4);
  ctx.signal.throwIfAborted();
  ctx.progress(45, 'encoding');

  const path = join(out.dir, `output.${format}`);
  const onStep = onScale(45, 45, (p, toward) => ctx.progress(p, 'encoding', toward));
  // Same format, same size: the input itself is a valid output and is kept when not beaten.
  const sameFormat = ((family === 'jpeg' && format === 'jpg') || (family === 'png' && format === 'png')) && !upright.resized;
  let perceived: number | undefined;
  if (sameFormat && family === 'jpeg' && (await jpegOrigin(bytes)) !== 'other') {
    // Already encoded by us (or with our tables at a chosen quality): no second generation (see jpg.ts).
    await writeFile(path, bytes);
  } else if (format === 'jpg') {
    // Developed from sensor data: judged at the sensor's colour resolution (image/encode.ts).
    const judgedAt = via === 'libraw' ? 'sensor' : 'full';
    // A grey picture becomes a one-component JPEG (image/door.ts).
    const grey = phaseSync('analyse', () => greyOf(pixels));
    const jpeg = await encodeJpegWithin(grey ?? pixels, { exif, maxBytes: sameFormat ? undefined : bytes.length, onStep, judgedAt, jpegli: !(family === 'jpeg' && !upright.resized) });
    const signed = markAsOurs(jpeg.data);
    // The signature's 15 bytes never push a file that was fitted into the input's size over it.
    await phase('write', () => writeFile(path, jpeg.rule === 'fit' && signed.length > bytes.length ? jpeg.data : signed));
    perceived = jpeg.score;
  } else {
    const png = await encodePng(pixelPipeline(pixels), 'lossy', { progress: (f, _step, toward) => onStep(f, toward) });
    await phase('write', () => writeFile(path, png.data));
    perceived = png.score;
  }
  ctx.progress(95, 'finalizing');
  const keptInput = sameFormat && (await phase('write', () => keepInputUnlessSmaller(job.inputPath, path)));
  ctx.progress(100, 'finalizing');
  const quality = keptInput || perceived === undefined ? {} : { perceivedQuality: perceived };
  return { path, format, contentType: format === 'jpg' ? 'image/jpeg' : 'image/png', width: pixels.width, height: pixels.height, ...quality };
};

/**
 * What a decode and the normalising step are predicted to take, for progress only: most formats
 * decode in well under a second, a 12 MP HEIC in 0.4-1.6 s, a 12 MP RAW in 2-3 s (WebAssembly,
 * which holds the job's thread while it runs: the pool moves the percentage then); colour conversion of a 10-bit HDR picture takes about 2 s.
 */
const PREDICTED_DECODE_MS = 1000;
const PREDICTED_NORMALISE_MS = 500;

/** The spec's table: JPG and RAW inputs give JPG; every other format PNG when it has alpha, else JPG. */
export function outputFormat(family: string, hasAlpha: boolean): 'jpg' | 'png' {
  if (family === 'jpeg' || family === 'raw') return 'jpg';
  return hasAlpha ? 'png' : 'jpg';
}

interface Upright extends Pixels {
  data: Buffer;
  channels: 3 | 4;
  resized: boolean;
}

/**
 * One libvips pipeline from the decoded picture to upright 8-bit sRGB pixels at the output size:
 * EXIF orientation applied, colour converted from the embedded ICC profile (CMYK, wide gamut,
 * 16-bit and HDR/PQ-tagged inputs alike, with a standard CMYK profile for untagged CMYK),
 * greyscale made RGB, alpha kept, then the resize option.
 */
async function normalise({ image, facts }: OpenedImage, { resize, inputPath }: { resize: ResizeOptions | undefined; inputPath: string }): Promise<Upright> {
  try {
    const meta = await image.metadata();
    const turned = (meta.orientation ?? 1) >= 5;
    const shown = turned ? { width: facts.height, height: facts.width } : { width: facts.width, height: facts.height };
    const img = image.rotate().toColourspace('srgb');
    const withAlpha = meta.hasAlpha ? img.ensureAlpha() : img.removeAlpha();
    const sized = applyResize(withAlpha, shown.width, shown.height, resize);
    const { data, info } = await sized.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    const resized = targetSize(shown.width, shown.height, resize) !== null;
    return { data, width: info.width, height: info.height, channels: info.channels === 4 ? 4 : 3, resized };
  } catch (err) {
    throw imageError(err, inputPath);
  }
}

/**
 * "Has alpha" is decided by content: a format may declare an alpha channel (32-bit BMP, RGBA PNG,
 * PSD, lossless WebP) whose every pixel is fully opaque; such an image has no transparency to
 * keep and goes out as JPG.
 */
export function fullyOpaque(rgba: Uint8Array): boolean {
  for (let i = 3; i < rgba.length; i += 4) if (rgba[i] !== 255) return false;
  return true;
}

function dropAlpha(rgba: Buffer): Buffer {
  const n = rgba.length >> 2;
  const rgb = Buffer.allocUnsafe(n * 3);
  for (let i = 0, o = 0; o < n * 3; i += 4, o += 3) {
    rgb[o] = rgba[i];
    rgb[o + 1] = rgba[i + 1];
    rgb[o + 2] = rgba[i + 2];
  }
  return rgb;
}

/**
 * The perceived-quality floor of the size rule: a JPG made from another format may go down to this
 * SSIMULACRA2 (full resolution, image/ssimulacra2.ts) to stay within the input's size, never
 * lower: 70 is "high quality", free of visible blocking at normal viewing size.
 */
export const JPEG_FLOOR = 70;
/** A predicted size this much over the limit is not confirmed by a full encode. */
const CLEAR_MISS = 1.02;
/** A first prediction under this share of the limit is trusted without the plain-encode calibration. */
const FAR_UNDER = 0.8;

export interface SizedJpeg extends JpegChoice {
  data: Buffer;
  /** `target`: the usual automatic quality; `fit`: lowered to fit the size limit; `floor`: at the floor and still over it. */
  rule: 'target' | 'fit' | 'floor';
}

/** What encodeJpegWithin is given besides the pixels. */
export interface JpegWithin {
  /** EXIF block inserted into the file. */
  exif?: Buffer;
  /** The input's size, when the input is another format (see encodeJpegWithin). */
  maxBytes?: number;
  onStep?: (fraction: number, toward?: Toward) => void;
  judgedAt?: JudgedAt;
  /** jpegli's forms are compared too (default): not for a JPEG re-encoded on its own block grid (jpg.ts). */
  jpegli?: boolean;
}

/**
 * JPG of upright 8-bit RGB pixels at the automatic setting (image/encode.ts: the smallest
 * reaching the perceived target), EXIF inserted. With `maxBytes` (the input's size, when the
 * input is another format, so the never-larger rule cannot simply return it): when that file is
 * larger, the highest quality whose file fits, but not below the quality that reaches
 * JPEG_FLOOR. When even the floor does not fit, the floor's file is the output, in the form
 * smallest there (smallestAtFloor): the only
 * case where the universal compressor writes more bytes than it got (an efficient input format —
 * 10-bit AVIF, lossy WebP, palette TIFF/BMP — that JPEG cannot match without visible damage,
 * while the spec's table fixes the output format).
 */
export async function encodeJpegWithin(pixels: Pixels, within: JpegWithin = {}): Promise<SizedJpeg> {
  const { exif, maxBytes, onStep, judgedAt = 'full', jpegli = true } = within;
  const step = <T>(work: () => Promise<T>, span: { from: number; to: number; predictedMs: number }) => (onStep ? estimatedProgress(work, span, onStep) : work());
  const sized = async (jpegli: boolean): Promise<SizedJpeg> => {
    // One form for every encode of the picture: the one the target's search chose.
    const choice = await step(() => chooseJpeg(pixels, undefined, judgedAt, { ...IMAGE_SEARCH, jpegli, encodesAnswer: true, answerWithin: maxBytes }), { from: 0, to: 0.4, predictedMs: PREDICTED_SEARCH_MS });
    const files = new JpegFiles(pixels, choice, { exif, judgedAt });
    // Usually one full-size encode; the size rule's search, when it runs, a few more.
    return step(async () => {
      if (maxBytes === undefined) return files.sized(files.target, 'target');
      const fit = await SizeFit.start(files, maxBytes);
      // The target's own file is made unless it is predicted clearly over the limit.
      if ((await fit.predicted(files.target)) <= maxBytes * CLEAR_MISS && (await fit.calibrate(files.target))) return files.sized(files.target, 'target');
      const fitted = await fit.search();
      return fitted === 'floor' ? smallestAtFloor(files, await fit.floorQuality(), jpegli) : fitted;
    }, { from: 0.4, to: 1, predictedMs: predictedEncodeMs(pixels.width * pixels.height) });
  };
  try {
    return await sized(jpegli);
  } catch (err) {
    // jpegli loaded for the search but failed on the whole picture: mozjpeg's forms alone.
    if (!(err instanceof JpegliFailed)) throw err;
    return sized(false);
  }
}

/**
 * A floor's file is over the limit whatever is done, so its bytes are what is left to save, and the
 * form the target's search chose is not always the smallest at the floor's lower score (a 20 MP
 * 10-bit AVIF: jpegli's 4:4:4, the target's form, 1.26 MB at the floor, its 4:2:0 13 % smaller there).
 * The forms are compared again at the floor; the target's form keeps it only where its file there,
 * if the fit made it already, is the smaller.
 */
async function smallestAtFloor(files: JpegFiles, quality: number, jpegli: boolean): Promise<SizedJpeg> {
  const { pixels, how } = files;
  const choice = await chooseJpeg(pixels, JPEG_FLOOR, how.judgedAt, { ...IMAGE_SEARCH, jpegli });
  const own = files.at(quality);
  if (choice.table === own.table && choice.chroma === own.chroma) return files.sized(quality, 'floor');
  const other = await new JpegFiles(pixels, choice, how).sized(choice.quality, 'floor');
  if (!files.has(quality)) return other;
  const mine = await files.sized(quality, 'floor');
  return mine.data.length <= other.data.length ? mine : other;
}

/** The full-size files of one picture in the form its target search chose, each quality encoded once. */
class JpegFiles {
  readonly target: number;
  private readonly encoded = new Map<number, Buffer>();

  constructor(
    readonly pixels: Pixels,
    private readonly choice: JpegChoice,
    readonly how: { exif: Buffer | undefined; judgedAt: JudgedAt },
  ) {
    this.target = choice.quality;
  }

  at(quality: number): JpegSetting {
    return { quality, table: this.choice.table, chroma: this.choice.chroma };
  }

  has(quality: number): boolean {
    return this.encoded.has(quality);
  }

  async full(quality: number): Promise<Buffer> {
    let data = this.encoded.get(quality);
    if (!data) {
      // The target's file is the output's encode; any other quality is the size rule's.
      const made = await phase(quality === this.target && this.encoded.size === 0 ? 'encode' : 'fit', () => finalJpeg(this.pixels, this.at(quality)));
      data = insertExif(made, this.how.exif);
      this.encoded.set(quality, data);
    }
    return data;
  }

  async sized(quality: number, rule: SizedJpeg['rule']): Promise<SizedJpeg> {
    const setting = this.at(quality);
    noteSetting(setting);
    const data = await this.full(quality);
    const score = quality === this.target ? this.choice.score : await predictedScore(this.pixels, setting, this.how.judgedAt);
    return { data, ...setting, score, rule };
  }
}

/**
 * The size rule's search. Full-size encodes cost seconds at 12 MP (trellis quantisation is most of
 * it), so sizes are predicted: the quality search's proxy probe at q times a full/proxy ratio. The
 * first ratio is measured at the target quality on a plain encode without trellis (a quarter of
 * the cost; within -0.5 %..+5 % of the real ratio on camera photos), times what the final scan
 * search saves on the proxy (0.5 % on most photos, 20–70 % on a dark one); every full encode then
 * measures it exactly. A small image is its own proxy: its predictions are its full encodes.
 */
class SizeFit {
  private floor: number | undefined;

  private readonly small: boolean;

  private constructor(
    private readonly files: JpegFiles,
    private readonly probes: ReturnType<typeof probesOf>,
    private readonly maxBytes: number,
    private ratio: number,
  ) {
    this.small = probes.proxy === files.pixels;
  }

  static async start(files: JpegFiles, maxBytes: number): Promise<SizeFit> {
    const { pixels } = files;
    const probes = probesOf(pixels);
    const target = files.at(files.target);
    // The proxy's share of the pixels alone predicts within about 10 %: far under the limit, no
    // further measurement is needed before the target's own file is made.
    let ratio = (pixels.width * pixels.height) / (probes.proxy.width * probes.proxy.height);
    if (probes.proxy !== pixels && (await probes.size(target)) * ratio > maxBytes * FAR_UNDER) {
      const measure = () => Promise.all([plainSize(pixels, target), plainSize(probes.proxy, target), encodeJpeg(probes.proxy, target)]);
      const [plainFull, plainProxy, proxyFinal] = await phase('fit', measure);
      ratio = (plainFull / plainProxy) * (proxyFinal.length / (await probes.size(target)));
    }
    return new SizeFit(files, probes, maxBytes, ratio);
  }

  async predicted(q: number): Promise<number> {
    return this.small ? (await this.files.full(q)).length : (await this.probes.size(this.files.at(q))) * this.ratio;
  }

  /** Makes the full file at q (which measures the ratio exactly) and tells whether it fits. */
  async calibrate(q: number): Promise<boolean> {
    const data = await this.files.full(q);
    if (!this.small) this.ratio = data.length / (await this.probes.size(this.files.at(q)));
    return data.length <= this.maxBytes;
  }

  /**
   * The floor's quality is searched only when the fit comes down to it: until then a quality whose
   * proxy score reaches the floor is above the floor's quality (scores rise with quality), which its
   * probe, usually made by the target's search already, tells.
   */
  async floorQuality(): Promise<number> {
    const { pixels, how } = this.files;
    const { table, chroma } = this.files.at(this.files.target);
    return (this.floor ??= await chooseJpegQuality(pixels, { target: JPEG_FLOOR, judgedAt: how.judgedAt, search: IMAGE_SEARCH, form: { table, chroma } }));
  }

  /** The highest quality in [lo, hi] whose predicted size fits (proxy sizes grow with quality). */
  private async highestPredictedFit(lo: number, hi: number): Promise<number> {
    let a = lo;
    let b = hi;
    while (a < b) {
      const mid = (a + b + 1) >> 1;
      if ((await this.predicted(mid)) <= this.maxBytes) a = mid;
      else b = mid - 1;
    }
    return a;
  }

  /** Below the target: the highest quality whose file fits, not below the floor's; `floor` when even the floor's does not (smallestAtFloor). */
  async search(): Promise<SizedJpeg | 'floor'> {
    const { files } = this;
    let best: number | null = null;
    let lo = MIN_QUALITY;
    let hi = files.target - 1;
    while (lo <= hi) {
      const a = await this.highestPredictedFit(lo, hi);
      if (this.floor === undefined && !(await reaches(files.pixels, files.at(a), JPEG_FLOOR, files.how.judgedAt))) {
        if ((await this.floorQuality()) >= files.target) return files.sized(files.target, 'floor');
        lo = Math.max(lo, await this.floorQuality());
        if (a < lo) continue;
      }
      // Nothing in the bracket is predicted to fit: clearly over, as the target's file is judged, the
      // lowest is not encoded to be sure (at the floor that encode was a second of a 20 MP AVIF's job).
      if ((await this.predicted(a)) > this.maxBytes * CLEAR_MISS) {
        hi = a - 1;
        continue;
      }
      if (await this.calibrate(a)) {
        best = a;
        lo = a + 1;
        // Calibrated at the neighbouring quality the prediction is within about 1 %: a file that fits
        // is kept unless the next quality is predicted to fit as well.
        if (files.has(lo) || (lo <= hi && (await this.predicted(lo)) > this.maxBytes)) break;
      } else {
        hi = a - 1;
      }
    }
    return best === null ? 'floor' : files.sized(best, 'fit');
  }
}

/**
 * Bytes of a plain baseline encode (no trellis, no progressive scans) at the quantisation of a
 * setting: a cheap size probe, used for the ratio of the full picture's bytes to its proxy's. For a
 * jpegli setting, the standard tables at its quality stand in: the ratio is the picture's.
 */
async function plainSize(p: Pixels, setting: JpegSetting): Promise<number> {
  const { chromaSubsampling, quantisationTable } = jpegOptions(setting.table === 'jpegli' ? { ...setting, table: 0 } : setting);
  return (await jpegPipeline(p).jpeg({ quality: setting.quality, chromaSubsampling, quantisationTable, optimiseCoding: true }).toBuffer()).length;
}
