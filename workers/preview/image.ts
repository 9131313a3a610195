import { readFile } from 'node:fs/promises';
import type { Sharp } from 'sharp';
import { decodeImage, type Decoded } from '../decoders/index.ts';
import { MAX_PIXELS } from '../image/door.ts';
import { decodeWithSharp } from '../decoders/sharp-native.ts';

/** An upright picture (EXIF orientation applied) and its displayed size. */
export interface Picture {
  image: Sharp;
  width: number;
  height: number;
}

/**
 * Opens an image file for previewing with the universal compressor's decoders, so a preview shows
 * the picture that job compressed: format by magic bytes (the declared one breaks ties), the first
 * frame of an animation, the compressors' pixel budget.
 */
export async function openPicture(path: string, format: string, signal: AbortSignal): Promise<Picture> {
  const { decoded } = await decodeImage(await readFile(path), format, { maxPixels: MAX_PIXELS, signal });
  return upright(decoded);
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
