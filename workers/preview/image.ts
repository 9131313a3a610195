import { openImage, type OpenedImage } from '../image/door.ts';
import type { Pipeline } from '../image/vips.ts';

/** An upright picture (EXIF orientation applied) and its displayed size. */
export interface Picture {
  image: Pipeline;
  width: number;
  height: number;
}

/**
 * Opens an image file for previewing with the universal compressor's decoders, so a preview shows
 * the picture that job compressed: format by magic bytes (the declared one breaks ties), the first
 * frame of an animation, the compressors' pixel budget.
 */
export async function openPicture(path: string, format: string, signal: AbortSignal): Promise<Picture> {
  return upright(await openImage(path, { declared: format, signal }));
}

/** Reads a picture held in memory (an Office document's embedded image), reserving the memory to decode it. */
export async function pictureOf(bytes: Buffer, signal: AbortSignal): Promise<Picture> {
  signal.throwIfAborted();
  return upright(await openImage(bytes, { embedded: true, memory: 'reserve' }));
}

/** Upright the way the universal compressor does it: sharp's auto-orientation from the pipeline's EXIF. */
async function upright({ image }: OpenedImage): Promise<Picture> {
  const { autoOrient } = await image.metadata();
  return { image: image.autoOrient(), width: autoOrient.width, height: autoOrient.height };
}
