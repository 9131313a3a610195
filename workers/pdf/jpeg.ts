import sharp from 'sharp';
import { chooseJpegQuality, jpegOptions } from '../image/encode.ts';
import type { Pixels } from '../image/ssim.ts';

/**
 * JPEG of gray or RGB samples at the perceptual auto quality of the JPG compressor. The quality
 * search is the same as encodeJpegAuto's, but the encode keeps the component count: a PDF image's
 * ColorSpace says how many components its JPEG must have, and encodeJpegAuto always emits sRGB.
 */
export async function encodePhoto(p: Pixels): Promise<Buffer> {
  const quality = await chooseJpegQuality(p);
  const img = sharp(p.data, { raw: { width: p.width, height: p.height, channels: p.channels as 1 | 3 } });
  // Without this sharp writes grey pixels as a three-component JPEG.
  if (p.channels === 1) img.toColourspace('b-w');
  const data = await img.jpeg(jpegOptions(quality)).toBuffer();
  const { channels } = await sharp(data).metadata();
  if (channels !== p.channels) throw new Error(`JPEG has ${channels} components, the image ${p.channels}`);
  return data;
}
