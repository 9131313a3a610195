// Inputs the benchmark makes itself, with the properties the speed issue names: the worst case
// an attacker (or a screenshot of noise) sends, a large photo-like PNG, and large animated GIFs
// of the kinds people make (a screen recording, a photo-like pan, a long sprite loop).
// Deterministic (a seeded generator), so every run and every machine measures the same bytes.
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

/** RGB frames of one size, drawn into by the animations below. */
class Frame {
  readonly data: Buffer;
  constructor(readonly width: number, readonly height: number, copyOf?: Frame) {
    this.data = copyOf ? Buffer.from(copyOf.data) : Buffer.alloc(width * height * 3, 255);
  }
  rect(x: number, y: number, w: number, h: number, rgb: number[]): void {
    for (let yy = Math.max(0, y); yy < Math.min(this.height, y + h); yy++) {
      for (let xx = Math.max(0, x); xx < Math.min(this.width, x + w); xx++) this.data.set(rgb, (yy * this.width + xx) * 3);
    }
  }
  /** The rows [y, y + h) moved up by `dy`, the bottom filled with `rgb`. */
  scroll(y: number, h: number, dy: number, rgb: number[]): void {
    const row = this.width * 3;
    this.data.copy(this.data, y * row, (y + dy) * row, (y + h) * row);
    this.rect(0, y + h - dy, this.width, dy, rgb);
  }
}

/** `frames` as one animated GIF, palette and dithering chosen by libimagequant as a GIF tool would. */
async function animatedGif(path: string, frames: Frame[], delayMs: number): Promise<void> {
  const { width, height } = frames[0];
  await sharp(Buffer.concat(frames.map((f) => f.data)), { raw: { width, height: height * frames.length, channels: 3, pageHeight: height } })
    .gif({ delay: frames.map(() => delayMs), loop: 0, effort: 7, interFrameMaxError: 4 })
    .toFile(path);
}

/**
 * A 1280×720 screen recording of 48 frames: a window with a sidebar, a toolbar and lines of
 * anti-aliased "words" being typed, a blinking caret, a moving pointer, and twice a scroll that
 * moves the whole page (the frames most recorders make large).
 */
export async function screenRecordingGif(path: string): Promise<void> {
  const width = 1280;
  const height = 720;
  const rnd = noiseBytes(4096, 777);
  const page = new Frame(width, height);
  page.rect(0, 0, width, 40, [45, 52, 64]);
  page.rect(0, 40, 220, height - 40, [236, 239, 244]);
  for (let k = 0; k < 12; k++) page.rect(20, 70 + k * 36, 140 + (rnd[k] % 40), 14, [120, 130, 150]);
  for (let x = 0; x < 200; x++) page.rect(1000 + x, 60, 1, 120, [30 + x, 120 + (x >> 1), 220 - x]);
  const frames: Frame[] = [];
  let line = 0;
  let col = 0;
  let r = 0;
  const top = 80;
  for (let i = 0; i < 48; i++) {
    if (i === 20 || i === 36) {
      page.scroll(60, height - 60, 180, [255, 255, 255]);
      line = Math.max(0, line - 5);
    }
    // A few words per frame, each a dark bar with lighter edges, as anti-aliased text looks.
    for (let w = 0; w < 3; w++) {
      const len = 18 + (rnd[r++ & 4095] % 60);
      if (col + len > 720) {
        line++;
        col = 0;
      }
      const x = 260 + col;
      const y = top + line * 30;
      if (y + 20 > height) break;
      page.rect(x - 1, y - 1, len + 2, 18, [200, 204, 210]);
      page.rect(x, y, len, 16, [40 + (rnd[r & 4095] % 30), 44, 52]);
      col += len + 9;
    }
    const shot = new Frame(width, height, page);
    if (i % 4 < 2) shot.rect(260 + col, top + line * 30, 2, 16, [20, 90, 220]);
    const px = 300 + Math.round(500 * Math.sin(i / 9));
    const py = 200 + Math.round(200 * Math.cos(i / 7));
    for (let k = 0; k < 18; k++) shot.rect(px, py + k, Math.max(1, 12 - (k >> 1)), 1, k % 17 === 0 ? [0, 0, 0] : [250, 250, 250]);
    frames.push(shot);
  }
  await animatedGif(path, frames, 100);
}

/**
 * A 640×400 photo-like pan of 30 frames (gradients plus sensor noise, brightness drifting):
 * every pixel of every frame changes, and the dithered palette differs from frame to frame.
 */
export async function photoPanGif(path: string): Promise<void> {
  const width = 640;
  const height = 400;
  const frames: Frame[] = [];
  const noise = noiseBytes(width * height * 3, 4242);
  for (let i = 0; i < 30; i++) {
    const f = new Frame(width, height);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const sx = x + i * 6;
        const light = 120 + 90 * Math.sin(sx / 90 + y / 140) + 20 * Math.cos(sx / 23 - y / 31) + i;
        const drift = 30 * Math.cos(sx / 200 - y / 120);
        const o = (y * width + x) * 3;
        const base = [light + drift, 0.85 * light + 15, 0.6 * light + 40 - drift];
        for (let c = 0; c < 3; c++) f.data[o + c] = Math.max(0, Math.min(255, Math.round(base[c] + (noise[o + c] - 128) / 32)));
      }
    }
    frames.push(f);
  }
  await animatedGif(path, frames, 80);
}

/**
 * A 480×360 loop of 150 frames: a shaded still background with a ball bouncing over it and a
 * spinner turning in a corner, so each frame changes a small part of the screen.
 */
export async function spriteLoopGif(path: string): Promise<void> {
  const width = 480;
  const height = 360;
  const still = new Frame(width, height);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) still.data.set([90 + (y >> 2), 150 + (x >> 3) - (y >> 3), 200 - (x >> 3)], (y * width + x) * 3);
  still.rect(0, 300, width, 60, [70, 120, 60]);
  const frames: Frame[] = [];
  for (let i = 0; i < 150; i++) {
    const f = new Frame(width, height, still);
    const cx = 40 + ((i * 5) % 400);
    const cy = 80 + Math.round(200 * Math.abs(Math.sin(i / 12)));
    for (let y = -20; y <= 20; y++) {
      for (let x = -20; x <= 20; x++) {
        const d = x * x + y * y;
        if (d <= 400) f.rect(cx + x, cy + y, 1, 1, [230 - (d >> 2) - x, 60 + ((x + 20) << 1), 40 + (d >> 4)]);
      }
    }
    for (let k = 0; k < 8; k++) {
      const a = (k / 8) * 2 * Math.PI;
      const shade = 60 + 24 * ((k + i) % 8);
      f.rect(430 + Math.round(14 * Math.cos(a)), 30 + Math.round(14 * Math.sin(a)), 5, 5, [shade, shade, shade]);
    }
    frames.push(f);
  }
  await animatedGif(path, frames, 40);
}

type Made = { noise: string; photo: string; screenGif: string; photoGif: string; spriteGif: string };

/** The generated files, made once per machine into the temp directory. */
export async function generatedInputs(): Promise<Made> {
  const dir = join(tmpdir(), 'compressd-bench-generated-v2');
  await mkdir(dir, { recursive: true });
  const made: [keyof Made, string, (path: string) => Promise<void>][] = [
    ['noise', 'noise-2400x2400-rgba.png', (p) => noisePng(p, 2400, 2400)],
    ['photo', 'photo-like-4000x3000.png', (p) => photoLikePng(p, 4000, 3000)],
    ['screenGif', 'screen-recording-1280x720x48.gif', screenRecordingGif],
    ['photoGif', 'photo-pan-640x400x30.gif', photoPanGif],
    ['spriteGif', 'sprite-loop-480x360x150.gif', spriteLoopGif],
  ];
  const out = {} as Made;
  for (const [key, name, make] of made) {
    out[key] = join(dir, name);
    // Written under a temporary name first: an interrupted run leaves no half file behind.
    if (!existsSync(out[key])) await make(`${out[key]}.part`).then(() => rename(`${out[key]}.part`, out[key]));
  }
  return out;
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

/**
 * Red, blue and green text and strokes on white (1200×800, librsvg with the system's fonts):
 * saturated colour edges, which 4:2:0 chroma and a luma-only metric both miss.
 */
export async function colouredTextPng(path: string, width = 1200, height = 800): Promise<string> {
  const colours = ['#d01010', '#1030d0', '#108a20'];
  const words = 'Quality is judged in colour too: red, blue and green lines of text at several sizes 0123456789';
  const lines = Array.from({ length: 16 }, (_, i) => {
    const size = 12 + (i % 6) * 5;
    return `<text x="24" y="${40 + i * 46}" font-family="DejaVu Sans" font-size="${size}" fill="${colours[i % 3]}">${words.slice(0, 40 + ((i * 7) % 50))}</text>`;
  });
  const strokes = Array.from({ length: 9 }, (_, i) => {
    const c = colours[i % 3];
    return `<line x1="${700 + i * 50}" y1="60" x2="${760 + i * 40}" y2="760" stroke="${c}" stroke-width="${1 + (i % 3)}"/><circle cx="${900 + (i % 3) * 90}" cy="${120 + Math.floor(i / 3) * 200}" r="${30 + i * 3}" fill="none" stroke="${c}" stroke-width="2"/>`;
  });
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="#ffffff"/>${lines.join('')}${strokes.join('')}</svg>`;
  await sharp(Buffer.from(svg)).flatten({ background: '#ffffff' }).png().toFile(path);
  return path;
}

/**
 * A sky: two colours blended top to bottom with a slight tilt, and ±1 level of seeded noise (a
 * camera's or a renderer's dither). Smooth gradients are where banding and blocking show first.
 */
export async function skyGradientPng(path: string, width = 1600, height = 1000): Promise<string> {
  const [top, horizon] = [
    [38, 92, 168],
    [206, 226, 244],
  ];
  const noise = noiseBytes(width * height * 3, 2024);
  const data = Buffer.allocUnsafe(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const t = Math.min(1, Math.max(0, (y + 0.08 * x) / (height + 0.08 * width)));
      const o = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) data[o + c] = Math.max(0, Math.min(255, Math.round(top[c] + t * (horizon[c] - top[c])) + (noise[o + c] % 3) - 1));
    }
  }
  await sharp(data, { raw: { width, height, channels: 3 } }).png().toFile(path);
  return path;
}

/**
 * A screenshot-like 24-bit PNG that palettes dither: a smooth teal gradient across the whole window
 * (far more than 256 colours) with a few flat UI boxes on it.
 */
export async function tealScreenPng(path: string, width = 1200, height = 800): Promise<string> {
  const data = Buffer.allocUnsafe(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const t = (x / width + y / height) / 2;
      data.set([Math.round(12 + 70 * t), Math.round(78 + 110 * t), Math.round(92 + 100 * t)], (y * width + x) * 3);
    }
  }
  const frame = new Frame(width, height);
  frame.data.set(data);
  frame.rect(0, 0, width, 44, [24, 32, 40]);
  frame.rect(80, 120, 460, 300, [250, 250, 250]);
  frame.rect(100, 150, 300, 18, [60, 70, 80]);
  frame.rect(100, 190, 380, 12, [150, 160, 170]);
  frame.rect(100, 360, 140, 40, [230, 120, 40]);
  frame.rect(660, 520, 420, 180, [240, 244, 246]);
  frame.rect(690, 650, 110, 32, [40, 120, 200]);
  await sharp(frame.data, { raw: { width, height, channels: 3 } }).png().toFile(path);
  return path;
}

/** JPEG at quality 98 with full-resolution chroma: a high-quality source, as cameras and editors export. */
async function jpegOf(png: string, path: string): Promise<string> {
  await sharp(png).jpeg({ quality: 98, chromaSubsampling: '4:4:4' }).toFile(path);
  return path;
}

/** The equal-quality inputs above, made into `dir` once per run: PNGs for the PNG kind, q98 JPEGs for the JPG kind. */
export async function equalQualityInputs(dir: string): Promise<{ png: string[]; jpg: string[] }> {
  const made = async (name: string, make: (path: string) => Promise<string>): Promise<string> => {
    const path = join(dir, name);
    return existsSync(path) ? path : make(path);
  };
  const text = await made('coloured-text.png', colouredTextPng);
  const sky = await made('sky-gradient.png', skyGradientPng);
  const teal = await made('teal-screen.png', tealScreenPng);
  return {
    png: [text, sky, teal],
    jpg: [await made('coloured-text-q98-444.jpg', (p) => jpegOf(text, p)), await made('sky-gradient-q98-444.jpg', (p) => jpegOf(sky, p))],
  };
}
