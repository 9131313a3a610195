import sharp from 'sharp';
import { Ssimulacra2Reference } from '../workers/image/ssimulacra2.ts';
async function px(f: string | Buffer, w?: number) { const { data, info } = await sharp(f).resize(w ? { width: w } : undefined).removeAlpha().raw().toBuffer({ resolveWithObject: true }); return { data, width: info.width, height: info.height, channels: info.channels }; }
const big = '/work/shared/corpus/jpg/craft-beer.jpg';
for (const w of [800, 3000, 6000, 6000]) {
  const p = await px(big, w === 6000 ? undefined : w);
  const d = await px(await sharp(big).resize(w === 6000 ? undefined : { width: w }).jpeg({ quality: 50 }).toBuffer());
  const ref = new Ssimulacra2Reference(p);
  try { console.log(w, ref.score(d), ref.score(d, 90)); } catch (e) { console.log('ERR', w, (e as Error).message); }
  if (w !== 3000) ref.dispose();
}
