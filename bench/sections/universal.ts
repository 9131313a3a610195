// Universal image compressor on ../shared/corpus/{webp,avif,heic,tiff,bmp,psd,raw} against
// ImageMagick and libvips at JPEG quality 80: median time, output bytes, and full-resolution luma
// SSIM of each output against a reference decode (dcraw for RAW, heif-convert for HEIC, avifdec for
// SDR AVIF, ImageMagick for the rest, CMYK through its ICC profile). Stripped camera files are listed with the failure code they end with.
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { JobError } from '../../workers/contract.ts';
import { ssim, type Pixels } from '../../workers/image/ssim.ts';
import { compress } from '../../workers/universal.ts';
import { type BenchContext, exec, markdownTable, timed } from '../lib.ts';

const DIRS = ['webp', 'avif', 'heic', 'tiff', 'bmp', 'psd', 'raw'];
// The PATH may hold a stand-in `convert`; the benchmark wants Debian's ImageMagick.
const MAGICK = '/usr/bin/convert';

type Tool = (input: string, dir: string) => Promise<string>;

const ours: Tool = async (input, dir) =>
  (await compress({ inputPath: input, format: input.split('.').pop() ?? '', options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} })).path;
const magick: Tool = async (input, dir) => {
  const out = join(dir, 'magick.jpg');
  await exec(MAGICK, [`${input}[0]`, '-auto-orient', '-quality', '80', out], { maxBuffer: 64 << 20 });
  return out;
};
const vips: Tool = async (input, dir) => {
  const out = join(dir, 'vips.jpg');
  await exec('vips', ['copy', input, `${out}[Q=80]`]);
  return out;
};

/**
 * Decodes anything the tools write (JPEG, PNG, PPM) to 8-bit RGB(A) pixels, upright. heif-convert
 * writes pixels already turned by the HEIF transforms but copies the source EXIF Orientation
 * beside them: its PNGs are read as stored.
 */
export async function pixelsOf(path: string, orient = true): Promise<Pixels> {
  const bytes = await readFile(path);
  if (bytes.toString('latin1', 0, 2) === 'P6') return ppm(bytes);
  const img = sharp(bytes, { limitInputPixels: false });
  const { data, info } = await (orient ? img.rotate() : img).raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

function ppm(b: Buffer): Pixels {
  const fields: string[] = [];
  let p = 0;
  while (fields.length < 4) {
    while (b[p] <= 0x20) p++;
    let s = '';
    while (b[p] > 0x20) s += String.fromCharCode(b[p++]);
    fields.push(s);
  }
  return { data: b.subarray(p + 1), width: Number(fields[1]), height: Number(fields[2]), channels: 3 };
}

export async function reference(input: string, dir: string): Promise<Pixels> {
  const ext = input.split('.').pop()!.toLowerCase();
  const out = join(dir, 'reference.png');
  if (ext === 'dng' || ext === 'cr2' || ext === 'nef') {
    const { stdout } = await exec('dcraw', ['-w', '-c', input], { encoding: 'buffer', maxBuffer: 512 << 20 });
    return ppm(stdout as unknown as Buffer);
  }
  if (ext === 'heic' || ext === 'heif') {
    await exec('heif-convert', [input, out]);
    return pixelsOf(out, false);
  }
  if (ext === 'avif' && !(await isHdr(input))) {
    // libavif, the format's reference decoder: it takes range and matrix from the file's colour
    // property, which MIAF says overrides the AV1 bitstream's (ImageMagick and heif-convert agree
    // with it; sharp's libheif 1.23 did not, see workers/decoders/av1-colour.ts). Sequences: frame 0.
    await exec('avifdec', ['--png-compress', '1', input, out]);
    return pixelsOf(out);
  }
  await exec(MAGICK, [`${input}[0]`, '-auto-orient', ...(await cmykToSrgb(input)), out], { maxBuffer: 64 << 20 });
  return pixelsOf(out);
}

/** PQ or HLG transfer (avifdec writes such values as they are, tagged sRGB: no reference). */
async function isHdr(input: string): Promise<boolean> {
  const { stdout } = await exec('avifdec', ['--info', input]);
  return /Transfer Char\.\s*:\s*(16|18)\b/.test(stdout);
}

// Debian's ICC profiles (ghostscript, a benchmark package): the sRGB target, and the CMYK profile
// for untagged CMYK.
const ICC_DIR = '/usr/share/color/icc/ghostscript';

/**
 * ImageMagick turns CMYK into RGB by plain arithmetic (R = 255 − C − K…) unless told to convert
 * through a profile: inks then look like no press or Photoshop shows them (ag-psd-cmyk.psd: SSIM
 * 0.76 against its SWOP rendering). CMYK is converted through its embedded profile (or Debian's
 * default CMYK profile when it has none) into sRGB, as our decoders do.
 */
export async function cmykToSrgb(input: string): Promise<string[]> {
  const { stdout } = await exec(MAGICK.replace(/convert$/, 'identify'), ['-format', '%[colorspace]|%[profiles]\n', `${input}[0]`], { maxBuffer: 64 << 20 });
  const [space, profiles = ''] = stdout.split('\n')[0].split('|');
  if (space !== 'CMYK') return [];
  return [...(profiles.split(',').includes('icc') ? [] : ['-profile', `${ICC_DIR}/default_cmyk.icc`]), '-profile', `${ICC_DIR}/srgb.icc`];
}

async function similarity(ref: Pixels, path: string): Promise<string> {
  const p = await pixelsOf(path);
  if (p.width !== ref.width || p.height !== ref.height) return `size ${p.width}×${p.height}`;
  return ssim(ref, p).toFixed(4);
}

export default async function universal(ctx: BenchContext): Promise<string> {
  const load = loadavg()[0];
  const rows: (string | number)[][] = [];
  const failures: string[][] = [];
  const work = await mkdtemp(join(tmpdir(), 'bench-universal-'));
  try {
    for (const d of DIRS) {
      for (const name of (await readdir(join(ctx.corpus, d))).sort()) {
        const input = join(ctx.corpus, d, name);
        const dir = await mkdtemp(join(work, 'f-'));
        const bytesIn = (await stat(input)).size;
        let mine: { result: string; ms: number };
        try {
          mine = await timed(ctx.runs, () => ours(input, dir));
        } catch (err) {
          if (!(err instanceof JobError)) throw err;
          failures.push([`${d}/${name}`, err.code, err.message.slice(0, 120)]);
          continue;
        }
        const ref = await reference(input, dir).catch(() => undefined);
        const cells: (string | number)[] = [`${d}/${name}`, bytesIn, `${(mine.ms / 1000).toFixed(2)} s`, (await stat(mine.result)).size, mine.result.split('.').pop()!, ref ? await similarity(ref, mine.result) : 'no ref'];
        for (const peer of [magick, vips]) {
          try {
            const run = await timed(1, () => peer(input, dir));
            cells.push((await stat(run.result)).size, ref ? await similarity(ref, run.result) : 'no ref');
          } catch {
            cells.push('fails', '—');
          }
        }
        rows.push(cells);
        await rm(dir, { recursive: true, force: true });
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return [
    '## Universal image compressor (image.universal-compress)',
    '',
    `Median of ${ctx.runs} runs for ours (load average at the start: ${load.toFixed(2)} on ${availableParallelism()} cores); SSIM = mean luma SSIM at full resolution against the reference decode (dcraw -w for RAW, heif-convert for HEIC, avifdec for SDR AVIF, ImageMagick for the rest; CMYK converted through its ICC profile). Size rule: a JPG made from another format is kept within the input's bytes down to SSIM 0.95 (see docs/compressors.md); rows where ours is larger than the input are at that floor.`,
    '',
    markdownTable(['file', 'bytes in', 'ours time', 'ours bytes', 'ours fmt', 'ours SSIM', 'IM q80 bytes', 'IM SSIM', 'vips q80 bytes', 'vips SSIM'], rows),
    '',
    'Inputs that end Failed (stripped or cut camera files):',
    '',
    markdownTable(['file', 'code', 'detail'], failures),
  ].join('\n');
}
