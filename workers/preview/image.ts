import { readFile } from 'node:fs/promises';
import type { Sharp } from 'sharp';
import { decodeBmp } from '../decoders/bmp.ts';
import { detectFamily, type Family } from '../decoders/detect.ts';
import { decodeHeic } from '../decoders/heic.ts';
import { MAX_PIXELS } from '../decoders/limits.ts';
import { decodePsd } from '../decoders/psd.ts';
import { decodeRaw } from '../decoders/raw.ts';
import { decodeAvif, decodeWithSharp } from '../decoders/sharp-native.ts';
import type { Decoded, Decoder } from '../decoders/types.ts';

/** An upright picture (EXIF orientation applied) and its displayed size. */
export interface Picture {
  image: Sharp;
  width: number;
  height: number;
}

/** The universal compressor's decoders, so a preview shows the picture that job compressed. */
const DECODERS: Record<Family, Decoder> = {
  jpeg: decodeWithSharp,
  png: decodeWithSharp,
  gif: decodeWithSharp,
  webp: decodeWithSharp,
  avif: decodeAvif,
  tiff: decodeWithSharp,
  heic: decodeHeic,
  bmp: decodeBmp,
  psd: decodePsd,
  raw: decodeRaw,
};

/**
 * Opens an image file for previewing: format by magic bytes (the declared one breaks ties, as in
 * the universal compressor), the first frame of an animation, the compressors' pixel budget.
 */
export async function openPicture(path: string, format: string, signal: AbortSignal): Promise<Picture> {
  const bytes = await readFile(path);
  return upright(await DECODERS[detectFamily(bytes, format)](bytes, { maxPixels: MAX_PIXELS, signal }));
}

/** Reads a picture held in memory (an Office document's embedded image). */
export async function pictureOf(bytes: Buffer, signal: AbortSignal): Promise<Picture> {
  return upright(await decodeWithSharp(bytes, { maxPixels: MAX_PIXELS, signal }));
}

/** Upright the way the universal compressor does it: sharp's auto-orientation from the pipeline's EXIF. */
async function upright(d: Decoded): Promise<Picture> {
  const { autoOrient } = await d.image.metadata();
  return { image: d.image.autoOrient(), width: autoOrient.width, height: autoOrient.height };
}
