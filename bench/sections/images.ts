// Image compressors vs peer tools on ../shared/corpus/{jpg,png,gif}: bytes, savings, full-
// resolution luma SSIM against the original (the same function for every tool), median time.
import { copyFile, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { defaultSetting, jpegOptions } from '../../workers/image/encode.ts';
import { ssim, type Pixels } from '../../workers/image/ssim.ts';
import { PERCEIVED_TARGET } from '../../workers/image/perceived.ts';
import { Ssimulacra2Reference } from '../../workers/image/ssimulacra2.ts';
import type { Compress } from '../../workers/contract.ts';
import { compress as gif } from '../../workers/gif.ts';
import { compress as jpg } from '../../workers/jpg.ts';
import { compress as png } from '../../workers/png.ts';
import { savingsVsSsimChart, timeChart, type ChartRow } from '../charts.ts';
import { type BenchContext, exec, markdownTable, median, timed } from '../lib.ts';

/** A tool turns an input file into an output file in `dir`, or returns undefined when it declines. */
type Tool = (input: string, dir: string) => Promise<string | undefined>;

type Row = ChartRow;

const ours = (c: Compress, options = {}): Tool => async (input, dir) =>
  (await c({ inputPath: input, format: input.split('.').pop() ?? '', options }, { dir }, { signal: new AbortController().signal, progress: () => {} })).path;

/** Runs a command on a copy of the input (many tools work in place) and returns the copy. */
const inPlace = (cmd: string, args: string[]): Tool => async (input, dir) => {
  const out = join(dir, `out.${input.split('.').pop()}`);
  await copyFile(input, out);
  await exec(cmd, [...args, out]);
  return out;
};

const toFile = (cmd: string, args: (input: string, out: string) => string[], okCodes: number[] = []): Tool => async (input, dir) => {
  const out = join(dir, `out.${input.split('.').pop()}`);
  try {
    await exec(cmd, args(input, out));
  } catch (err) {
    if (okCodes.includes((err as { code?: number }).code ?? -1)) return undefined;
    throw err;
  }
  return out;
};

const sharpFixed = (quality: number): Tool => async (input, dir) => {
  const out = join(dir, 'out.jpg');
  await sharp(input).keepMetadata().jpeg(jpegOptions(defaultSetting(quality))).toFile(out);
  return out;
};

/**
 * The lowest mozjpeg quality whose full-resolution SSIMULACRA2 reaches the perceived target, by
 * bisection on full encodes: what automatic JPEG quality costs done plainly (the speed bench's
 * comparison for JPG, issue 21).
 */
export const sharpBruteForce: Tool = async (input, dir) => {
  const reference = new Ssimulacra2Reference(await decode(input));
  const encodeAt = async (q: number) => sharp(input).keepMetadata().jpeg(jpegOptions(defaultSetting(q))).toBuffer();
  let lo = 30;
  let hi = 95;
  let best = await encodeAt(hi);
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    const data = await encodeAt(mid);
    if (reference.score(await decode(data)) >= PERCEIVED_TARGET) {
      hi = mid;
      best = data;
    } else {
      lo = mid;
    }
  }
  const out = join(dir, 'out.jpg');
  await writeFile(out, best);
  return out;
};

async function decode(input: string | Buffer): Promise<Pixels> {
  const { data, info } = await sharp(input, { animated: true }).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

const TOOLS: Record<string, Record<string, Tool>> = {
  jpg: {
    'compressd (auto quality)': ours(jpg),
    'jpegoptim --max=80': inPlace('jpegoptim', ['--max=80', '-q']),
    'sharp mozjpeg q80': sharpFixed(80),
    'sharp mozjpeg SSIMULACRA2≥80 search': sharpBruteForce,
  },
  png: {
    'compressd lossy': ours(png),
    'compressd lossless': ours(png, { compression: { mode: 'lossless' } }),
    'pngquant --quality=65-80': toFile('pngquant', (i, o) => ['--quality=65-80', '--force', '--output', o, i], [98, 99]),
    'optipng -o2': toFile('optipng', (i, o) => ['-o2', '-quiet', '-out', o, i]),
    zopflipng: toFile('zopflipng', (i, o) => ['-y', i, o]),
  },
  gif: {
    compressd: ours(gif),
    'gifsicle -O3': toFile('gifsicle', (i, o) => ['-O3', i, '-o', o]),
    'gifsicle -O3 --lossy=20': toFile('gifsicle', (i, o) => ['-O3', '--lossy=20', i, '-o', o]),
    'gifsicle -O3 --lossy=40': toFile('gifsicle', (i, o) => ['-O3', '--lossy=40', i, '-o', o]),
    'gifsicle -O3 --lossy=80': toFile('gifsicle', (i, o) => ['-O3', '--lossy=80', i, '-o', o]),
  },
};

export default async function images(ctx: BenchContext): Promise<string> {
  const work = await mkdtemp(join(tmpdir(), 'bench-images-'));
  const sections: string[] = ['## Images'];
  const all: Row[] = [];
  try {
    const only = process.env.BENCH_IMAGE_FORMATS?.split(',');
    for (const [format, tools] of Object.entries(TOOLS).filter(([f]) => !only || only.includes(f))) {
      const files = (await readdir(join(ctx.corpus, format))).sort();
      const rows: Row[] = [];
      for (const file of files) {
        const input = join(ctx.corpus, format, file);
        const bytesIn = (await stat(input)).size;
        const reference = await decode(input);
        for (const [tool, run] of Object.entries(tools)) {
          let n = 0;
          const { result, ms } = await timed(ctx.runs, async () => {
            const dir = join(work, `${format}-${file}-${rows.length}-${n++}`);
            await mkdir(dir);
            return run(input, dir);
          });
          let bytesOut: number | undefined;
          let score: number | undefined;
          if (result) {
            bytesOut = (await stat(result)).size;
            const after = await decode(result);
            score = after.width === reference.width && after.height === reference.height ? ssim(reference, after) : undefined;
          }
          rows.push({ file, tool, bytesIn, bytesOut, ssim: score, ms });
        }
      }
      all.push(...rows);
      const name = (kind: string) => `images-${format}-${kind}.png`;
      await savingsVsSsimChart(join(ctx.resultsDir, name('ssim')), `${format.toUpperCase()}: savings vs SSIM (dashed: 0.98)`, rows, 0.98);
      await timeChart(join(ctx.resultsDir, name('time')), `${format.toUpperCase()}: median time per file`, rows);
      sections.push(`### ${format.toUpperCase()}`, table(rows), summary(rows, Object.keys(tools)), `![savings vs SSIM](${name('ssim')}) ![time](${name('time')})`);
    }
    await writeFile(join(ctx.resultsDir, 'images.json'), JSON.stringify(all, null, 2));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return sections.join('\n\n');
}

const savings = (r: Row): number | undefined => (r.bytesOut === undefined ? undefined : 100 * (1 - r.bytesOut / r.bytesIn));

function table(rows: Row[]): string {
  return markdownTable(
    ['file', 'tool', 'bytes in', 'bytes out', 'savings %', 'SSIM', 'median ms'],
    rows.map((r) => [r.file, r.tool, r.bytesIn, r.bytesOut ?? 'declined', savings(r)?.toFixed(1) ?? '—', r.ssim?.toFixed(4) ?? '—', r.ms.toFixed(0)]),
  );
}

function summary(rows: Row[], tools: string[]): string {
  return markdownTable(
    ['tool (medians over files)', 'savings %', 'SSIM', 'min SSIM', 'ms'],
    tools.map((tool) => {
      const mine = rows.filter((r) => r.tool === tool);
      const s = mine.map(savings).filter((v): v is number => v !== undefined);
      const q = mine.map((r) => r.ssim).filter((v): v is number => v !== undefined);
      return [tool, s.length ? median(s).toFixed(1) : '—', q.length ? median(q).toFixed(4) : '—', q.length ? Math.min(...q).toFixed(4) : '—', median(mine.map((r) => r.ms)).toFixed(0)];
    }),
  );
}
