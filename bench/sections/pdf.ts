// PDF: our document.pdf-compress against Ghostscript /ebook and /screen and qpdf, on
// ../shared/corpus/pdf: bytes, time, pages kept, text similarity (pdftotext) and the SSIM of
// every page rendered at 100 dpi (pdftoppm), worst page reported.
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { ssim } from '../../workers/image/ssim.ts';
import { compress } from '../../workers/pdf.ts';
import { exec, markdownTable, median, timed, type BenchContext } from '../lib.ts';

type Tool = { name: string; run: (input: string, output: string) => Promise<string> };

const gs = (setting: string): Tool => ({
  name: `gs /${setting}`,
  run: async (input, output) => {
    await exec('gs', ['-q', '-dNOPAUSE', '-dBATCH', '-dSAFER', '-sDEVICE=pdfwrite', `-dPDFSETTINGS=/${setting}`, `-sOutputFile=${output}`, input], { maxBuffer: 64 << 20 });
    return output;
  },
});

const TOOLS: Tool[] = [
  {
    name: 'compressd',
    run: async (input, output) => {
      const dir = await mkdtemp(join(tmpdir(), 'bench-pdf-ours-'));
      const r = await compress({ inputPath: input, format: 'pdf', options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} });
      await exec('mv', [r.path, output]);
      await rm(dir, { recursive: true, force: true });
      return output;
    },
  },
  gs('ebook'),
  gs('screen'),
  {
    name: 'qpdf',
    run: async (input, output) => {
      await exec('qpdf', ['--recompress-flate', '--object-streams=generate', input, output]);
      return output;
    },
  },
];

async function pageCount(path: string): Promise<number> {
  const { stdout } = await exec('pdfinfo', [path]);
  return Number(/^Pages:\s+(\d+)/m.exec(stdout)?.[1] ?? NaN);
}

async function words(path: string): Promise<string[]> {
  const { stdout } = await exec('pdftotext', [path, '-'], { maxBuffer: 256 << 20 });
  return stdout.split(/\s+/).filter(Boolean);
}

/** Dice coefficient of the two word multisets: 1 when the same words come out. */
function textSimilarity(a: string[], b: string[]): number {
  if (a.length === 0 && b.length === 0) return 1;
  const counts = new Map<string, number>();
  for (const w of a) counts.set(w, (counts.get(w) ?? 0) + 1);
  let common = 0;
  for (const w of b) {
    const n = counts.get(w) ?? 0;
    if (n > 0) {
      common++;
      counts.set(w, n - 1);
    }
  }
  return (2 * common) / (a.length + b.length);
}

async function render(path: string, dir: string, prefix: string): Promise<string[]> {
  await exec('pdftoppm', ['-r', '100', '-gray', '-png', path, join(dir, prefix)], { maxBuffer: 64 << 20 });
  return (await readdir(dir)).filter((f) => f.startsWith(prefix + '-')).sort().map((f) => join(dir, f));
}

async function grey(path: string, size?: { width: number; height: number }) {
  const img = sharp(path, { limitInputPixels: false }).greyscale();
  if (size) img.resize(size.width, size.height, { fit: 'fill' });
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** Lowest SSIM over the pages of `candidate` against the original's renderings (0 when page counts differ). */
async function worstPageSsim(originalPages: string[], candidate: string): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-pdf-render-'));
  try {
    const pages = await render(candidate, dir, 'b');
    if (pages.length !== originalPages.length) return 0;
    let worst = 1;
    for (let i = 0; i < pages.length; i++) {
      const pa = await grey(originalPages[i]);
      worst = Math.min(worst, ssim(pa, await grey(pages[i], pa)));
    }
    return worst;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Scanned or photo-heavy: every page shows at least one image. */
async function everyPageHasImages(path: string, pages: number): Promise<boolean> {
  const { stdout } = await exec('pdfimages', ['-list', path]);
  const withImages = new Set(stdout.split('\n').slice(2).map((l) => l.trim().split(/\s+/)[0]).filter(Boolean));
  return withImages.size === pages;
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

export default async function pdfSection(ctx: BenchContext): Promise<string> {
  const dir = join(ctx.corpus, 'pdf');
  const files = (await readdir(dir)).filter((f) => f.endsWith('.pdf')).sort();
  const work = await mkdtemp(join(tmpdir(), 'bench-pdf-'));
  const rows: (string | number)[][] = [];
  const stats = new Map(TOOLS.map((t) => [t.name, { savings: [] as number[], heavy: [] as number[], bigger: 0, ms: 0, worstSsim: 1, textLoss: 0, pagesLost: 0 }]));
  try {
    for (const file of files) {
      const input = join(dir, file);
      const inSize = (await stat(input)).size;
      const pages = await pageCount(input);
      const heavy = await everyPageHasImages(input, pages);
      const inWords = await words(input);
      const originalDir = await mkdtemp(join(work, 'original-'));
      const originalPages = await render(input, originalDir, 'a');
      for (const tool of TOOLS) {
        const output = join(work, `${file}.${tool.name.replace(/\W+/g, '_')}.pdf`);
        const { ms } = await timed(ctx.runs, () => tool.run(input, output));
        const outSize = (await stat(output)).size;
        const outPages = await pageCount(output);
        const similarity = textSimilarity(inWords, await words(output));
        const worst = (await readFile(output)).equals(await readFile(input)) ? 1 : await worstPageSsim(originalPages, output);
        const s = stats.get(tool.name)!;
        const saving = 1 - outSize / inSize;
        s.savings.push(saving);
        if (heavy) s.heavy.push(saving);
        if (outSize > inSize) s.bigger++;
        if (outPages !== pages) s.pagesLost++;
        if (similarity < 1) s.textLoss++;
        s.ms += ms;
        s.worstSsim = Math.min(s.worstSsim, worst);
        rows.push([file, tool.name, inSize, outSize, pct(saving), Math.round(ms), `${outPages}/${pages}`, similarity.toFixed(4), worst.toFixed(3)]);
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const summary = TOOLS.map((t) => {
    const s = stats.get(t.name)!;
    return [t.name, pct(median(s.savings)), s.heavy.length ? pct(median(s.heavy)) : '-', `${s.bigger}/${files.length}`, s.pagesLost, s.textLoss, s.worstSsim.toFixed(3), (s.ms / 1000).toFixed(1)];
  });
  return [
    '## PDF (document.pdf-compress)',
    '',
    `Corpus: ${files.length} PDFs from ../shared/corpus/pdf; median of ${ctx.runs} runs per tool. Text similarity: Dice coefficient of the pdftotext words (1 = same words). SSIM: worst page, rendered at 100 dpi in grey by pdftoppm. "Scanned/photo" = files where every page shows an image.`,
    '',
    markdownTable(['tool', 'median saving', 'median saving, scanned/photo', 'bigger', 'page counts changed', 'files with text changes', 'worst page SSIM', 'total time s'], summary),
    '',
    markdownTable(['file', 'tool', 'bytes in', 'bytes out', 'saving', 'ms', 'pages', 'text', 'SSIM'], rows),
  ].join('\n');
}
