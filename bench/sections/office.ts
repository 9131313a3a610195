// Office compressor (issue 9) against the simple reference: unzip, `jpegoptim --max=80` and
// `pngquant` on the media, `zip -9`. Image quality is compared as mean luma SSIM at the resolution
// our output keeps (the displayed size), and every output must open in headless LibreOffice.
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import sharp from 'sharp';
import yauzl from 'yauzl';
import { ssim, type Pixels } from '../../workers/image/ssim.ts';
import { compress } from '../../workers/office.ts';
import { ScoreJudge } from '../scores.ts';
import { exec, markdownTable, median, timed, type BenchContext } from '../lib.ts';

export default async function office(ctx: BenchContext): Promise<string> {
  const work = await mkdtemp(join(tmpdir(), 'bench-office-'));
  try {
    const files = (await Promise.all(['docx', 'pptx'].map(async (d) => (await readdir(join(ctx.corpus, d))).sort().map((f) => join(ctx.corpus, d, f))))).flat();
    const rows: (string | number)[][] = [];
    const opens: string[] = [];
    const savings: { ours: number[]; ref: number[] } = { ours: [], ref: [] };
    for (const [i, file] of files.entries()) {
      const dir = join(work, String(i));
      await mkdir(dir);
      const inBytes = (await stat(file)).size;
      const ours = await timed(ctx.runs, async () => {
        const out = await mkdtemp(join(dir, 'ours-'));
        return (await compress({ inputPath: file, format: file.split('.').pop()!, options: {} }, { dir: out }, { signal: new AbortController().signal, progress: () => {} })).path;
      });
      const ref = await timed(ctx.runs, () => reference(file, dir));
      const [oursBytes, refBytes] = [(await stat(ours.result)).size, (await stat(ref.result)).size];
      const q = await mediaSsim(file, ours.result, ref.result);
      const saved = (n: number) => (1 - n / inBytes) * 100;
      savings.ours.push(saved(oursBytes));
      savings.ref.push(saved(refBytes));
      rows.push([
        basename(file),
        inBytes,
        oursBytes,
        `${saved(oursBytes).toFixed(1)} %`,
        `${(ours.ms / 1000).toFixed(2)} s`,
        refBytes,
        `${saved(refBytes).toFixed(1)} %`,
        `${(ref.ms / 1000).toFixed(2)} s`,
        q.count ? `${q.ours.toFixed(4)} / ${q.ref.toFixed(4)} (${q.count})` : '—',
      ]);
      opens.push(await libreOfficeCheck(file, ours.result, join(dir, 'lo')));
    }
    return [
      '## Office (DOCX, PPTX)',
      '',
      `Medians of ${ctx.runs} runs. Reference: unzip, \`jpegoptim --max=80\` + \`pngquant --skip-if-larger\` on the media, \`zip -9\` with [Content_Types].xml first. ` +
        'SSIM: mean luma SSIM of the JPEG/PNG media against the original, both measured at the size our output keeps (ours / reference, number of images).',
      '',
      markdownTable(['file', 'input B', 'ours B', 'ours saved', 'ours time', 'reference B', 'ref saved', 'ref time', 'SSIM ours / ref (n)'], rows),
      '',
      `Median savings: ours ${median(savings.ours).toFixed(1)} %, reference ${median(savings.ref).toFixed(1)} %.`,
      '',
      '### Opens in headless LibreOffice (converted to PDF; pages of the original / our output)',
      '',
      ...opens.map((line) => `- ${line}`),
    ].join('\n');
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * The simple reference pipeline (also the Office peer of the speed section). `pngs`: pngquant at its
 * default quality, at a quality range, or PNGs kept as they are (the quality benchmark's ends).
 */
export async function reference(file: string, dir: string, maxQuality = 80, pngs: 'pngquant' | 'keep' | { quality: string } = 'pngquant'): Promise<string> {
  const tree = await mkdtemp(join(dir, 'ref-'));
  const tag = pngs === 'pngquant' ? '' : pngs === 'keep' ? '-png-kept' : `-png-${pngs.quality}`;
  const out = join(dir, `reference-q${maxQuality}${tag}-${basename(file)}`);
  await rm(out, { force: true });
  await exec('unzip', ['-q', '-o', file, '-d', tree]);
  const media = (await readdir(tree, { recursive: true })).filter((f) => /(^|\/)media\//.test(f));
  const jpegs = media.filter((f) => /\.jpe?g$/i.test(f)).map((f) => join(tree, f));
  const pngFiles = media.filter((f) => /\.png$/i.test(f)).map((f) => join(tree, f));
  if (jpegs.length) await exec('jpegoptim', ['-q', `--max=${maxQuality}`, ...jpegs]);
  // pngquant exits 98/99 when it skips a file (larger, or quality not reached): those keep their bytes.
  const quality = typeof pngs === 'object' ? [`--quality=${pngs.quality}`] : [];
  for (const p of pngs === 'keep' ? [] : pngFiles) await exec('pngquant', ['--force', '--skip-if-larger', ...quality, '--ext', '.png', p]).catch(() => undefined);
  await exec('zip', ['-q', '-X', '-9', out, '[Content_Types].xml'], { cwd: tree });
  await exec('zip', ['-q', '-X', '-9', '-r', out, '.', '-x', '[Content_Types].xml'], { cwd: tree });
  return out;
}

async function zipEntries(path: string): Promise<Map<string, Buffer>> {
  const zip = await yauzl.openPromise(path, { lazyEntries: true, autoClose: false });
  const out = new Map<string, Buffer>();
  for await (const e of zip.eachEntry()) {
    if (!/\/media\/[^/]+\.(jpe?g|png)$/i.test(e.fileName)) continue;
    const chunks: Buffer[] = [];
    for await (const c of await zip.openReadStreamPromise(e)) chunks.push(c as Buffer);
    out.set(e.fileName, Buffer.concat(chunks));
  }
  zip.close();
  return out;
}

/** A picture flattened on white and resized to `width`×`height`, as the document shows it at the size our output keeps. */
async function shown(buf: Buffer, width: number, height: number): Promise<Pixels> {
  const { data, info } = await sharp(buf).flatten({ background: '#ffffff' }).resize(width, height, { fit: 'fill', kernel: 'lanczos3' }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

export async function mediaSsim(original: string, ours: string, ref: string): Promise<{ ours: number; ref: number; count: number }> {
  const [a, b, c] = await Promise.all([zipEntries(original), zipEntries(ours), zipEntries(ref)]);
  let so = 0;
  let sr = 0;
  let n = 0;
  for (const [name, orig] of a) {
    const mine = b.get(name);
    const theirs = c.get(name);
    if (!mine || !theirs) continue;
    const { width, height } = await sharp(mine).metadata();
    if (!width || !height) continue;
    const [po, pm, pr] = await Promise.all([shown(orig, width, height), shown(mine, width, height), shown(theirs, width, height)]);
    so += ssim(po, pm);
    sr += ssim(po, pr);
    n++;
  }
  return { ours: n ? so / n : 0, ref: n ? sr / n : 0, count: n };
}

/** Per output, over the pictures every output kept: mean luma SSIM, mean SSIMULACRA2 and the worst picture's. */
export interface MediaScores {
  count: number;
  outputs: { ssim: number; score?: number; worst?: number }[];
}

/**
 * Every picture of `outputs` (the first is ours, whose picture sizes all are judged at) scored
 * against the original's, as mediaSsim does, with SSIMULACRA2 beside the luma SSIM. The original
 * picture is prepared once for all outputs.
 */
export async function mediaScores(original: string, outputs: string[]): Promise<MediaScores> {
  const [orig, ...outs] = await Promise.all([original, ...outputs].map(zipEntries));
  const per = outputs.map(() => ({ ssim: [] as number[], score: [] as number[] }));
  for (const [name, buf] of orig) {
    const bufs = outs.map((o) => o.get(name));
    if (bufs.some((b) => !b)) continue;
    const { width, height } = await sharp(bufs[0]).metadata();
    if (!width || !height) continue;
    const judge = new ScoreJudge(await shown(buf, width, height));
    for (const [i, b] of bufs.entries()) {
      const s = judge.score(await shown(b!, width, height))!;
      per[i].ssim.push(s.ssim);
      if (s.score !== undefined) per[i].score.push(s.score);
    }
  }
  const mean = (v: number[]) => (v.length ? v.reduce((x, y) => x + y, 0) / v.length : undefined);
  return {
    count: per[0].ssim.length,
    outputs: per.map((p) => ({ ssim: mean(p.ssim) ?? 0, score: p.score.length === p.ssim.length ? mean(p.score) : undefined, worst: p.score.length ? Math.min(...p.score) : undefined })),
  };
}

/** Converts the original and our output to PDF with headless LibreOffice and compares their page counts. */
async function libreOfficeCheck(original: string, ours: string, dir: string): Promise<string> {
  const name = basename(original);
  const pages = async (file: string, sub: string): Promise<number> => {
    const outdir = join(dir, sub);
    await mkdir(outdir, { recursive: true });
    await exec('soffice', [`-env:UserInstallation=file://${join(dir, 'profile')}`, '--headless', '--convert-to', 'pdf', '--outdir', outdir, file], { timeout: 120_000 });
    const pdf = (await readdir(outdir)).find((f) => f.endsWith('.pdf'));
    if (!pdf) return 0;
    return ((await readFile(join(outdir, pdf))).toString('latin1').match(/\/Type\s*\/Page[^s]/g) ?? []).length;
  };
  try {
    const [before, after] = [await pages(original, 'original'), await pages(ours, 'ours')];
    const ok = after > 0 && after === before;
    return `${name}: ${ok ? 'opens' : 'FAILED'} (${before} / ${after} pages)`;
  } catch (err) {
    return `${name}: FAILED (${(err as Error).message.split('\n')[0]})`;
  }
}
