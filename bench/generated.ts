// Inputs the benchmark makes itself, with the properties the speed issue names: the worst case
// an attacker (or a screenshot of noise) sends, and a large photo-like PNG. Deterministic (a
// seeded generator), so every run and every machine measures the same bytes.
import { existsSync } from 'node:fs';
import { mkdir, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { albumPptx, cameraPhotos, picturesPdf, reportDocx, scannedPages, tinyPictures } from '../test/helpers/made-files.ts';

/** xorshift32 bytes: fast, seeded, and as incompressible as random bytes for deflate. */
export function noiseBytes(n: number, seed = 0x9e3779b9): Buffer {
  const out = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 255;
  }
  return out;
}

/** A width×height RGBA PNG of uniform noise in every channel, alpha included. */
export async function noisePng(path: string, width: number, height: number): Promise<void> {
  await sharp(noiseBytes(width * height * 4), { raw: { width, height, channels: 4 } }).png().toFile(path);
}

/** Smooth colour gradients plus ±3 levels of per-sample noise: a camera photo's statistics without its content. */
export async function photoLikePng(path: string, width: number, height: number): Promise<void> {
  const noise = noiseBytes(width * height * 3, 12345);
  const data = Buffer.allocUnsafe(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 3;
      // Brightness carries most of the variation and the hue drifts slowly, as in a photo.
      const light = 128 + 100 * Math.sin(x / 700 + y / 1100);
      const drift = 25 * Math.cos(x / 900 - y / 600);
      const base = [light + drift, 0.9 * light + 10, 0.7 * light + 30 - drift];
      for (let c = 0; c < 3; c++) data[o + c] = Math.max(0, Math.min(255, Math.round(base[c] + (noise[o + c] - 128) / 48)));
    }
  }
  await sharp(data, { raw: { width, height, channels: 3 } }).png().toFile(path);
}

/** The generated files, made once per machine into the temp directory. */
export async function generatedInputs(): Promise<{ noise: string; photo: string }> {
  const dir = join(tmpdir(), 'compressd-bench-generated-v2');
  await mkdir(dir, { recursive: true });
  const noise = join(dir, 'noise-2400x2400-rgba.png');
  const photo = join(dir, 'photo-like-4000x3000.png');
  // Written under a temporary name first: an interrupted run leaves no half file behind.
  if (!existsSync(noise)) await noisePng(`${noise}.part`, 2400, 2400).then(() => rename(`${noise}.part`, noise));
  if (!existsSync(photo)) await photoLikePng(`${photo}.part`, 4000, 3000).then(() => rename(`${photo}.part`, photo));
  return { noise, photo };
}

/**
 * Documents whose per-picture work adds up (issue 21, bounded work per job): a 40-page scan at
 * 300 dpi from one scanner, 30 full-page 12 MP camera photos, 600 small pictures on 20 pages, a
 * 30-slide album of 6 MP camera photos, and a report with 40 photos and 150 small pictures
 * inline. Made once per machine.
 */
export async function pathologicalDocuments(): Promise<{ pdf: string[]; office: string[] }> {
  const dir = join(tmpdir(), 'compressd-bench-documents-v1');
  await mkdir(dir, { recursive: true });
  const made = async (name: string, make: (path: string) => Promise<unknown>): Promise<string> => {
    const path = join(dir, name);
    if (!existsSync(path)) await make(`${path}.part`).then(() => rename(`${path}.part`, path));
    return path;
  };
  // The album and the report share their photos: made once, only when one of them is missing.
  let photos: Buffer[] | undefined;
  const sixMp = async () => (photos ??= await cameraPhotos(40, 3000, 2000, 93));
  return {
    pdf: [
      await made('scan-40-pages-300dpi.pdf', async (p) => picturesPdf(p, await scannedPages(40, 300))),
      await made('photos-30x12mp.pdf', async (p) => picturesPdf(p, await cameraPhotos(30, 4000, 3000))),
      await made('tiny-600-pictures.pdf', async (p) => picturesPdf(p, await tinyPictures(600), 30)),
    ],
    office: [
      await made('album-30x6mp.pptx', async (p) => albumPptx(p, (await sixMp()).slice(0, 30))),
      await made('report-40-photos-150-small.docx', async (p) => reportDocx(p, [...(await sixMp()), ...(await tinyPictures(150, 96))], 6)),
    ],
  };
}
