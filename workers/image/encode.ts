import sharp from 'sharp';
import type { CreateRaw, JpegOptions, Sharp } from 'sharp';
import { IMAGE_SEARCH, type SearchBudget } from './budget.ts';
import { aimOnProxy, fromProxy, PERCEIVED_TARGET } from './perceived.ts';
import { PROXY_TILES, proxyOf, proxyPixels } from './proxy.ts';
import { estimatedProgress, type Toward } from '../shared/progress.ts';
import { noteProbe, noteSetting, phase, phaseSync } from '../shared/profile.ts';
import { spareCore } from '../shared/spare-core.ts';
import { reserveMoreMemoryNow } from '../shared/memory.ts';
import { greyOf } from './door.ts';
import { appSegments, setExifDimensions, withSegments } from './jpeg-segments.ts';
import { frameComponents } from './jpeg-quant.ts';
import { decodeOptions } from './decode-policy.ts';
import type { Pixels } from './ssim.ts';
import { encodeJpegli, jpegliAvailable, JpegliFailed } from './jpegli.ts';
import { Ssimulacra2Reference } from './ssimulacra2.ts';
import { Bracket, logLoss, logLossAt, MAX_QUALITY, MIN_QUALITY, PROBE_QUALITY, PROBE_STEP, secantProbe, type Scored } from './quality-bracket.ts';

/**
 * Quantisation tables (mozjpeg's numbering): 3 is mozjpeg's default (ImageMagick's, tuned for
 * photos), 0 the JPEG standard's example (Annex K: what libjpeg and most cameras write), 2, 4,
 * 5 and 6 tables tuned to other models of vision (MS-SSIM, PSNR-HVS-M, Klein-Silverstein-Carney,
 * DCTune). Which is smallest at a given perceived quality depends on the picture: at
 * SSIMULACRA2 80, on the corpus, table 6 made a beer label 20 % smaller than table 3, table 0
 * a CMYK photo 11 % smaller, table 2 a camera photo 7 %; none wins everywhere. `jpegli`: another
 * encoder's tables and its adaptive quantisation (jpegli.ts), on some photos smaller still.
 */
export type QuantTable = 0 | 2 | 3 | 4 | 5 | 6 | 'jpegli';
/** Chroma subsampling: 4:2:0 halves colour resolution (free on photos), 4:4:4 keeps it (coloured text and edges). */
export type Chroma = '4:2:0' | '4:4:4';
/** How a picture is coded, apart from its quality. */
export interface JpegForm {
  table: QuantTable;
  chroma: Chroma;
}
/** What one JPEG encode is set to. */
export interface JpegSetting extends JpegForm {
  quality: number;
}
/** A chosen setting and the perceived quality it is predicted to reach at full resolution. */
export interface JpegChoice extends JpegSetting {
  score: number;
}

/** mozjpeg's defaults: what a search with no room to compare uses. */
export const DEFAULT_FORM: JpegForm = { table: 3, chroma: '4:2:0' };
/**
 * The forms a full search compares, per picture, at its perceived target. Measured at
 * SSIMULACRA2 80 on 1 MP samples of the corpus (bytes against mozjpeg's default): table 2
 * 0.93-1.03, 4 0.86-1.08, 5 0.95-1.00, 6 0.80-1.10, 0 0.89-1.14; 4:4:4 1.04-1.77 on photos
 * but the only way to keep coloured text (see the benchmark's made files); tables 1, 7 and 8
 * never won at 4:2:0. Table 1 (flat) at 4:4:4 is 20 % smaller than table 0 on coloured text, but
 * its size falls with quality unlike the default's, so chooseForm's one-probe prediction picked it
 * where it was 10-32 % larger (a 12 MP phone photo, a 24-bit BMP) and never on the text: not a candidate.
 */
const FORMS: JpegForm[] = [DEFAULT_FORM, { table: 2, chroma: '4:2:0' }, { table: 4, chroma: '4:2:0' }, { table: 5, chroma: '4:2:0' }, { table: 6, chroma: '4:2:0' }, { table: 0, chroma: '4:2:0' }, { table: 3, chroma: '4:4:4' }, { table: 0, chroma: '4:4:4' }];
/**
 * jpegli's forms, compared with mozjpeg's where it loads (SearchBudget.jpegli). Measured at
 * SSIMULACRA2 80 on 1.2 MP samples of the corpus against the best of mozjpeg's forms: 4:2:0 0.91-0.997
 * on six photos of twelve, 1.06-1.17 on the others (coloured text, graphics, a CMYK photo).
 */
const JPEGLI_FORMS: JpegForm[] = [{ table: 'jpegli', chroma: '4:2:0' }, { table: 'jpegli', chroma: '4:4:4' }];
/** The forms any JPEG of ours may carry (jpeg-mark.ts tells our output by their tables). */
export const OUR_FORMS: JpegForm[] = [...FORMS, ...JPEGLI_FORMS];
/**
 * Another form replaces the default only when predicted this much smaller: its prediction is
 * made from one probe on the quarter proxy, and a near tie is not worth the risk.
 */
const SWITCH_GAIN = 0.02;

export interface JpegAutoOptions {
  /** Carry EXIF, ICC and XMP over from the pipeline's input. */
  keepMetadata?: boolean;
  /** With keepMetadata: the embedded ICC profile is converted into (sRGB pixels, no profile) instead of kept (door.ts: profileDecision). */
  convertProfile?: boolean;
  /**
   * With keepMetadata: the input JPEG. The output is then the pixels the search scored, encoded
   * once, with the metadata libvips writes (metadataAsWritten), byte for byte the pipeline's
   * output, which carries the metadata only by decoding the input a second time (0.1-0.5 s of a
   * 12-24 MP photo). Only where the pipeline's encode would not change those pixels: not with an
   * embedded profile other than sRGB kept (it then encodes the samples in that profile). From CMYK
   * the pipeline encodes the sRGB pixels searched and attaches the sRGB profile it converted into.
   */
  metadataFrom?: Buffer;
  /** jpegli's forms are compared too (SearchBudget.jpegli): not for a JPEG re-encoded on its own block grid (jpg.ts). */
  jpegli?: boolean;
  progress?: (percent: number, phase: 'decoding' | 'analyzing' | 'encoding', toward?: Toward) => void;
  /**
   * Asked with the chosen setting and the bytes its file is predicted to take (the proxy probe's,
   * scaled by the pixels it stands for) before the full-size encode; false skips it
   * (encodeJpegAuto then returns null).
   */
  worthEncoding?: (setting: JpegSetting, predictedBytes: number) => Promise<boolean>;
}

export interface JpegEncoded extends JpegChoice {
  data: Buffer;
  width: number;
  height: number;
}

/**
 * mozjpeg with trellis quantisation and progressive scans, the settings every final encode of a
 * mozjpeg form uses (jpegli's are encoded by jpegli.ts: encodeJpeg).
 */
export function jpegOptions(setting: JpegSetting): JpegOptions {
  if (setting.table === 'jpegli') throw new Error('a jpegli setting is encoded by jpegli.ts, not by mozjpeg');
  return {
    quality: setting.quality,
    mozjpeg: true,
    progressive: true,
    quantisationTable: setting.table,
    chromaSubsampling: setting.chroma,
  };
}

/** A quality with mozjpeg's default form. */
export function defaultSetting(quality: number): JpegSetting {
  return { quality, ...DEFAULT_FORM };
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
 * The final encode of a document over its work budget (budget.ts): no trellis quantisation and
 * no progressive scan search, several times faster. Its pixels are at least as close to the
 * original as the trellis-quantised ones a quality probe scored.
 */
export function fastOptions(options: JpegOptions): JpegOptions {
  return { ...options, trellisQuantisation: false, optimiseScans: false };
}

/**
 * What the quality search compares: `full` resolution, or `sensor`, both pictures binned 2×2
 * for pictures developed from a Bayer sensor (camera RAW). A Bayer sensor records one colour per
 * pixel, so half of a developed image's full-resolution detail is the demosaicing's guess, and
 * two demosaicing algorithms differ from each other by more than any JPEG quality (LibRaw's PPG
 * against dcraw's AHD on the same file: luma SSIM 0.969-0.994). Scored at full resolution, the
 * search spends its bytes on keeping that guess exactly (q95 4:4:4 on a 12 MP DNG, 6.9 MB).
 */
export type JudgedAt = 'full' | 'sensor';

/**
 * Encodes a pipeline as JPEG with the smallest setting (form and quality) whose perceived quality
 * reaches PERCEIVED_TARGET against the pipeline's own pixels. The setting is searched on a proxy of
 * about 1 MP made of full-resolution tiles sampled across the image (a downscaled proxy would
 * hide exactly the artefacts the metric must see), then the full image is encoded once.
 * CMYK inputs come out as sRGB (sharp converts through the embedded or a standard CMYK profile);
 * transparency is flattened onto white. With keepMetadata, EXIF (orientation included), ICC and
 * XMP are carried over and the pixels are not rotated.
 */
export async function encodeJpegAuto(img: Sharp, opts: JpegAutoOptions = {}): Promise<JpegEncoded | null> {
  const progress = opts.progress ?? (() => {});
  const base = img.clone().flatten({ background: '#ffffff' }).toColourspace('srgb');
  progress(10, 'decoding');
  // libvips decodes and normalises in one pipeline: the profile's `decode` holds both.
  const { data, info } = await phase('decode', () => base.clone().raw().toBuffer({ resolveWithObject: true }));
  progress(30, 'analyzing');
  const rgb = { data, width: info.width, height: info.height, channels: info.channels };
  // Grey pictures (door.ts) are searched and encoded as one component.
  const greyPixels = phaseSync('analyse', () => greyOf(rgb));
  const grey = greyPixels !== undefined;
  const pixels = greyPixels ?? rgb;
  const fromPipeline = opts.keepMetadata === true && !opts.metadataFrom;
  const search = (jpegli: boolean) => estimatedProgress(() => chooseJpeg(pixels, PERCEIVED_TARGET, 'full', { ...IMAGE_SEARCH, jpegli, encodesAnswer: !fromPipeline }), { from: 30, to: 55, predictedMs: PREDICTED_SEARCH_MS }, (p, toward) => progress(p, 'analyzing', toward));
  let choice = await search(opts.jpegli === true && !fromPipeline);
  if (opts.worthEncoding && !(await opts.worthEncoding(choice, await predictedBytes(pixels, choice)))) return null;
  progress(55, 'encoding');
  const noProfile = grey || opts.convertProfile === true;
  const predictedMs = predictedEncodeMs(pixels.width * pixels.height);
  const encode = (setting: JpegSetting) => {
    noteSetting(setting);
    return estimatedProgress(() => phase('encode', () => finalEncode(setting)), { from: 55, to: 90, predictedMs }, (p, toward) => progress(p, 'encoding', toward));
  };
  const finalEncode = async (setting: JpegSetting): Promise<Buffer> => {
    if (!fromPipeline) return finalJpeg(pixels, setting);
    const encoder = withMetadata(base.clone(), noProfile);
    if (grey) encoder.toColourspace('b-w');
    return encoder.jpeg(jpegOptions(setting)).toBuffer();
  };
  let jpeg: Buffer;
  try {
    jpeg = await encode(choice);
  } catch (err) {
    if (!(err instanceof JpegliFailed)) throw err;
    // jpegli loaded for the search but failed on the whole picture: mozjpeg's forms alone.
    choice = await search(false);
    jpeg = await encode(choice);
  }
  const { width, height } = pixels;
  const metadata = opts.keepMetadata && opts.metadataFrom ? await phase('write', () => metadataAsWritten(opts.metadataFrom!, { noProfile, grey, width, height })) : [];
  return { data: withSegments(jpeg, metadata), ...choice, width, height };
}

/**
 * What a search and a final encode are predicted to take, for progress only (shared/progress.ts):
 * a search 1-2 s whatever the size (its probes are at most about 1 MP), a final encode about 130 ns a
 * pixel (1.6 s at 12 MP).
 */
export const PREDICTED_SEARCH_MS = 1200;
export function predictedEncodeMs(pixels: number): number {
  return (pixels * ENCODE_NS_PER_PIXEL) / 1e6;
}
const ENCODE_NS_PER_PIXEL = 130;

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
 * The APPn segments libvips writes when it carries a JPEG's metadata through a pipeline (withMetadata):
 * it rewrites EXIF through libexif (compacted, its own resolution and dimension tags, a block made
 * where there was none) and passes XMP, ICC and IPTC on; from CMYK it attaches the sRGB profile it
 * converted into instead. Made on a 16×16 stand-in of the input's colour space carrying the input's
 * APPn segments (about 2 ms whatever the input's size, where the input itself would be decoded),
 * with EXIF's pixel dimensions then set to the picture's.
 */
async function metadataAsWritten(input: Buffer, { noProfile, grey, width, height }: { noProfile: boolean; grey: boolean; width: number; height: number }): Promise<Buffer[]> {
  const standIn = withSegments(await standInJpeg(frameComponents(input) === 4 ? 'cmyk' : 'srgb'), appSegments(input));
  // The input's metadata is read with the door's strictness (a warning about it does not fail the job).
  const written = withMetadata(sharp(standIn, decodeOptions()).flatten({ background: '#ffffff' }).toColourspace('srgb'), noProfile);
  if (grey) written.toColourspace('b-w');
  const segments = appSegments(await written.jpeg().toBuffer());
  setExifDimensions(segments, width, height);
  return segments;
}

const standIns = new Map<'srgb' | 'cmyk', Promise<Buffer>>();
/** A grey 16×16 JPEG in `space`, without APPn segments of its own but Adobe's (a CMYK JPEG's sample coding). */
function standInJpeg(space: 'srgb' | 'cmyk'): Promise<Buffer> {
  let standIn = standIns.get(space);
  if (!standIn) {
    const pipeline = jpegPipeline({ data: new Uint8Array(16 * 16 * 3).fill(128), width: 16, height: 16, channels: 3 });
    standIn = (space === 'cmyk' ? pipeline.toColourspace('cmyk') : pipeline).jpeg().toBuffer();
    standIns.set(space, standIn);
  }
  return standIn;
}

/**
 * The setting of the smallest JPEG whose perceived quality reaches `target` (full resolution).
 * A single image's search first chooses the form (chooseForm; SearchBudget.forms), then searches
 * its quality; a document's pictures keep mozjpeg's default form.
 * When no quality up to MAX_QUALITY reaches the target, the answer is MAX_QUALITY.
 */
export async function chooseJpeg(
  pixels: Pixels,
  target = PERCEIVED_TARGET,
  judgedAt: JudgedAt = 'full',
  search: SearchBudget = IMAGE_SEARCH,
): Promise<JpegChoice> {
  return phase('search', () => searchJpeg(pixels, target, judgedAt, search));
}

async function searchJpeg(pixels: Pixels, target: number, judgedAt: JudgedAt, search: SearchBudget): Promise<JpegChoice> {
  const probes = probesOf(pixels, search.proxyTiles);
  const full = search.probes === Infinity;
  const { form, guide } = full && search.forms ? await chooseForm(pixels, target, judgedAt, search) : { form: DEFAULT_FORM, guide: undefined };
  // A small picture's guide was searched on its own proxy: the default form's answer there is
  // the search's own (all cached) and is not passed; another table's curve, shifted, aims its
  // first probes. Not another subsampling's: 4:4:4's curve is far steeper than 4:2:0's (a
  // palette BMP at q94: 74 and 89, at q85 69 and 81), so the shifted one sent the search to q57.
  const shiftedTable = form !== DEFAULT_FORM && form.chroma === DEFAULT_FORM.chroma;
  const guided = guide && (hasGuide(pixels, search) || shiftedTable) ? guide : undefined;
  const likely = search.encodesAnswer && search.ahead && hasGuide(pixels, search) ? (quality: number) => encodeAhead(pixels, { quality, ...form }, search.answerWithin) : undefined;
  const found = await searchQuality(pixels, { target, judgedAt, form, search }, guided ?? (full ? undefined : null), likely);
  const chosen = { quality: found.quality, ...form, score: found.score };
  const settled = full && search.forms && search.jpegli && probes.exact && !hasGuide(pixels, search) ? await withJpegliOnItself(pixels, { target, judgedAt, form, search }, chosen, found.seen) : chosen;
  return { ...settled, score: fromProxy(settled.score, probes.exact) };
}

/**
 * On a picture too small for a guide (about 0.5 MP and under: its own proxy, with no quarter proxy to
 * compare forms on), jpegli's forms are tried beside the chosen mozjpeg form, and the smallest file
 * reaching the aim is kept: on its own proxy a probe is the picture's file, so the sizes compared are
 * the files' own (mozjpeg's final encode, kept for the output). Each form is probed where the chosen
 * form's curve, shifted by the form's probe at the chosen quality, reaches the aim; its search goes on
 * only where that probe, near the aim, predicts a file SWITCH_GAIN smaller than mozjpeg's (the
 * prediction was 0-5 % under the searched file on the universal kind's small pictures, never over
 * it; the forms predicted closer than that were at most 0.7 % smaller searched). Predicted from the
 * probe at the chosen quality alone, as on larger pictures, it was off by up to 16 % either way.
 * Searched, jpegli made 4-10 % smaller files on 7 of those 19 pictures (photos: a lossy WebP, the
 * frames of an animated AVIF, a 10-bit AVIF), for 2-5 probes of 30-50 ms each per form.
 */
async function withJpegliOnItself(pixels: Pixels, sought: Sought, chosen: JpegChoice, seen: Scored[]): Promise<JpegChoice> {
  if (pixels.width * pixels.height < JPEGLI_LEAST_PIXELS || !(await jpegliAvailable())) return chosen;
  const { target, judgedAt, search } = sought;
  const probes = probesOf(pixels, search.proxyTiles);
  const aim = aimOnProxy(target, probes.exact);
  const base: Guide = { quality: chosen.quality, seen };
  // mozjpeg's file is encoded while jpegli's probes are.
  const mozjpeg = probes.final(chosen).then((jpeg) => ({ choice: chosen, bytes: jpeg.length }));
  const searched = async (form: JpegForm) => {
    try {
      const guide = shiftedGuide(base, await probes.score({ quality: chosen.quality, ...form }, judgedAt), aim);
      const first = { quality: firstProbe(guide.quality), ...form };
      const [score, size] = await Promise.all([probes.score(first, judgedAt), probes.size(first)]);
      if (Math.log(size) + (aim - score) * TYPICAL_SIZE_SLOPE > Math.log((await mozjpeg).bytes) + Math.log(1 - SWITCH_GAIN)) return undefined;
      const found = await searchQuality(pixels, { ...sought, form }, guide);
      const choice = { quality: found.quality, ...form, score: found.score };
      return { choice, bytes: await probes.size(choice) };
    } catch (err) {
      if (err instanceof JpegliFailed) return undefined;
      throw err;
    }
  };
  const forms = JPEGLI_FORMS.filter((f) => pixels.channels !== 1 || f.chroma === DEFAULT_FORM.chroma);
  // jpegli encodes in a process of its own: with a spare core both forms' probes run side by side.
  const files = [];
  if (search.ahead && spareCore()) files.push(...(await Promise.all(forms.map(searched))));
  else for (const form of forms) files.push(await searched(form));
  let best = await mozjpeg;
  for (const file of files) if (file && betterFile(file, best, aim)) best = file;
  return best.choice;
}

/**
 * Under this a JPEG of ours is a few kilobytes, and jpegli's probes, even with the program kept
 * serving, added a fifth to a half to the job of two of the corpus's four 0.03-0.04 MP pictures
 * (126 -> 182 ms, 175 -> 208 ms) to save bytes on one (a CMYK PSD: 168 of 2,171).
 */
const JPEGLI_LEAST_PIXELS = 100_000;

/** A file reaching the aim beats one that does not; of two that do, the smaller; of two that do not, the closer. */
function betterFile(a: { choice: JpegChoice; bytes: number }, b: { choice: JpegChoice; bytes: number }, aim: number): boolean {
  const [aReaches, bReaches] = [a.choice.score >= aim, b.choice.score >= aim];
  if (aReaches !== bReaches) return aReaches;
  return aReaches ? a.bytes < b.bytes : a.choice.score > b.choice.score;
}

/**
 * The form of a picture: each of FORMS probed once on the quarter-size guide proxy at the quality
 * the default form needs there, and its size at the target predicted along the default form's
 * own curve of size against score (their slopes are alike: each table scales all frequencies
 * together). The smallest prediction wins when it beats the default by SWITCH_GAIN, unless it is
 * one of mozjpeg's 4:2:0 forms with others predicted close to it: those are decided on the 1 MP
 * proxy (runoffOf). Small pictures, their own guide, are compared on themselves. Returns the form and its guide: the
 * default's own search there, or that search shifted for another form (shiftedGuide).
 */
async function chooseForm(pixels: Pixels, target: number, judgedAt: JudgedAt, search: SearchBudget): Promise<{ form: JpegForm; guide: Guide }> {
  const quarter = hasGuide(pixels, search) ? GUIDE_TILES : search.proxyTiles;
  const probes = probesOf(pixels, quarter);
  const aim = aimOnProxy(target, probes.exact);
  const guideSearch: SearchBudget = { ...search, proxyTiles: quarter };
  const base = await searchQuality(pixels, { target, judgedAt, form: DEFAULT_FORM, search: guideSearch }, null);
  const at = (form: JpegForm): JpegSetting => ({ quality: base.quality, ...form });
  const slope = await sizeSlope(probes, base.seen);
  // A grey picture is one component: its chroma subsampling is no choice. Nor jpegli, here: its one
  // probe beside mozjpeg's scaled ones led on grey photos where its file was 1-15 % larger, and its
  // lead then kept mozjpeg's runoff from running (a 12 MP grey photo: table 3 for table 5, 3.2 %
  // larger); a grey picture that is its own proxy still compares it on its files (withJpegliOnItself).
  const candidates = search.jpegli && quarter === GUIDE_TILES && pixels.channels !== 1 && (await jpegliAvailable()) ? [...FORMS, ...JPEGLI_FORMS] : FORMS;
  const forms = pixels.channels === 1 ? candidates.filter((f) => f.chroma === DEFAULT_FORM.chroma) : candidates;
  const predicted = await Promise.all(
    forms.map(async (form) => {
      try {
        const [score, size] = await Promise.all([probes.score(at(form), judgedAt), probes.size(at(form))]);
        return { form, score, bytes: Math.log(size) + (aim - score) * slope };
      } catch (err) {
        // jpegli failed on this picture: the others are compared without it.
        if (err instanceof JpegliFailed) return undefined;
        throw err;
      }
    }),
  );
  let predictions = predicted.filter((p) => p !== undefined);
  // A mozjpeg probe is written without the final encode's scan search, a jpegli probe is the final
  // file. Where jpegli leads, mozjpeg's probe sizes are scaled by what the final encode of the default
  // form makes of the same coefficients (0.65-0.99 of the probe: least on defocused pictures); where
  // it does not, the scaling could only widen mozjpeg's lead, and that encode is not made.
  const lead = predictions.reduce((a, b) => (b.bytes < a.bytes ? b : a));
  if (lead.form.table === 'jpegli') {
    const shrink = Math.log((await probes.final(at(DEFAULT_FORM))).length / (await probes.size(at(DEFAULT_FORM))));
    predictions = predictions.map((p) => (p.form.table === 'jpegli' ? p : { ...p, bytes: p.bytes + shrink }));
    const overtaken = predictions.reduce((a, b) => (b.bytes < a.bytes ? b : a));
    if (overtaken.form.table !== 'jpegli' && quarter === GUIDE_TILES && !probesOf(pixels, search.proxyTiles).exact) {
      return settleOnProxy(pixels, [lead, overtaken], { target, judgedAt, search, base, slope, quarterAim: aim, shrink });
    }
  } else if (quarter === GUIDE_TILES && lead.form.chroma === DEFAULT_FORM.chroma) {
    const runoff = runoffOf(predictions, lead);
    if (runoff.length > 1) return runoffOnProxy(pixels, runoff, { target, judgedAt, search, base, slope, quarterAim: aim });
  }
  const [baseline] = predictions;
  const best = predictions.reduce((a, b) => (b.bytes < a.bytes ? b : a));
  if (best === baseline || best.bytes > baseline.bytes + Math.log(1 - SWITCH_GAIN)) return { form: DEFAULT_FORM, guide: base };
  const shifted = shiftedGuide(base, best.score, aim);
  // On a small picture's own proxy the chosen form was probed at the default's answer already:
  // that free probe starts its search, and the shifted curve aims the next.
  return { form: best.form, guide: quarter === GUIDE_TILES ? shifted : { ...shifted, quality: base.quality } };
}

/** A form's predicted log bytes at the aim, from its probe at the default form's answer (chooseForm). */
interface Prediction {
  form: JpegForm;
  score: number;
  bytes: number;
}

/**
 * mozjpeg's forms of the leader's subsampling predicted on the quarter proxy within RUNOFF_RANGE of
 * it, at most RUNOFF of them, the leader first (runoffOnProxy decides between them). One probe each,
 * on a quarter of the tiles and far from its own answer, ranks close forms poorly: on 3 of 4 corpus
 * photos the smallest file (every form searched on the 1 MP proxy, encoded at full size) was the
 * second or third prediction (a 12 MP phone JPEG: table 4 chosen, table 5 5 % smaller at its lowest
 * passing quality; a 3 MP photo: the default kept, table 5 6 % smaller; a 24 MP photo: table 4,
 * table 6 1.5 % smaller), and on a grey text scan the smallest was predicted 11.5 % behind the
 * leader (table 5 chosen in the runoff: 11 % smaller, still reaching the target; a range of 8 % left it
 * out, one of 30 % took a worse form for a 3 MP photo). Not where jpegli leads: its probe is its
 * final file, and a size predicted from a probe at a shifted quality took the wrong side there (a
 * 12 MP HEIC 8.6 % larger).
 */
function runoffOf(predictions: Prediction[], lead: Prediction): Prediction[] {
  return predictions
    .filter((p) => p.form.table !== 'jpegli' && p.form.chroma === lead.form.chroma && p.bytes <= lead.bytes - Math.log(1 - RUNOFF_RANGE))
    .sort((a, b) => a.bytes - b.bytes)
    .slice(0, RUNOFF);
}

const RUNOFF_RANGE = 0.15;
const RUNOFF = 3;

/**
 * The runoff's forms probed once each on the search's own proxy, where the default's quarter-proxy
 * curve shifted to each form reaches the aim (its own answer for the default), their sizes at the
 * aim predicted from there along the default's slope: a probe near its answer, on the proxy that
 * decides the quality. The smallest wins (the default when within SWITCH_GAIN of it), and its
 * search starts from its probe. One 1 MP probe more for each form that loses; on the corpus the
 * 3 MP photo and the phone JPEG above took table 5 (5.6 and 5.2 % smaller files), a 12 MP DNG
 * table 2 (11 %), the 24 MP photo kept table 4.
 */
async function runoffOnProxy(
  pixels: Pixels,
  runoff: Prediction[],
  { target, judgedAt, search, base, slope, quarterAim }: FromQuarter,
): Promise<{ form: JpegForm; guide: Guide }> {
  const probes = probesOf(pixels, search.proxyTiles);
  const aim = aimOnProxy(target, probes.exact);
  const finalists = await Promise.all(
    runoff.map(async ({ form, score }) => {
      const guide = guideThere(form, score, base, quarterAim);
      const setting = { quality: guide.quality, ...form };
      const [s, size] = await Promise.all([probes.score(setting, judgedAt), probes.size(setting)]);
      return { form, guide, bytes: Math.log(size) + (aim - s) * slope };
    }),
  );
  const best = finalists.reduce((a, b) => (b.bytes < a.bytes ? b : a));
  const baseline = finalists.find((m) => m.form === DEFAULT_FORM);
  return baseline && best.bytes > baseline.bytes + Math.log(1 - SWITCH_GAIN) ? baseline : best;
}

/**
 * jpegli's leader and the mozjpeg form that overtook it once mozjpeg's final encode was counted,
 * each searched to its own answer on the 1 MP proxy (from the default's quarter-proxy curve shifted
 * to it), their sizes there compared at the aim, mozjpeg's scaled as in chooseForm; the smaller
 * wins, and its search, all probes made, is the one the picture's search repeats. On the quarter
 * proxy the two were within the scaling (1-2 %) of each other, each predicted from a probe 1-3
 * points from the aim: a 12 MP HEIC went to table 5, 1,338,988 B at 80.81 where jpegli's 4:4:4
 * makes 1,241,662 B at 80.44 (7 % smaller). One probe each near the answer misjudged the other
 * way (a 12 MP HEIC: table 6 chosen, 8.6 % larger than jpegli), so both are searched. Only where
 * the picture is larger than the proxy: on a 0.54 MP graphic, its own proxy, the two searches took
 * 12 more probes (1.7 s) for 1.4 %.
 */
async function settleOnProxy(
  pixels: Pixels,
  finalists: Prediction[],
  { target, judgedAt, search, base, slope, quarterAim, shrink }: FromQuarter & { shrink: number },
): Promise<{ form: JpegForm; guide: Guide }> {
  const probes = probesOf(pixels, search.proxyTiles);
  const aim = aimOnProxy(target, probes.exact);
  const settled = [];
  for (const { form, score } of finalists) {
    const guide = guideThere(form, score, base, quarterAim);
    const found = await searchQuality(pixels, { target, judgedAt, form, search }, guide);
    const size = await probes.size({ quality: found.quality, ...form });
    settled.push({ form, guide, bytes: Math.log(size) + (form.table === 'jpegli' ? 0 : shrink) + (aim - found.score) * slope });
  }
  return settled.reduce((a, b) => (b.bytes < a.bytes ? b : a));
}

/** What the quarter proxy's form choice hands to a decision on the search's own proxy (runoffOnProxy, settleOnProxy). */
interface FromQuarter {
  target: number;
  judgedAt: JudgedAt;
  search: SearchBudget;
  /** The default form's search on the quarter proxy. */
  base: Guide;
  /** d log(size) / d score along it (sizeSlope). */
  slope: number;
  /** The aim on the quarter proxy, where the forms' scores were measured. */
  quarterAim: number;
}

/** A form's guide from its quarter-proxy probe at the default's answer: the default's own search, or that search shifted to it. */
function guideThere(form: JpegForm, score: number, base: Guide, quarterAim: number): Guide {
  return form === DEFAULT_FORM ? base : shiftedGuide(base, score, quarterAim);
}

/**
 * The guide of another form without searching it: the default form's curve of log(100 - score)
 * against quality, shifted by what the other form scored at the default's answer (a table set or
 * subsampling moves the whole curve; its shape is the picture's). Its answer is where the shifted
 * curve reaches the aim. Searching the other form on the quarter proxy as well cost 3-8 more
 * probes, creeping along flat stretches, and aimed the 1 MP search no better.
 */
function shiftedGuide(base: Guide, scoreThere: number, aim: number): Guide {
  const seen = shiftedThrough(base, { q: base.quality, s: scoreThere });
  const goal = logLoss(aim);
  let quality = base.quality;
  if (logLossAt(seen, quality) <= goal) while (quality - 1 >= MIN_QUALITY && logLossAt(seen, quality - 1) <= goal) quality--;
  else while (quality + 1 <= MAX_QUALITY && logLossAt(seen, quality) > goal) quality++;
  return { quality, seen };
}

/** d log(size) / d score of the default form along a search's probes: through the first two far enough apart in score, or a typical slope. */
async function sizeSlope(probes: Probes, seen: Scored[]): Promise<number> {
  const points = [...seen].sort((a, b) => a.q - b.q).filter((p, i, all) => i === 0 || p.q !== all[i - 1].q);
  for (let i = 1; i < points.length; i++) {
    const [a, b] = [points[i - 1], points[i]];
    if (b.s - a.s > 0.5) {
      const [sa, sb] = await Promise.all([probes.size({ quality: a.q, ...DEFAULT_FORM }), probes.size({ quality: b.q, ...DEFAULT_FORM })]);
      const slope = (Math.log(sb) - Math.log(sa)) / (b.s - a.s);
      if (slope > 0 && Number.isFinite(slope)) return slope;
    }
  }
  return TYPICAL_SIZE_SLOPE;
}

/** Measured on camera photos around a score of 80: each point of SSIMULACRA2 costs about 4 % of the file. */
const TYPICAL_SIZE_SLOPE = 0.04;

/**
 * The lowest quality in [MIN_QUALITY, MAX_QUALITY] whose perceived quality reaches a
 * full-resolution target with the given form. Under a document budget (budget.ts) the first
 * probe is `search.start` and the search stops after `search.probes` once some quality has passed
 * (the check for a non-monotonic score below still runs), answering the lowest quality seen to pass.
 */
export async function chooseJpegQuality(
  pixels: Pixels,
  { target = PERCEIVED_TARGET, judgedAt = 'full', search = IMAGE_SEARCH, form = DEFAULT_FORM }: Partial<Sought> = {},
): Promise<number> {
  return phase('search', async () => (await searchQuality(pixels, { target, judgedAt, search, form })).quality);
}

/** What a quality search looks for: a full-resolution `target` judged at `judgedAt`, in a form, within a search budget. */
export interface Sought {
  target: number;
  judgedAt: JudgedAt;
  form: JpegForm;
  search: SearchBudget;
}

/** Whether a setting's proxy probe reaches a full-resolution target, as chooseJpegQuality judges it. */
export async function reaches(pixels: Pixels, setting: JpegSetting, target: number, judgedAt: JudgedAt = 'full'): Promise<boolean> {
  const probes = probesOf(pixels);
  return (await probes.score(setting, judgedAt)) >= aimOnProxy(target, probes.exact);
}

/** The full-resolution score a setting's proxy probe predicts. */
export async function predictedScore(pixels: Pixels, setting: JpegSetting, judgedAt: JudgedAt = 'full'): Promise<number> {
  const probes = probesOf(pixels);
  return fromProxy(await probes.score(setting, judgedAt), probes.exact);
}

/** Bytes of a setting's full-size file as its proxy probe predicts them (a baseline encode: the final one is a few per cent smaller). */
async function predictedBytes(pixels: Pixels, setting: JpegSetting): Promise<number> {
  const probes = probesOf(pixels);
  return ((await probes.size(setting)) * pixels.width * pixels.height) / (probes.proxy.width * probes.proxy.height);
}

/** What a full search's guide (see searchQuality) found on the quarter-size proxy: its answer and its probes. */
interface Guide {
  quality: number;
  seen: Scored[];
}

/** Whether a full search on these pixels is guided: the quarter proxy is less than half the full one. */
function hasGuide(pixels: Pixels, search: SearchBudget): boolean {
  if (search.probes !== Infinity || search.proxyTiles <= GUIDE_TILES) return false;
  return probesOf(pixels, GUIDE_TILES).proxy.data.length * 2 < probesOf(pixels, search.proxyTiles).proxy.data.length;
}

/**
 * A full search is first run on a quarter-size proxy (a quarter of the cost per probe). Its
 * answer is the first probe on the full proxy, and its curve, shifted by what that probe
 * measured, aims the second: usually one to three probes where the search alone takes four to
 * six. The answer is still the lowest quality the full proxy passes with the one below it
 * failing (or, after a first probe that passed, put clearly under the aim by that curve: see
 * belowClearlyFails), so it is the unguided search's own wherever the score rises with quality.
 * No guide for a search under a document budget, or where the full proxy is small already.
 */
async function guideOf(pixels: Pixels, sought: Sought): Promise<Guide | undefined> {
  if (!hasGuide(pixels, sought.search)) return undefined;
  return searchQuality(pixels, { ...sought, search: { ...sought.search, proxyTiles: GUIDE_TILES } }, null);
}

/**
 * The lowest quality reaching a full-resolution `target` on the proxy of `search.proxyTiles`
 * tiles (aiming at aimOnProxy there), and the proxy score it reaches; the first probe at the
 * guide's answer (guideOf; `null`: none, as for the guide's own search, which also skips the
 * noisy check), else at `search.start`.
 */
async function searchQuality(pixels: Pixels, sought: Sought, guided?: Guide | null, likely?: (quality: number) => void): Promise<{ quality: number; score: number; seen: Scored[] }> {
  const { target, judgedAt, form, search } = sought;
  const probes = probesOf(pixels, search.proxyTiles);
  const aim = aimOnProxy(target, probes.exact);
  const guide = guided === undefined ? await guideOf(pixels, sought) : (guided ?? undefined);
  const start = guide?.quality ?? search.start ?? PROBE_QUALITY;
  const score = (q: number): Promise<number> => probes.score({ quality: q, ...form }, judgedAt);
  // Probe two typical qualities (after a guide: its answer, then where its curve points), then
  // aim at the target along the secant of log(100 - score) (secantProbe). 3-5 proxy encodes in
  // practice, 2-3 after a guide.
  const bracket = new Bracket(score, aim, search.probes);
  const first = firstProbe(start);
  // With a spare core the probes a search guided from the quarter proxy most likely asks for
  // next are encoded and decoded ahead (by libvips's threads): its answer first, alone, so that
  // it is ready soonest; the qualities either side once it is, while this thread scores it.
  // Scoring stays on demand: it runs on this thread. The noisy check below is settled on the
  // quarter proxy first, where it nearly always fails, so its full-proxy probe is not started
  // ahead (it was wasted work). A first probe scored already (a runoff's winner: runoffOnProxy)
  // leaves nothing to overlap: the next probe is asked for at once, and may be farther than one.
  if (guide && hasGuide(pixels, search) && search.ahead && spareCore() && !probes.scored({ quality: first, ...form }, judgedAt)) {
    const around = [first - 1, first + 1].filter((q) => q >= MIN_QUALITY);
    void probes.prefetch({ quality: first, ...form }).then(() => around.forEach((q) => void probes.prefetch({ quality: q, ...form })));
  }
  await bracket.probe(first);
  if (guide && belowClearlyFails(bracket, guide)) bracket.lo = first - 1;
  // `likely` hears the answer a probe is predicted to close the search on, before it is made: the
  // second probe's outcome predicted by the guide's curve shifted through the first, later ones' by the probes.
  const probe = (q: number, curve: Scored[]) => {
    const answer = likely && answerAfter(bracket, q, curve);
    if (answer !== undefined) likely!(answer);
    return bracket.probe(q);
  };
  if (bracket.hasLeft && !bracket.done) await probe(secondProbe(bracket, first, guide), guide ? shiftedThrough(guide, bracket.seen[0]) : []);
  while (!bracket.done) await probe(secantProbe(bracket), bracket.seen);
  // jpegli quantises without trellis: the flips noisyFloor looks for are mozjpeg's.
  const found = guided === null || form.table === 'jpegli' ? Math.max(MIN_QUALITY, bracket.hi) : await noisyFloor(pixels, sought, { hi: bracket.hi, aim, score, guide });
  return { quality: found, score: await score(found), seen: bracket.seen };
}

/**
 * The answer a search closes on after a probe at q, where `curve` predicts the probe's outcome (along
 * log(100 - score), as the secant aims) and that outcome closes the bracket; undefined otherwise.
 */
export function answerAfter({ seen, aim, lo, hi }: Bracket, q: number, curve: Scored[]): number | undefined {
  if (curve.length < 2) return undefined;
  if (logLossAt(curve, q) <= logLoss(aim)) return q - 1 <= lo ? q : undefined;
  // A top end never probed is only assumed to pass.
  return hi - q <= 1 && seen.some((p) => p.q === hi) ? hi : undefined;
}

/** A guide's curve shifted through one point: another form's probe at the guide's answer (shiftedGuide), or the search's first probe on its own proxy (as secondProbe aims with it). */
function shiftedThrough(guide: Guide, { q, s }: Scored): Scored[] {
  const shift = logLoss(s) - logLossAt(guide.seen, q);
  return guide.seen.map((p) => ({ q: p.q, s: 100 - Math.exp(logLoss(p.s) + shift) }));
}

/** A search's first probe from where it starts: one quality below the highest, so that a pass there still leaves one above. */
function firstProbe(start: number): number {
  return Math.min(MAX_QUALITY - 1, Math.max(MIN_QUALITY, start));
}

/**
 * Whether a first probe at the guide's answer that passed needs no probe below it: the guide's
 * curve, shifted by what the first probe measured, puts the quality below at least
 * CONFIRM_MARGIN under the aim. That probe was the search's usual last one, and it failed on
 * every corpus picture where the shifted curve said so (predicted against measured: 80.31 and
 * 79.71, 79.91 and 80.09, 79.71 and 79.69 against an aim of 81.2). Nearer the aim it is made.
 */
export function belowClearlyFails({ seen, aim, lo, hi }: Bracket, guide: Guide): boolean {
  const [{ q, s }] = seen;
  if (seen.length !== 1 || hi !== q || q - 1 <= lo) return false;
  const shift = logLoss(s) - logLossAt(guide.seen, q);
  return logLossAt(guide.seen, q - 1) + shift >= logLoss(aim - CONFIRM_MARGIN);
}

/** How far under the aim the guide's shifted curve must put the quality below a passing first probe for it to be taken as failing. */
const CONFIRM_MARGIN = 0.5;

/** The second probe: a typical step from the first, or after a guide where its curve, shifted by the first probe, reaches the aim. */
function secondProbe({ seen, aim, lo, hi }: Bracket, first: number, guide: Guide | undefined): number {
  const pass = seen[0].s >= aim;
  let second = pass ? first - PROBE_STEP : first + PROBE_STEP;
  if (guide) {
    const goal = logLoss(aim);
    const shift = logLoss(seen[0].s) - logLossAt(guide.seen, first);
    let q = first;
    if (pass) while (q - 1 > lo && logLossAt(guide.seen, q - 1) + shift <= goal) q--;
    else while (q + 1 < hi && logLossAt(guide.seen, q) + shift > goal) q++;
    second = q !== first ? q : pass ? first - 1 : first + 1;
  }
  return Math.min(MAX_QUALITY, Math.max(MIN_QUALITY, second));
}

/**
 * The score rises with quality on ordinary images, but not where the signal is mostly noise a
 * few code values deep (nearly black or flat images): there whether trellis keeps that noise
 * flips from one quality to the next. One probe well below the search's answer `hi` tells; when
 * it passes, the qualities below it are scanned for the lowest that passes. After a guide from
 * the quarter-size proxy the check is made there first, a quarter of the cost: the same noise
 * shows in both.
 */
async function noisyFloor(
  pixels: Pixels,
  { target, judgedAt, form, search }: Sought,
  { hi, aim, score, guide }: { hi: number; aim: number; score: (q: number) => Promise<number>; guide: Guide | undefined },
): Promise<number> {
  const check = hi - NOISY_CHECK;
  let found = Math.max(MIN_QUALITY, hi);
  const quarter = guide && hasGuide(pixels, search) ? probesOf(pixels, GUIDE_TILES) : undefined;
  const quarterPasses = async () => !quarter || (await quarter.score({ quality: check, ...form }, judgedAt)) >= aimOnProxy(target, quarter.exact);
  if (check >= MIN_QUALITY && (await quarterPasses()) && (await score(check)) >= aim) {
    found = check;
    for (let q = MIN_QUALITY; q < check; q += NOISY_STEP) {
      if ((await score(q)) >= aim) {
        found = q;
        break;
      }
    }
    for (let q = found - 1; q > found - NOISY_STEP && q >= MIN_QUALITY; q--) if ((await score(q)) >= aim) found = q;
  }
  return found;
}

/** Distance below the answer of the probe that detects a non-monotonic score, and the scan's step. */
const NOISY_CHECK = 10;
const NOISY_STEP = 3;

/** Tiles of the guide proxy of a full search (a quarter of PROXY_TILES). */
const GUIDE_TILES = 16;

interface Probes {
  proxy: Pixels;
  /** The proxy is the whole picture: its scores are the picture's own. */
  exact: boolean;
  /** Proxy SSIMULACRA2 of a setting as judged at `judgedAt` (memoised). */
  score(setting: JpegSetting, judgedAt: JudgedAt): Promise<number>;
  /** Bytes of the proxy's probe encode of a setting (memoised with the scores). */
  size(setting: JpegSetting): Promise<number>;
  /** The proxy's final encode of a setting (memoised: on an exact proxy, the picture's output). */
  final(setting: JpegSetting): Promise<Buffer>;
  /** Starts a setting's encode and decode ahead of its score; resolves when they are done (never rejects). */
  prefetch(setting: JpegSetting): Promise<void>;
  /** Whether a setting's score is known or being made. */
  scored(setting: JpegSetting, judgedAt: JudgedAt): boolean;
}

const probesByPixels = new WeakMap<Uint8Array, Map<number, Probes>>();

/** A probe's encode and decode are kept under its setting; its score under the way it is judged too. */
const settingKey = (s: JpegSetting): string => `${s.table}:${s.chroma}:${s.quality}`;

/**
 * The quality probes of one image, shared by every search on it (the form choice, the target and
 * the floor searches probe many of the same settings): the proxy is cut once, each setting is
 * encoded and decoded once, and the reference is prepared once per way of judging.
 */
export function probesOf(pixels: Pixels, tiles = PROXY_TILES): Probes {
  const byTiles = probesByPixels.get(pixels.data) ?? new Map<number, Probes>();
  probesByPixels.set(pixels.data, byTiles);
  const known = byTiles.get(tiles);
  if (known) return known;
  const proxy = proxyOf(pixels, tiles);
  const decodes = new Map<string, Promise<Pixels>>();
  const scores = new Map<string, Promise<number>>();
  const references = new Map<JudgedAt, Ssimulacra2Reference>();
  const view = (p: Pixels, judgedAt: JudgedAt) => (judgedAt === 'sensor' ? bin2x2(p) : p);
  const reference = (judgedAt: JudgedAt) => {
    let r = references.get(judgedAt);
    if (!r) {
      r = new Ssimulacra2Reference(view(proxy, judgedAt));
      references.set(judgedAt, r);
    }
    return r;
  };
  // One encode per setting, shared by its size and its scores.
  const encode = perSetting((s) => {
    noteProbe(proxy.width * proxy.height);
    return encodeJpeg(proxy, s, 'probe');
  });
  const finalEncode = perSetting((s) => encodeJpeg(proxy, s));
  const decode = (s: JpegSetting): Promise<Pixels> => {
    const key = settingKey(s);
    let pixels = decodes.get(key);
    if (!pixels) {
      pixels = encode(s).then(async (jpeg) => {
        const { data, info } = await sharp(jpeg).raw().toBuffer({ resolveWithObject: true });
        return { data, width: proxy.width, height: proxy.height, channels: info.channels };
      });
      decodes.set(key, pixels);
    }
    return pixels;
  };
  const probes: Probes = {
    proxy,
    exact: proxy === pixels,
    size: async (s) => (await encode(s)).length,
    // jpegli's probe is its final file.
    final: (s) => (s.table === 'jpegli' ? encode(s) : finalEncode(s)),
    prefetch: (s) => decode(s).then(
      () => {},
      () => {},
    ),
    scored: (s, judgedAt) => scores.has(`${judgedAt}:${settingKey(s)}`),
    score: (s, judgedAt) => {
      const key = `${judgedAt}:${settingKey(s)}`;
      let hit = scores.get(key);
      if (!hit) {
        const decoding = decode(s);
        // The first score of a proxy prepares its reference (0.1-0.2 s at 1 MP) while
        // the probe is encoded, instead of after.
        reference(judgedAt).prepare();
        // A decode is held only until scored: a search's probes would otherwise keep megabytes each.
        hit = decoding.then((decoded) => {
          decodes.delete(settingKey(s));
          return reference(judgedAt).score(view(decoded, judgedAt));
        });
        scores.set(key, hit);
      }
      return hit;
    },
  };
  byTiles.set(tiles, probes);
  return probes;
}

/** What is made of a setting, made once per setting. */
function perSetting<T>(make: (s: JpegSetting) => T): (s: JpegSetting) => T {
  const made = new Map<string, T>();
  return (s) => {
    const key = settingKey(s);
    if (!made.has(key)) made.set(key, make(s));
    return made.get(key)!;
  };
}

/** Each 2×2 block's mean (odd last row or column dropped): what a Bayer sensor recorded of a developed picture. */
export function bin2x2(p: Pixels): Pixels {
  const w = p.width >> 1;
  const h = p.height >> 1;
  const c = p.channels;
  const data = new Uint8Array(w * h * c);
  const row = p.width * c;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const a = (2 * y * p.width + 2 * x) * c;
      for (let k = 0; k < c; k++) data[(y * w + x) * c + k] = (p.data[a + k] + p.data[a + c + k] + p.data[a + row + k] + p.data[a + row + c + k] + 2) >> 2;
    }
  }
  return { data, width: w, height: h, channels: c };
}

/**
 * The JPEG of a setting, without metadata: mozjpeg's final encode (jpegOptions), or for a `probe`
 * its probe encode (probeOptions: the same pixels); jpegli's file is the same for both.
 */
export function encodeJpeg(p: Pixels, setting: JpegSetting, purpose: 'final' | 'probe' = 'final'): Promise<Buffer> {
  if (setting.table === 'jpegli') return encodeJpegli(p, setting.quality, setting.chroma);
  const options = jpegOptions(setting);
  return jpegPipeline(p).jpeg(purpose === 'probe' ? probeOptions(options) : options).toBuffer();
}

/**
 * The picture's final encode of a setting: on a picture that is its own proxy, the one its search
 * made, where it made it (withJpegliOnItself); else the one begun before its search answered
 * (encodeAhead) when it is of this setting.
 */
export async function finalJpeg(pixels: Pixels, setting: JpegSetting): Promise<Buffer> {
  const own = proxyPixels(pixels.width, pixels.height, IMAGE_SEARCH.proxyTiles) === pixels.width * pixels.height;
  if (own) return probesOf(pixels, IMAGE_SEARCH.proxyTiles).final(setting);
  const begun = encodedAhead.get(pixels.data);
  encodedAhead.delete(pixels.data);
  return (begun && settingKey(begun.setting) === settingKey(setting) && (await begun.jpeg)) || encodeJpeg(pixels, setting);
}

/**
 * A picture's final encode begun before its search answered: its setting, whether it was begun (not
 * where the answer's file would be clearly over the caller's limit, or the memory was not there), its file.
 */
const encodedAhead = new WeakMap<Uint8Array, { setting: JpegSetting; begun: Promise<boolean>; jpeg: Promise<Buffer | undefined>; tries: number }>();

/** The setting whose final encode was begun ahead of the picture's answer and not yet taken (finalJpeg), if any. */
export async function begunAhead(pixels: Pixels): Promise<JpegSetting | undefined> {
  const ahead = encodedAhead.get(pixels.data);
  return ahead && (await ahead.begun) ? ahead.setting : undefined;
}

/**
 * Begins the picture's final encode at the setting its search is predicted to answer, while the
 * probe that decides it runs, on a core that would otherwise sit idle (a search's probes and
 * scores run one after another). The last probes decide between neighbouring qualities, and the
 * first guess held on 8 of 12 of the corpus's photos, the second (AHEAD_TRIES) on 3 of the other 4;
 * 7 of 8 photos' jobs took 50-270 ms less (docs/benchmarks.md). A wrong guess is left to finish
 * unused, beside the right encode: so its memory (AHEAD_BYTES_PER_PIXEL) is asked of the node's
 * budget first, and the encode is not begun unless the budget has it at once.
 */
function encodeAhead(pixels: Pixels, setting: JpegSetting, within?: number): void {
  const before = encodedAhead.get(pixels.data);
  const tries = (before?.tries ?? 0) + 1;
  if ((before && settingKey(before.setting) === settingKey(setting)) || tries > AHEAD_TRIES || !spareCore()) return;
  const fits = async () => within === undefined || (await predictedBytes(pixels, setting)) <= within * AHEAD_CLEARLY_OVER;
  const room = async () => (await fits()) && (await reserveMoreMemoryNow(pixels.width * pixels.height * AHEAD_BYTES_PER_PIXEL));
  const begun = room();
  const jpeg = begun.then((yes) => (yes ? encodeJpeg(pixels, setting) : undefined));
  // Never taken, its failure is no one's: a final encode made anew meets it.
  jpeg.catch(() => {});
  encodedAhead.set(pixels.data, { setting, begun, jpeg, tries });
}

/**
 * An answer whose file the proxy predicts this much over the caller's size limit (`answerWithin`) is not
 * begun: the size rule would encode a lower quality (the proxy's share of the pixels predicts within about 10 %).
 */
const AHEAD_CLEARLY_OVER = 1.1;

/** Guesses a picture's search may begin: a second, when the last probe but one proved the first wrong, starts the right encode a probe early. */
const AHEAD_TRIES = 2;

/**
 * A second final encode's memory a pixel: mozjpeg's coefficients, 3 bytes a pixel at 4:2:0 and 6 at
 * 4:4:4 (a 24 MP photo's process peaked 145 MB higher with both encodes running).
 */
const AHEAD_BYTES_PER_PIXEL = 6;

/** A sharp pipeline over raw 1- or 3-channel pixels that encodes as many JPEG components (sharp writes one channel as three unless told it is grey). */
export function jpegPipeline(p: Pixels): Sharp {
  const img = sharp(p.data, { raw: rawOf(p) });
  return p.channels === 1 ? img.toColourspace('b-w') : img;
}

export { encodePng, type PngEncoded } from './png-encode.ts';
export { proxyOf } from './proxy.ts';
