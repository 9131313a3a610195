import sharp from 'sharp';
import { Ssimulacra2Reference } from '../workers/image/ssimulacra2.ts';
const f = process.argv[2]!;
const { data, info } = await sharp(f).removeAlpha().raw().toBuffer({ resolveWithObject: true });
const px = { data, width: info.width, height: info.height, channels: info.channels };
const ref = new Ssimulacra2Reference(px);
for (const q of [30, 60, 90]) {
  const d2 = await sharp(f).jpeg({ quality: q }).toBuffer();
  const { data: dd } = await sharp(d2).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const t = Date.now();
  try { console.log(q, ref.score({ ...px, data: dd }), Date.now() - t, 'ms'); } catch (e) { console.log('ERR', q, (e as Error).message); }
}
