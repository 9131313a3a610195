// A file's physical limit (issue 40): the fastest decoder on the machine for its format, run as a
// process to raw pixels (whole time), plus one encode of those pixels in this process with our own
// encoder and the setting our job chose. What no search, however clever, can go below.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp, { type JpegOptions } from 'sharp';
import { encodeJpeg, jpegOptions, jpegPipeline, type JpegSetting } from '../workers/image/encode.ts';
import { NATIVE_MEMORY, programEnv } from '../workers/decoders/native-program.ts';
import { GifRecompressor } from '../workers/image/gif/recompress.ts';
import type { Pixels } from '../workers/image/ssim.ts';
import type { Profile } from '../workers/shared/profile.ts';
import { exec, isRaw, median } from './lib.ts';

interface Decoder {
  name: string;
  /** Shell script: $1 the input, $2 the output file (named with the decoder's extension). */
  script: string;
  ext: 'v' | 'ppm' | 'pam';
  /** The process's environment, where it is not the benchmark's own. */
  env?: NodeJS.ProcessEnv;
}

const VIPS: Decoder = { name: 'vips', script: 'vips copy "$1" "$2"', ext: 'v' };
const MAGICK: Decoder = { name: 'ImageMagick', script: 'convert "$1[0]" -depth 8 "$2"', ext: 'pam' };
/**
 * Debian's libheif with libde265 and dav1d (heif-convert's libraries), to raw pixels: the program our
 * jobs run (workers/decoders/heic-native.ts), on huge pages as they run it. heif-convert itself
 * writes only JPEG and PNG.
 */
const HEIF_DIR = fileURLToPath(new URL(`../dist/heif-decoder/${process.arch}`, import.meta.url));
const LIBHEIF: Decoder = {
  name: 'libheif (Debian)',
  script: `"${HEIF_DIR}/compressd-heif-decode" 100000000 2 ${NATIVE_MEMORY.baseBytes} ${NATIVE_MEMORY.bytesPerPixel} < "$1" > "$2"`,
  ext: 'pam',
  env: programEnv(HEIF_DIR),
};

/** Candidate decoders by input extension; the fastest in the run counts. */
function decodersFor(input: string): Decoder[] {
  const ext = input.split('.').pop()?.toLowerCase() ?? '';
  if (isRaw(input)) return [{ name: 'dcraw', script: 'dcraw -c -w "$1" > "$2"', ext: 'ppm' }];
  if (ext === 'jpg' || ext === 'jpeg') return [{ name: 'djpeg', script: 'djpeg -outfile "$2" "$1"', ext: 'ppm' }, VIPS];
  if (ext === 'gif') return [{ name: 'vips (every frame)', script: 'vips copy "$1[n=-1]" "$2"', ext: 'v' }];
  if (ext === 'heic' || ext === 'heif' || ext === 'avif') return [LIBHEIF, VIPS, MAGICK];
  return [VIPS, MAGICK];
}

async function timedMs(runs: number, fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  return median(times);
}

/** 8-bit RGB of a decoder's output: netpbm (P5, P6, P7) read here, a vips file by sharp. */
async function pixelsOf(file: string): Promise<Pixels> {
  if (file.endsWith('.v')) {
    const { data, info } = await sharp(file, { limitInputPixels: false }).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height, channels: info.channels };
  }
  const bytes = await readFile(file);
  const header = bytes.subarray(0, 512).toString('latin1');
  const magic = header.slice(0, 2);
  const fields = magic === 'P7' ? pamHeader(header) : netpbmHeader(header);
  const samples = bytes.subarray(fields.offset, fields.offset + fields.width * fields.height * fields.depth);
  const { data, info } = await sharp(samples, { raw: { width: fields.width, height: fields.height, channels: fields.depth as 1 | 2 | 3 | 4 } }).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

interface NetpbmFields {
  width: number;
  height: number;
  depth: number;
  offset: number;
}

function netpbmHeader(header: string): NetpbmFields {
  const m = /^P([56])\s+(?:#.*\s+)*(\d+)\s+(\d+)\s+(\d+)\s/.exec(header);
  if (!m || m[4] !== '255') throw new Error('not an 8-bit PPM/PGM');
  return { width: Number(m[2]), height: Number(m[3]), depth: m[1] === '6' ? 3 : 1, offset: m[0].length };
}

function pamHeader(header: string): NetpbmFields {
  const end = header.indexOf('ENDHDR\n');
  const field = (name: string) => Number(new RegExp(`${name} (\\d+)`).exec(header)?.[1]);
  if (end < 0 || field('MAXVAL') !== 255) throw new Error('not an 8-bit PAM');
  return { width: field('WIDTH'), height: field('HEIGHT'), depth: field('DEPTH'), offset: end + 7 };
}

export interface Limit {
  decoder: string;
  decodeMs: number;
  encodeMs: number;
  ms: number;
  /** How the encode half was measured. */
  encode: string;
  /** A JPEG output's encode with parts of mozjpeg's work left out (same setting, same pixels). */
  variants?: EncodeVariant[];
  /** Pixels of the decoded picture (JPEG outputs). */
  pixels?: number;
}

export interface EncodeVariant {
  name: string;
  ms: number;
  bytes: number;
}

/**
 * What trellis quantisation and the progressive scan search cost and save at one setting. Without
 * trellis the pixels are closer to the original (trellis trades a little distortion for bytes), so
 * its bytes here are not at equal quality: the quality bench's figures are.
 */
async function encodeVariants(pixels: Pixels, setting: JpegSetting, runs: number): Promise<EncodeVariant[]> {
  const ours = jpegOptions(setting);
  const variants: [string, JpegOptions][] = [
    ['ours (trellis, progressive, scan search)', ours],
    ['no scan search', { ...ours, optimiseScans: false }],
    ['no trellis', { ...ours, trellisQuantisation: false }],
    ['baseline, no trellis (libjpeg-turbo speed)', { ...ours, progressive: false, optimiseScans: false, trellisQuantisation: false, optimiseCoding: true }],
  ];
  const out: EncodeVariant[] = [];
  for (const [name, options] of variants) {
    let bytes = 0;
    const ms = await timedMs(runs, async () => {
      bytes = (await jpegPipeline(pixels).jpeg(options).toBuffer()).length;
    });
    out.push({ name, ms, bytes });
  }
  return out;
}

/**
 * The limit of one file given our job's profile: the decode measured here; the encode with the
 * job's own setting on the decoded pixels (JPEG), one lossy LZW pass at its threshold (GIF), or the
 * job's own output encode (PNG palettes and documents: their final encode is not one setting).
 */
export async function physicalLimit(input: string, profile: Profile, runs: number, work: string): Promise<Limit | undefined> {
  const dir = await mkdtemp(join(work, 'limit-'));
  try {
    let best: { name: string; ms: number; out: string } | undefined;
    for (const [i, d] of decodersFor(input).entries()) {
      const out = join(dir, `o${i}.${d.ext}`);
      const ms = await timedMs(runs, () => exec('sh', ['-c', d.script, 'sh', input, out], { maxBuffer: 64 << 20, env: d.env })).catch(() => undefined);
      if (ms !== undefined && (!best || ms < best.ms)) best = { name: d.name, ms, out };
    }
    if (!best) return undefined;
    const decoded = best.out;
    if (profile.setting?.table === 'jpegli') {
      // jpegli has no trellis or scan search to leave out: its one encode, by the program our jobs run.
      const setting = profile.setting;
      const pixels = await pixelsOf(decoded);
      const encodeMs = await timedMs(runs, () => encodeJpeg(pixels, setting));
      return { decoder: best.name, decodeMs: best.ms, encodeMs, ms: best.ms + encodeMs, encode: `jpegli q${setting.quality} ${setting.chroma}` };
    }
    if (profile.setting) {
      const setting = profile.setting;
      const pixels = await pixelsOf(decoded);
      const variants = await encodeVariants(pixels, setting, runs);
      const encodeMs = variants[0].ms;
      return { decoder: best.name, decodeMs: best.ms, encodeMs, ms: best.ms + encodeMs, encode: `mozjpeg q${setting.quality} t${setting.table} ${setting.chroma}`, variants, pixels: pixels.width * pixels.height };
    }
    if (profile.gifThreshold !== undefined) {
      const threshold = profile.gifThreshold;
      const gif = new GifRecompressor(await readFile(input));
      const encodeMs = await timedMs(runs, async () => gif.recompress(threshold));
      return { decoder: best.name, decodeMs: best.ms, encodeMs, ms: best.ms + encodeMs, encode: `lossy LZW ${threshold.toFixed(1)}` };
    }
    const encodeMs = profile.ms.encode ?? 0;
    return { decoder: best.name, decodeMs: best.ms, encodeMs, ms: best.ms + encodeMs, encode: "the job's own" };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
