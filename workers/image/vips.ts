import sharp from 'sharp';
import type { Sharp } from 'sharp';
import type { Pixels } from './ssim.ts';

/**
 * The libvips operations the compressors, previews and document paths use besides opening a
 * picture (image/door.ts): pipelines over pixels this process holds and over files it encoded
 * itself. Outside workers/image/ and workers/decoders/ nothing imports sharp; every picture a user
 * sent comes in through the door's policy, and every other pipeline starts here.
 */

/** A libvips pipeline (sharp's): resize, colour, encoders, raw output. */
export type Pipeline = Sharp;

/** A pipeline over raw interleaved 8-bit samples (1 to 4 channels) this process decoded or drew. */
export function pixelPipeline(p: Pixels): Pipeline {
  return sharp(p.data, { raw: { width: p.width, height: p.height, channels: p.channels as 1 | 2 | 3 | 4 } });
}

/**
 * A pipeline over a file this process encoded (a quality probe, a palette candidate), read back to
 * measure it. Not for a user's bytes: those come in through openImage (image/door.ts).
 */
export function encodedPipeline(bytes: Uint8Array): Pipeline {
  return sharp(bytes);
}
