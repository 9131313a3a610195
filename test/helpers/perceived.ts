import sharp from 'sharp';
import type { Pixels } from '../../workers/image/ssim.ts';
import { ssimulacra2 } from '../../workers/image/ssimulacra2.ts';

/** 8-bit sRGB pixels of a file (alpha kept when it has one; CMYK and profiles converted). */
export async function decoded(path: string | Buffer): Promise<Pixels> {
  const { data, info } = await sharp(path, { limitInputPixels: false }).toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** SSIMULACRA2 of an output against its reference at full resolution, both decoded the same way. */
export async function perceived(reference: string | Buffer | Pixels, output: string | Buffer | Pixels): Promise<number> {
  const of = (x: string | Buffer | Pixels) => (typeof x === 'string' || Buffer.isBuffer(x) ? decoded(x) : Promise.resolve(x));
  return ssimulacra2(await of(reference), await of(output));
}
