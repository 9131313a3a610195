// A plain libjpeg-turbo encoder (sharp without mozjpeg: standard tables, 4:2:0, what ImageMagick,
// jpegoptim and most exporters write) as the yardstick of "no bigger than a simple tool at equal quality".
import sharp from 'sharp';
import type { Pixels } from '../../workers/image/ssim.ts';
import { Ssimulacra2Reference } from '../../workers/image/ssimulacra2.ts';

/** Pixels as sharp decodes them, alpha kept (RGBA). */
export async function rgba(input: string | Buffer): Promise<Pixels> {
  const { data, info } = await sharp(input).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** Bytes of the lowest plain-libjpeg quality whose SSIMULACRA2 against `reference` reaches `target` (bisection, 30–98). */
export async function plainJpegBytesAt(reference: Pixels, target: number): Promise<{ quality: number; bytes: number }> {
  const raw = { raw: { width: reference.width, height: reference.height, channels: reference.channels as 4 } };
  const judge = new Ssimulacra2Reference(reference);
  const at = (q: number) => sharp(reference.data, raw).flatten({ background: '#ffffff' }).jpeg({ quality: q }).toBuffer();
  let lo = 30;
  let hi = 98;
  let best = await at(hi);
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    const data = await at(mid);
    if (judge.score(await rgba(data)) >= target) [hi, best] = [mid, data];
    else lo = mid;
  }
  return { quality: hi, bytes: best.length };
}
