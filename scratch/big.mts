import sharp from 'sharp';
import { ssimulacra2 } from '../workers/image/ssimulacra2.ts';
const f = process.argv[2]!;
const { data, info } = await sharp(f).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
const px = { data, width: info.width, height: info.height, channels: info.channels };
const d2 = await sharp(f).jpeg({ quality: 60 }).toBuffer();
const { data: dd } = await sharp(d2).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
const t = Date.now();
try { console.log(ssimulacra2(px, { ...px, data: dd }), Date.now() - t, 'ms'); } catch (e) { console.log('ERR', e); }
