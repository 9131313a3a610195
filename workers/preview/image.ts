import { readFile } from 'node:fs/promises';
import sharp, { type Sharp } from 'sharp';
import { RAW_FORMATS } from '../../src/catalog/compressors/universal.ts';
import { JobError } from '../contract.ts';
import { MAX_PIXELS } from '../decoders/limits.ts';
import { decodeRaw } from '../decoders/raw.ts';
import type { Decoded, Decoder } from '../decoders/types.ts';

/** An upright picture (EXIF orientation applied) and its displayed size. */
export interface Picture {
  image: Sharp;
  width: number;
  height: number;
}

/** Formats whose decoding is not left to sharp (see README: compressd decoders). */
const DECODERS: Record<string, Decoder> = Object.fromEntries(RAW_FORMATS.map((f) => [f, decodeRaw]));

/**
 * Opens an image file for previewing: the first frame of an animation, the decoded picture for
 * formats that have their own decoder, sharp for the rest. The pixel budget of the compressors
 * applies, so a preview never decodes more than a job could.
 */
export async function openPicture(path: string, format: string, signal: AbortSignal): Promise<Picture> {
  const decoder = DECODERS[format];
  if (decoder) return uprightDecoded(await decoder(await readFile(path), { maxPixels: MAX_PIXELS, signal }));
  const image = sharp(path, { limitInputPixels: MAX_PIXELS, failOn: 'none' });
  let meta;
  try {
    meta = await image.metadata();
  } catch (err) {
    throw new JobError('compare.unavailable', `The ${format.toUpperCase()} file cannot be read for a preview: ${(err as Error).message}`);
  }
  return { image: image.autoOrient(), width: meta.autoOrient.width, height: meta.autoOrient.height };
}

/** Reads a picture held in memory (an Office document's embedded image). */
export async function pictureOf(bytes: Buffer): Promise<Picture> {
  const meta = await sharp(bytes, { limitInputPixels: MAX_PIXELS }).metadata();
  return { image: sharp(bytes, { limitInputPixels: MAX_PIXELS, failOn: 'none' }).autoOrient(), width: meta.autoOrient.width, height: meta.autoOrient.height };
}

const QUARTER_TURNS: Record<number, number> = { 3: 180, 5: 270, 6: 90, 7: 90, 8: 270 };

/**
 * Applies the EXIF orientation a decoder left to its pipeline. sharp rotates before it mirrors,
 * so the transposing orientations are a quarter turn followed by a horizontal mirror.
 */
export function uprightDecoded(d: Pick<Decoded, 'image' | 'width' | 'height' | 'orientation'>): Picture {
  const o = d.orientation;
  let image = d.image;
  const turn = QUARTER_TURNS[o];
  if (turn) image = image.rotate(turn);
  if (o === 2 || o === 5 || o === 7) image = image.flop();
  if (o === 4) image = image.flip();
  const swapped = o >= 5 && o <= 8;
  return { image, width: swapped ? d.height : d.width, height: swapped ? d.width : d.height };
}
