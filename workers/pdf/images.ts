import { PDFName, PDFNumber, PDFRawStream } from 'pdf-lib';
import type { PDFContext, PDFObject, PDFRef } from 'pdf-lib';
import type { Pixels } from '../image/ssim.ts';
import { isGeneric, predictorOf, undoFilters, unpredict } from './decode.ts';
import { encodeFlateImage, type FlateImage } from './flate.ts';
import { imageInfo, type ImageInfo } from './image-info.ts';
import { greyOf } from '../image/door.ts';
import { PREDICTED_SEARCH_MS, predictedEncodeMs } from '../image/encode.ts';
import { encodePhoto } from './jpeg.ts';
import { ClassQualities, planDocument, type BudgetedPicture, type DocumentPicture } from '../image/budget.ts';
import { DocumentCaps } from '../shared/document-caps.ts';
import { Lanes } from '../shared/lanes.ts';
import { estimatedProgress, type Toward } from '../shared/progress.ts';
import { reserveMemory } from '../shared/memory.ts';
import { alreadyAsCoarse, lumaQuantSum } from '../image/jpeg-quant.ts';
import { resamplingLoss, VIEW_TARGET } from './quality.ts';
import { name, nameOf, rawStreams, replaceStream } from './objects.ts';
import type { DisplaySize } from './placements.ts';
import { decodeJpeg, expandPalette, looksPhotographic, resample } from './pixels.ts';

/**
 * Images drawn above TRIGGER_PPI on the page are resampled to TARGET_PPI (the /ebook class, fine
 * enough for print previews and 150 % zoom); the 10 % slack spares images barely above it a
 * resampling blur that saves few bytes.
 */
export const TARGET_PPI = 150;
export const TRIGGER_PPI = 165;
/** The strictest perceived quality asked of a JPEG after resampling: beyond it quality 95 is reached for nothing. */
const MAX_JPEG_TARGET = 90;
/** One image's decoded samples may take at most this much memory; larger images are left as they are. */
export const MAX_IMAGE_BYTES = 320 * 1024 * 1024;
/** A lossy re-encode of a JPEG at the same size must save this share, or a generation loss buys too little. */
const MIN_JPEG_GAIN = 0.1;

/** Flat artwork becomes JPEG only below this share of its lossless size. */
const JPEG_OVER_FLATE = 0.75;

const UNTOUCHED_FILTERS = new Set(['CCITTFaxDecode', 'JBIG2Decode', 'JPXDecode', 'Crypt']);

/** A replacement stream; `score`: its perceived quality as seen on the page, when JPEG. */
type Outcome = { contents: Uint8Array; set: Record<string, PDFObject>; drop: string[]; score?: number };

/**
 * Recompresses the image XObjects within the document's bounds (shared/document-caps.ts), a few at a time (lanes.ts: two, or one over its pixel bound),
 * the results applied in document order.
 * `sizes` gives where each image is drawn (soft masks inherit their image's size). The quality
 * searches share one document budget (planDocument): a document of many large or many similar
 * pictures searches less per picture. Returns how many images were replaced, and the lowest
 * perceived quality of those that became JPEGs.
 */
export async function optimizeImages(
  ctx: PDFContext,
  sizes: Map<PDFRef, DisplaySize>,
  onProgress: (fraction: number, toward?: Toward) => void,
  signal: AbortSignal,
): Promise<{ replaced: number; perceived?: number }> {
  const caps = new DocumentCaps();
  // Images past the document's bounds (tiny, past the count, the pixel total or the memory budget) keep their bytes.
  const images = documentImages(ctx, sizes).filter((image, i) => caps.admit(String(i), image.info.width * image.info.height));
  await reserveMemory(caps.peakBytes(), 'This document');
  const plan = planDocument(images.map((i) => i.picture));
  const classes = new ClassQualities(images.map((image, i) => ({ similar: image.picture.similar, search: plan.searches[i] })));
  const lanes = new Lanes(
    images.length,
    async (i): Promise<Outcome | undefined> => {
      try {
        return await classes.run(i, (budget) => {
          signal.throwIfAborted();
          return recompress(ctx, images[i], budget);
        });
      } catch {
        // An image we cannot decode (corrupt data, over the memory bound) is kept byte for byte.
        return undefined;
      }
    },
    (i) => images[i].info.width * images[i].info.height,
    caps.lanes(),
  );
  let replaced = 0;
  let perceived: number | undefined;
  // Progress by pixels, each picture moving by its predicted time while it is awaited.
  const weights = images.map((image) => PICTURE_FIXED_PIXELS + image.info.width * image.info.height);
  const total = weights.reduce((a, b) => a + b, 0);
  let done = 0;
  for (const [i, image] of images.entries()) {
    signal.throwIfAborted();
    const span = { from: done / total, to: (done += weights[i]) / total, predictedMs: PREDICTED_SEARCH_MS + predictedEncodeMs(weights[i]) };
    onProgress(span.from);
    const outcome = await estimatedProgress(() => lanes.take(i), span, onProgress);
    if (!outcome) continue;
    const { ref, stream } = image;
    const dict = stream.dict.clone(ctx);
    for (const key of outcome.drop) dict.delete(name(key));
    for (const [key, value] of Object.entries(outcome.set)) dict.set(name(key), value);
    replaceStream(ctx, ref, dict, outcome.contents);
    replaced++;
    if (outcome.score !== undefined) perceived = Math.min(perceived ?? 100, outcome.score);
  }
  onProgress(1);
  return { replaced, perceived };
}

/** A picture's fixed cost in progress, as pixels: reading, planning and writing it take time however small it is. */
const PICTURE_FIXED_PIXELS = 65_536;

interface DocumentImage {
  ref: PDFRef;
  stream: PDFRawStream;
  info: ImageInfo;
  placement: Placement;
  isSoftMask: boolean;
  picture: DocumentPicture;
}

/**
 * Every image XObject with its placement and what the document budget needs to know of it,
 * read from the dictionaries alone (nothing is decoded).
 */
export function documentImages(ctx: PDFContext, sizes: Map<PDFRef, DisplaySize>): DocumentImage[] {
  const images = rawStreams(ctx).filter(([, s]) => nameOf(ctx, s.dict.get(name('Subtype'))) === 'Image');
  const smasks = new Set<PDFRef>();
  const fixedSize = new Set<PDFRef>();
  for (const [ref, stream] of images) {
    const info = imageInfo(ctx, stream.dict);
    if (!info?.smask) continue;
    smasks.add(info.smask);
    const own = sizes.get(ref);
    if (own && !sizes.has(info.smask)) sizes.set(info.smask, own);
    if (info.matte) fixedSize.add(ref).add(info.smask);
  }
  const out: DocumentImage[] = [];
  for (const [ref, stream] of images) {
    const info = imageInfo(ctx, stream.dict);
    if (!info) continue;
    const ppi = effectivePpi(info, sizes.get(ref));
    const size = fixedSize.has(ref) ? undefined : targetSize(info, ppi);
    const { width, height } = size ?? info;
    const codec = info.filters.map((f) => f.name).join('+');
    const quant = info.filters.length === 1 && codec === 'DCTDecode' ? lumaQuantSum(stream.contents) : undefined;
    const similar = [codec, quant, info.width, info.height, info.components, info.bitsPerComponent, ppi?.toFixed(0)].join(' ');
    out.push({ ref, stream, info, placement: { size, ppi }, isSoftMask: smasks.has(ref), picture: { width, height, decoded: info.width * info.height, similar } });
  }
  return out;
}

/** Pixels per inch at which an image is drawn (the coarser axis), or undefined when its placement is unknown. */
export function effectivePpi(info: ImageInfo, display: DisplaySize | undefined): number | undefined {
  if (!display || display.width <= 0 || display.height <= 0) return undefined;
  return Math.min(info.width / (display.width / 72), info.height / (display.height / 72));
}

/** Pixel size an image should be resampled to, or undefined when its resolution is already modest. */
export function targetSize(info: ImageInfo, ppi: number | undefined): { width: number; height: number } | undefined {
  if (ppi === undefined || !(ppi > TRIGGER_PPI)) return undefined;
  const scale = TARGET_PPI / ppi;
  return { width: Math.max(1, Math.round(info.width * scale)), height: Math.max(1, Math.round(info.height * scale)) };
}

interface Placement {
  /** Pixel size to resample to, when the image is drawn above TRIGGER_PPI. */
  size?: { width: number; height: number };
  ppi?: number;
}

async function recompress(ctx: PDFContext, image: DocumentImage, budget: BudgetedPicture): Promise<Outcome | undefined> {
  const { filters } = image.info;
  if (filters.some((f) => UNTOUCHED_FILTERS.has(f.name))) return undefined;
  if (filters[filters.length - 1]?.name === 'DCTDecode') return recompressJpeg(ctx, image, budget);
  if (!filters.every(isGeneric)) return undefined;
  const samples = decodedSamples(ctx, image);
  if (!samples) return undefined;
  const { info, stream } = image;
  let pixels: Pixels | undefined;
  let colourSpace: PDFObject | undefined;
  const { palette } = info;
  if (palette && image.placement.size && !info.hasDecode && (palette.base === 'gray' || palette.base === 'rgb')) {
    // Indices cannot be averaged: resampling an Indexed image goes through its base colours.
    pixels = expandPalette(samples, info, palette);
    colourSpace = palette.baseSpace;
  } else if (info.bitsPerComponent === 8 && !info.imageMask && (info.colour === 'gray' || info.colour === 'rgb')) {
    pixels = { data: samples, width: info.width, height: info.height, channels: info.components };
  }
  if (!pixels) {
    const flate = await encodeFlateImage(samples, { width: info.width, colors: info.components, bitsPerComponent: info.bitsPerComponent, palette: palette !== undefined });
    if (flate.data.length >= stream.contents.length) return undefined;
    return flateOutcome(ctx, flate, info);
  }
  // Samples stored losslessly have no decoder rounding: grey means exactly R = G = B here.
  const grey = pixels.channels === 3 && info.deviceRgb && !info.hasDecode ? greyOf(pixels, 0) : undefined;
  if (grey) {
    pixels = grey;
    colourSpace = PDFName.of('DeviceGray');
  }
  const out = await encodePixels(ctx, { image, pixels, budget });
  if (!out || out.contents.length >= stream.contents.length) return undefined;
  return colourSpace ? withColourSpace(out, colourSpace) : out;
}

/** A DCTDecode image decoded and encoded again as JPEG (smaller, or resampled to its placement). */
async function recompressJpeg(ctx: PDFContext, { stream, info, placement }: DocumentImage, budget: BudgetedPicture): Promise<Outcome | undefined> {
  const { search, known } = budget;
  const { filters } = info;
  const last = filters[filters.length - 1];
  if (!filters.slice(0, -1).every(isGeneric) || info.bitsPerComponent !== 8) return undefined;
  if (info.components !== 1 && info.components !== 3) return undefined;
  // A ColorTransform that overrides the JPEG's own markers is not something sharp can honour.
  if (info.components === 3 && last.parms?.get(name('ColorTransform')) !== undefined) return undefined;
  const jpeg = undoFilters(ctx, filters.slice(0, -1), stream.contents, MAX_IMAGE_BYTES);
  // Under a reduced budget, a JPEG kept at its size and already as coarse as its class's quality cannot gain: not even decoded.
  if (search.probes !== Infinity && !placement.size && known.quality !== undefined && (await alreadyAsCoarse(jpeg, known.quality))) return undefined;
  let pixels = await decodeJpeg(jpeg, info.components);
  if (pixels.channels !== info.components || pixels.width !== info.width || pixels.height !== info.height) return undefined;
  // A grey picture stored as a colour JPEG becomes a one-component JPEG (image/door.ts).
  const grey = pixels.channels === 3 && info.deviceRgb && !info.hasDecode ? greyOf(pixels) : undefined;
  if (grey) pixels = grey;
  const fitted = await fitInClass(pixels, placement, budget);
  const ceiling = stream.contents.length * (fitted.resampled ? 1 : 1 - MIN_JPEG_GAIN);
  const { target, loss } = fitted.aim();
  const photo = await encodePhoto(fitted.pixels, fitted.ppi, { target, search, ceiling });
  // A search stopped at the ceiling found no quality: its class's later pictures go by the others'.
  budget.found({ quality: photo?.quality, loss });
  if (!photo || photo.data.length >= ceiling) return undefined;
  const out = { ...jpegOutcome(photo.data, fitted.pixels), score: photo.score };
  return grey ? withColourSpace(out, PDFName.of('DeviceGray')) : out;
}

/** The samples of a generically filtered image, predictors undone, or undefined when they are too large or too short. */
function decodedSamples(ctx: PDFContext, { stream, info }: DocumentImage): Uint8Array | undefined {
  const { filters } = info;
  const rowBytes = Math.ceil((info.width * info.components * info.bitsPerComponent) / 8);
  const expected = rowBytes * info.height;
  if (expected > MAX_IMAGE_BYTES) return undefined;
  let samples = undoFilters(ctx, filters, stream.contents, { sized: expected + info.height * 8 + 4096 });
  const predictor = predictorOf(ctx, filters);
  if (predictor) samples = unpredict(samples, predictor);
  if (samples.length < expected) return undefined;
  return samples.subarray(0, expected);
}

/**
 * 8-bit grey or RGB pixels fitted to their placement and stored as Flate or JPEG, whichever
 * suits: photos as JPEG, artwork as Flate unless JPEG is far smaller; soft masks and
 * colour-keyed images only losslessly.
 */
async function encodePixels(ctx: PDFContext, { image, pixels, budget }: { image: DocumentImage; pixels: Pixels; budget: BudgetedPicture }): Promise<Outcome | undefined> {
  const fitted = await fitInClass(pixels, image.placement, budget);
  pixels = fitted.pixels;
  const lossyAllowed = !image.isSoftMask && !image.info.colourKey;
  const photo = lossyAllowed && looksPhotographic(pixels);
  const flate = photo ? undefined : await encodeFlateImage(pixels.data, { width: pixels.width, colors: pixels.channels, bitsPerComponent: 8, palette: false });
  // Deflate beating 20:1 means flat artwork, where JPEG cannot compete: skip the costly try.
  const tryJpeg = lossyAllowed && (flate === undefined || flate.data.length * 20 > pixels.data.length);
  // Artwork goes lossy only when JPEG wins by far: exact edges are worth some bytes.
  const ceiling = Math.min(image.stream.contents.length, flate ? flate.data.length * JPEG_OVER_FLATE : Infinity);
  const aim = tryJpeg ? fitted.aim() : undefined;
  const photoJpeg = aim ? await encodePhoto(pixels, fitted.ppi, { target: aim.target, search: budget.search, ceiling }) : undefined;
  budget.found({ quality: photoJpeg?.quality, loss: aim?.loss });
  const jpeg = photoJpeg?.data;
  const useJpeg = jpeg !== undefined && jpeg.length < ceiling;
  return useJpeg ? { ...jpegOutcome(jpeg, pixels), score: photoJpeg?.score } : flate && flateOutcome(ctx, flate, pixels);
}

interface Fitted {
  pixels: Pixels;
  /** Where the pixels are drawn, in pixels per inch. */
  ppi: number | undefined;
  resampled: boolean;
  /**
   * The perceived quality the JPEG encode must keep as seen on the page (the page's target plus
   * what resampling spent), and what resampling spent when it was measured on these pixels.
   * Measured when called, once, before a JPEG is tried: a picture kept lossless never pays for it
   * (a 9000 × 9000 scan that stays Flate spent a third of its time measuring it).
   */
  aim: () => { target: number; loss?: number };
}

/**
 * The pixels to store, resampled to the placement's size when there is one. Resampling spends
 * part of the page's quality budget as seen at 100 % zoom (poppler's box scaler aliases a 150 ppi
 * image more than the original), so the JPEG must then keep VIEW_TARGET plus that loss (in
 * SSIMULACRA2 points), up to MAX_JPEG_TARGET. `knownLoss` (the largest loss measured on similar pictures of the
 * document, under a reduced budget) spares measuring it again on the whole image.
 */
async function fit(pixels: Pixels, placement: Placement, knownLoss?: number): Promise<Fitted> {
  if (!placement.size) return { pixels, ppi: placement.ppi, resampled: false, aim: () => ({ target: VIEW_TARGET }) };
  const resampled = await resample(pixels, placement.size.width, placement.size.height);
  const ppi = placement.ppi === undefined ? undefined : (placement.ppi * resampled.width) / pixels.width;
  const aim = () => {
    const loss = knownLoss ?? resamplingLoss(pixels, resampled, placement.ppi);
    return { target: Math.min(MAX_JPEG_TARGET, VIEW_TARGET + loss), loss: knownLoss === undefined ? loss : undefined };
  };
  return { pixels: resampled, ppi, resampled: true, aim };
}

/** fit, within a document: under a reduced budget the class's largest measured loss is reused. */
function fitInClass(pixels: Pixels, placement: Placement, { search, known }: BudgetedPicture): Promise<Fitted> {
  return fit(pixels, placement, search.probes !== Infinity ? known.loss : undefined);
}

function jpegOutcome(data: Buffer, p: Pixels): Outcome {
  return {
    contents: data,
    set: { Filter: PDFName.of('DCTDecode'), Width: PDFNumber.of(p.width), Height: PDFNumber.of(p.height), BitsPerComponent: PDFNumber.of(8) },
    drop: ['DecodeParms'],
  };
}

function flateOutcome(ctx: PDFContext, { data, predictor }: FlateImage, { width, height }: { width: number; height: number }): Outcome {
  const set: Outcome['set'] = { Filter: PDFName.of('FlateDecode'), Width: PDFNumber.of(width), Height: PDFNumber.of(height) };
  if (predictor) set.DecodeParms = ctx.obj(predictor);
  return { contents: data, set, drop: predictor ? [] : ['DecodeParms'] };
}

/** An expanded Indexed image now holds 8-bit samples of its base colour space. */
function withColourSpace(out: Outcome, cs: PDFObject): Outcome {
  return { ...out, set: { ...out.set, ColorSpace: cs, BitsPerComponent: PDFNumber.of(8) } };
}
