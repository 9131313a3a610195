// Rate–quality at equal quality: for every file, each peer runs at several settings, its size is
// interpolated at the quality our output reaches (log bytes against the log distance from lossless
// between the two settings around it, bench/equal-quality.ts), and the report gives per kind the
// median of ours / peer at equal quality and the files where we are more than 5 % bigger than the
// strongest peer. Two metrics, each the same for every tool, against a reference decode of the input:
// mean luma SSIM at full resolution (workers/image/ssim.ts; the table this page has always had), and
// SSIMULACRA2 (workers/image/ssimulacra2.ts; the metric our searches are judged by, which sees colour).
// Inputs: the shared corpus plus files made with the properties of issues 19 and 30 (test/helpers/made-files.ts)
// and the colour, gradient and palette cases of bench/generated.ts.
// Universal inputs are scored against one reference decode, which every peer also encodes from.
// Writes bench/results/quality*.png; a run of every kind also rewrites docs/benchmarks.md's "How well it
// compresses" table and its charts in docs/bench/.
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import sharp from 'sharp';
import {
  ditheredPaletteBmp,
  ditheredPaletteTiff,
  fourPhotoAlbumPptx,
  greyPictures,
  inlineImagesDocx,
  maxQualityExports,
  photo,
  photoAlbumPptx,
  profiledSmallJpeg,
  rangeMismatchAvif,
  screenshotPng,
  smallXmlDocx,
  tenBitAlphaAvif,
} from '../../test/helpers/made-files.ts';
import type { Compress } from '../../workers/contract.ts';
import { compress as gif } from '../../workers/gif.ts';
import { appSegments, withSegments } from '../../workers/image/jpeg-segments.ts';
import type { Pixels } from '../../workers/image/ssim.ts';
import { compress as jpg } from '../../workers/jpg.ts';
import { compress as office } from '../../workers/office.ts';
import { compress as png } from '../../workers/png.ts';
import { compress as universal } from '../../workers/universal.ts';
import { ratioChart, savingsVsScoreChart, savingsVsSsimChart, type ChartRow } from '../charts.ts';
import { fromResult, type Measured, type Metric, type Point, type Ratio, ratios, strongest, toResult } from '../equal-quality.ts';
import { equalQualityInputs, generatedInputs } from '../generated.ts';
import { type BenchContext, exec, isRaw, markdownTable, median, timed } from '../lib.ts';
import { MOZJPEG_S2, scoreDetailTable, scorePeerTable, scoreSummaryTable, unscoredNote } from '../score-tables.ts';
import { MAX_SCORED_PIXELS, ScoreJudge, type Scores } from '../scores.ts';
import { mediaScores, reference as officeReference } from './office.ts';
import { pixelsOf, reference as universalReference } from './universal.ts';

const MAGICK = '/usr/bin/convert';
/** Bigger than the strongest peer at equal SSIM by more than this counts as a loss. */
const WORSE = 1.05;

/** Reference pixels of one input and the function that scores an output file against them. */
interface Judge {
  score: (output: string) => Promise<Scores | undefined>;
}

type Peer = (input: string, dir: string, judge: Judge) => Promise<Point[]>;

interface Kind {
  inputs: (ctx: BenchContext, made: string) => Promise<string[]>;
  ours: Compress;
  judge: (input: string, dir: string) => Promise<Judge>;
  peers: Record<string, Peer>;
}

const ctxOf = { signal: new AbortController().signal, progress: () => {} };
const corpusFiles = async (ctx: BenchContext, ...dirs: string[]): Promise<string[]> =>
  (await Promise.all(dirs.map(async (d) => (await readdir(join(ctx.corpus, d))).sort().map((f) => join(ctx.corpus, d, f))))).flat();

async function decode(input: string | Buffer): Promise<Pixels & { frameHeight: number }> {
  const img = sharp(input, { animated: true, limitInputPixels: false });
  const [{ data, info }, meta] = await Promise.all([img.clone().ensureAlpha().raw().toBuffer({ resolveWithObject: true }), img.metadata()]);
  return { data, width: info.width, height: info.height, channels: info.channels, frameHeight: meta.pageHeight ?? info.height };
}

/** Scores against sharp's decode of the input (every frame, stacked, for animations). */
const decodeJudge = async (input: string): Promise<Judge> => {
  const ref = await decode(input);
  const judge = new ScoreJudge(ref, { frameHeight: ref.frameHeight });
  return { score: async (out) => judge.score(await decode(out)) };
};

/** Runs a command per setting; each writes `out` (or works in place on a copy). */
function settings(names: string[], run: (setting: string, input: string, out: string) => Promise<unknown>, ext?: string): Peer {
  return async (input, dir, judge) => {
    const points: Point[] = [];
    for (const setting of names) {
      const out = join(dir, `${setting.replace(/\W+/g, '_')}.${ext ?? input.split('.').pop()}`);
      const t = performance.now();
      try {
        await run(setting, input, out);
      } catch {
        continue;
      }
      const ms = performance.now() - t;
      const scores = await judge.score(out).catch(() => undefined);
      if (scores) points.push({ setting, bytes: (await stat(out)).size, ...scores, ms });
    }
    return points;
  };
}

const copyThen = (cmd: string, args: (setting: string) => string[]) => async (setting: string, input: string, out: string) => {
  await copyFile(input, out);
  await exec(cmd, [...args(setting), out]);
};

/**
 * mozjpeg (sharp, its defaults: 4:2:0, progressive, trellis, standard tables; metadata kept) at the
 * lowest quality whose `metric` reaches each target, found by bisection on full encodes of `source`
 * (the input, or the reference pixels for formats that are not JPEG) between `range`'s qualities.
 */
function mozjpegSearch(targets: number[], metric: Metric, range: [number, number], source: (input: string, dir: string) => Promise<string> = async (i) => i): Peer {
  return async (input, dir, judge) => {
    const at = mozjpegAt(await source(input, dir), dir, judge);
    const points: Point[] = [];
    // A higher target is never reached below a lower one's answer: each bisection starts from it.
    let floor = range[0];
    let last = NaN;
    for (const target of [...targets].sort((a, b) => a - b)) {
      let [lo, hi] = [floor, range[1]];
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (((await at(mid))?.[metric] ?? -Infinity) >= target) hi = mid;
        else lo = mid;
      }
      floor = Math.max(range[0], hi - 1);
      if (hi === last) continue;
      last = hi;
      const p = await at(hi);
      if (p) points.push({ ...p, setting: `${metric === 'ssim' ? 'SSIM' : 'SSIMULACRA2'} ${target}: q${hi}` });
    }
    return points;
  };
}

/** mozjpeg at one quality, each quality encoded and scored once. */
function mozjpegAt(from: string, dir: string, judge: Judge): (q: number) => Promise<Point | undefined> {
  const tried = new Map<number, Promise<Point | undefined>>();
  const encode = async (q: number): Promise<Point | undefined> => {
    const out = join(dir, `moz-${q}.jpg`);
    const t = performance.now();
    // Metadata kept, as the other tools and ours do (a camera's EXIF can be 20-60 KB).
    await sharp(from, { limitInputPixels: false }).keepMetadata().jpeg({ quality: q, mozjpeg: true }).toFile(out);
    const ms = performance.now() - t;
    const scores = await judge.score(out);
    return scores && { setting: `q${q}`, bytes: (await stat(out)).size, ...scores, ms };
  };
  return (q) => {
    if (!tried.has(q)) tried.set(q, encode(q));
    return tried.get(q)!;
  };
}

/**
 * The plain search our JPEG quality search is measured against, on each metric. SSIMULACRA2 30–95:
 * 60–95 spans medium to visually lossless, and our outputs of coloured detail score lower (4:2:0
 * chroma), so the search goes below; 4:2:0 also caps it on such pictures (q100 about 70).
 */
const mozjpegSsimSearch = (source?: (input: string, dir: string) => Promise<string>) => mozjpegSearch([0.97, 0.98, 0.99], 'ssim', [30, 96], source);
const mozjpegScoreSearch = (source?: (input: string, dir: string) => Promise<string>) => mozjpegSearch([30, 40, 50, 60, 70, 80, 85, 90, 95], 'score', [5, 100], source);

// Quality 85 as well: log(bytes) is convex in log(1 − SSIM) between 80 and 90, so a straight line across
// that gap credits a peer with files it does not make (a 200×130 photo: libjpeg q80 9,163 B / 0.9786, q85
// 11,844 B / 0.9857, q90 13,456 B / 0.9971; the 80–90 line puts 0.9813 at 9,250 B, the 80–85 one at 9,990 B).
// 20 and 98 at the ends: compared on SSIMULACRA2 our outputs lie anywhere from about 45 to 95, and a
// peer must span our score to be compared at it.
const JPEG_QUALITIES = ['20', '30', '40', '50', '60', '70', '80', '85', '90', '95', '98'];
const magickJpeg = settings(JPEG_QUALITIES, (q, input, out) => exec(MAGICK, [`${input}[0]`, '-auto-orient', '-quality', q, out], { maxBuffer: 64 << 20 }), 'jpg');
/** Built by `npm run bench`'s setup (scripts/jpegli.mjs). */
const CJPEGLI = new URL(`../../dist/jpegli/${process.arch}/compressd-jpegli`, import.meta.url).pathname;
const JPEGLI_420 = 'jpegli 4:2:0 q20–98';
const JPEGLI_444 = 'jpegli 4:4:4 q20–98';
/**
 * jpegli (the JPEG XL project's JPEG encoder, built by scripts/jpegli.mjs) at each quality, at 4:2:0 or
 * at 4:4:4 (cjpegli's default), as cjpegli runs it: adaptive quantisation, progressive, optimised codes.
 * It encodes the pixels the judge decodes from the input (CMYK converted to sRGB as for every tool), and
 * the input's metadata segments are written back, as the other JPEG tools keep them (a CMYK input's ICC
 * profile would no longer describe the pixels, so it is left out).
 */
const jpegli = (chroma: '420' | '444'): Peer =>
  settings(JPEG_QUALITIES, async (q, input, out) => {
    const { ppm, segments } = await jpegliInput(input, out);
    const [from, to] = await Promise.all([open(ppm), open(`${out}.part`, 'w')]);
    try {
      const child = spawn(CJPEGLI, [q, chroma], { stdio: [from.fd, to.fd, 'pipe'] });
      let err = '';
      child.stderr!.on('data', (d) => (err += d));
      const code = await new Promise((resolve, reject) => child.on('error', reject).on('close', resolve));
      if (code !== 0) throw new Error(`compressd-jpegli ${q} ${chroma}: ${err.trim()}`);
    } finally {
      await Promise.all([from.close(), to.close()]);
    }
    await writeFile(out, withSegments(await readFile(`${out}.part`), segments));
    await rm(`${out}.part`);
  }, 'jpg');

/**
 * The input's pixels as a PPM (PGM for grey) beside the peer's outputs and its metadata segments, made
 * once per input and folder (every quality of a peer asks).
 */
const jpegliInputs = new Map<string, Promise<{ ppm: string; segments: Buffer[] }>>();
function jpegliInput(input: string, out: string): Promise<{ ppm: string; segments: Buffer[] }> {
  const ppm = join(dirname(out), 'jpegli-input.ppm');
  const key = `${input}\0${ppm}`;
  if (!jpegliInputs.has(key)) jpegliInputs.set(key, makeJpegliInput(input, ppm));
  return jpegliInputs.get(key)!;
}
async function makeJpegliInput(input: string, ppm: string): Promise<{ ppm: string; segments: Buffer[] }> {
  const bytes = await readFile(input);
  const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  const segments = meta.format === 'jpeg' ? appSegments(bytes).filter((seg) => !(meta.space === 'cmyk' && seg[1] === 0xe2)) : [];
  const { data, info } = await sharp(bytes, { limitInputPixels: false }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== 1 && info.channels !== 3) throw new Error(`${info.channels} channels`);
  await writeFile(ppm, Buffer.concat([Buffer.from(`P${info.channels === 3 ? 6 : 5}\n${info.width} ${info.height}\n255\n`, 'latin1'), data]));
  return { ppm, segments };
}
const pngquantRanges = settings(['0-30', '40-60', '65-80', '85-95', '95-100'], (range, input, out) => exec('pngquant', [`--quality=${range}`, '--force', '--output', out, input]), 'png');
const optipng = settings(['-o2'], (level, input, out) => exec('optipng', [level, '-quiet', '-out', out, input]), 'png');

/**
 * The universal kind's one reference decode (see universal.ts: heif-convert, avifdec, dcraw, or
 * ImageMagick with CMYK through its profile), written as a plain PNG: it is what every output is
 * scored against and what every peer encodes, so a peer's own decoder never enters the comparison.
 */
const referencePng = (input: string, dir: string): Promise<string> => {
  let made = referencePngs.get(input);
  if (!made) {
    made = (async () => {
      const out = join(dir, 'reference-input.png');
      const p = await universalReference(input, dir);
      await sharp(p.data, { raw: { width: p.width, height: p.height, channels: p.channels as 3 | 4 } }).png({ compressionLevel: 1 }).toFile(out);
      return out;
    })();
    referencePngs.set(input, made);
  }
  return made;
};
/** Made once per input in the input's work folder (its judge asks first; its peers' folders are inside it). */
const referencePngs = new Map<string, Promise<string>>();

const fromReference = (peer: Peer): Peer => async (input, dir, judge) => peer(await referencePng(input, dir), dir, judge);

/** For inputs with transparency (PNG output) the peers are PNG tools; otherwise JPEG encoders. */
const universalPeers: Record<string, Peer> = {
  'ImageMagick q20–98': async (input, dir, judge) => ((await hasAlpha(input, dir)) ? [] : fromReference(magickJpeg)(input, dir, judge)),
  'mozjpeg SSIM search': async (input, dir, judge) => ((await hasAlpha(input, dir)) ? [] : mozjpegSsimSearch(referencePng)(input, dir, judge)),
  [MOZJPEG_S2]: async (input, dir, judge) => ((await hasAlpha(input, dir)) ? [] : mozjpegScoreSearch(referencePng)(input, dir, judge)),
  [JPEGLI_420]: async (input, dir, judge) => ((await hasAlpha(input, dir)) ? [] : fromReference(jpegli('420'))(input, dir, judge)),
  [JPEGLI_444]: async (input, dir, judge) => ((await hasAlpha(input, dir)) ? [] : fromReference(jpegli('444'))(input, dir, judge)),
  'pngquant 5 ranges': async (input, dir, judge) => ((await hasAlpha(input, dir)) ? fromReference(pngquantRanges)(input, dir, judge) : []),
  // Lossless, the top of the PNG scale: without it no PNG peer reaches an output near it.
  'optipng -o2': async (input, dir, judge) => ((await hasAlpha(input, dir)) ? fromReference(optipng)(input, dir, judge) : []),
};

async function hasAlpha(input: string, dir: string): Promise<boolean> {
  const png = await referencePng(input, dir);
  const [{ hasAlpha: declared }, { channels }] = await Promise.all([sharp(png).metadata(), sharp(png).stats()]);
  return declared === true && channels[channels.length - 1].min < 255;
}

const KINDS: Record<string, Kind> = {
  jpg: {
    inputs: async (ctx, made) => {
      const grey = await greyPictures(made);
      return [
        ...(await corpusFiles(ctx, 'jpg')),
        ...(await equalQualityInputs(made)).jpg,
        ...(await maxQualityExports(made)),
        await profiledSmallJpeg(join(made, 'huge-icc-small.jpg')),
        await profiledSmallJpeg(join(made, 'p3-small.jpg'), 0),
        grey.photo,
        grey.scan,
      ];
    },
    ours: jpg,
    judge: decodeJudge,
    peers: {
      'mozjpeg SSIM search': mozjpegSsimSearch(),
      [MOZJPEG_S2]: mozjpegScoreSearch(),
      'ImageMagick q20–98': magickJpeg,
      [JPEGLI_420]: jpegli('420'),
      [JPEGLI_444]: jpegli('444'),
      // Above the input's own quality jpegoptim only rewrites the Huffman tables: the lossless end.
      'jpegoptim --max': settings(['40', '50', '60', '70', '80', '85', '90', '95'], copyThen('jpegoptim', (q) => ['-q', `--max=${q}`])),
    },
  },
  png: {
    inputs: async (ctx, made) => {
      const photographic = join(made, 'photo-rgb.png');
      await writeFile(photographic, await photo('jpeg420exif.jpg', 1024));
      return [...(await corpusFiles(ctx, 'png')), photographic, await screenshotPng(join(made, 'screenshot.png')), ...(await equalQualityInputs(made)).png];
    },
    ours: png,
    judge: decodeJudge,
    peers: { 'pngquant 5 ranges': pngquantRanges, 'optipng -o2': optipng },
  },
  gif: {
    // The speed bench's generated animations too: a screen recording, a photo-like pan, a sprite loop.
    inputs: async (ctx) => {
      const made = await generatedInputs();
      return [...(await corpusFiles(ctx, 'gif')), made.screenGif, made.photoGif, made.spriteGif];
    },
    ours: gif,
    judge: decodeJudge,
    peers: {
      'gifsicle -O3 --lossy 0–300': settings(['0', '5', '10', '20', '40', '80', '120', '200', '300'], (lossy, input, out) =>
        exec('gifsicle', ['-O3', ...(lossy === '0' ? [] : [`--lossy=${lossy}`]), input, '-o', out]),
      ),
    },
  },
  universal: {
    inputs: async (ctx, made) => [
      ...(await corpusFiles(ctx, 'webp', 'avif', 'heic', 'tiff', 'bmp', 'psd', ...(process.env.BENCH_QUALITY_RAW === '0' ? [] : ['raw']))),
      await ditheredPaletteBmp(join(made, 'dithered-palette.bmp')),
      await ditheredPaletteTiff(join(made, 'dithered-palette.tif')),
      await rangeMismatchAvif(join(made, 'range-mismatch.avif')),
      await tenBitAlphaAvif(join(made, 'ten-bit-alpha.avif')),
      (await greyPictures(made)).bmp,
    ],
    ours: universal,
    judge: async (input, dir) => {
      // Camera RAW is judged as the sensor recorded it (binned 2×2: luma for SSIM, RGB for
      // SSIMULACRA2): dcraw's demosaicing guess of the full resolution differs from any other
      // developer's by more than any JPEG quality.
      const judge = new ScoreJudge(await pixelsOf(await referencePng(input, dir)), { binned: isRaw(input) });
      return { score: async (out) => judge.score(await pixelsOf(out)) };
    },
    peers: universalPeers,
  },
  office: {
    inputs: async (ctx, made) => [
      ...(await corpusFiles(ctx, 'docx', 'pptx')),
      await photoAlbumPptx(join(made, 'photo-album.pptx')),
      await inlineImagesDocx(join(made, 'inline-images.docx')),
      await smallXmlDocx(join(made, 'small-xml.docx')),
      await fourPhotoAlbumPptx(join(made, 'four-photo-album.pptx')),
    ],
    ours: office,
    // Office is judged per document below (mean SSIM of its pictures at the size our output keeps).
    judge: async () => ({ score: async () => undefined }),
    peers: {},
  },
};

/**
 * The Office peer's levels: jpegoptim caps from low to high, and the lossless end (jpegoptim only
 * rewriting Huffman tables, PNGs kept), so that its sizes span our pictures' scores.
 */
const OFFICE_LEVELS: { setting: string; q: number; pngs: Parameters<typeof officeReference>[3] }[] = [
  // pngquant's default keeps PNG pictures near their quality; the low end has to lower it too.
  { setting: 'jpegoptim --max=30, pngquant 0-30', q: 30, pngs: { quality: '0-30' } },
  ...[40, 60, 70, 80, 90, 95].map((q) => ({ setting: `jpegoptim --max=${q}`, q, pngs: 'pngquant' as const })),
  { setting: 'lossless (jpegoptim, PNGs kept)', q: 100, pngs: 'keep' },
];

/** Office: the simple reference at every level; each document's pictures scored at the size our output keeps. */
/** Our output of one input: its file, the time it took and the perceived quality the compressor reported. */
interface Ours {
  path: string;
  ms: number;
  reported?: number;
}

async function measureOffice(file: string, dir: string, ours: Ours): Promise<Measured | undefined> {
  const refs: { path: string; ms: number }[] = [];
  for (const level of OFFICE_LEVELS) {
    const t = performance.now();
    const path = await officeReference(file, dir, level.q, level.pngs);
    refs.push({ path, ms: performance.now() - t });
  }
  const m = await mediaScores(file, [ours.path, ...refs.map((r) => r.path)]);
  if (m.count === 0) return undefined;
  const [mine, ...theirs] = m.outputs;
  const points: Point[] = [];
  for (const [i, level] of OFFICE_LEVELS.entries()) {
    points.push({ setting: level.setting, bytes: (await stat(refs[i].path)).size, ssim: theirs[i].ssim, score: theirs[i].score, ms: refs[i].ms });
  }
  return {
    kind: 'office',
    file: basename(file),
    bytesIn: (await stat(file)).size,
    ours: { setting: 'ours', bytes: (await stat(ours.path)).size, ssim: mine.ssim, score: mine.score, worstScore: mine.worst, ms: ours.ms, reported: ours.reported },
    peers: { 'simple reference (jpegoptim 30–95 and lossless, pngquant, zip -9)': points },
  };
}

/**
 * BENCH_QUALITY_KINDS=jpg,office runs some kinds (docs/benchmarks.md is then left alone); BENCH_QUALITY_FILES=regex
 * runs only matching inputs; BENCH_QUALITY_JSON=a.json[,b.json] renders the report and docs/benchmarks.md from
 * saved measurements (a later file's rows replace an earlier one's for the same kind and file). Every run
 * writes bench/results/quality.json (one FileResult per file, rewritten after each file, so a run cut short
 * keeps what it measured); `npx tsx bench/compare-quality.ts A.json B.json` compares two of them.
 * BENCH_QUALITY_PEERS=a.json takes the image peers' measurements from a saved run instead of measuring
 * them again: they depend only on the input and its reference decode (made files are made the same way
 * every run), so a run that changed only our compressors measures only ours (minutes instead of an hour).
 */
export default async function quality(ctx: BenchContext): Promise<string> {
  if (process.env.BENCH_QUALITY_JSON) {
    const rows = new Map<string, Measured>();
    for (const f of process.env.BENCH_QUALITY_JSON.split(',')) {
      for (const r of JSON.parse(await readFile(f, 'utf8')) as Parameters<typeof fromResult>[0][]) {
        const m = fromResult(r);
        rows.set(`${m.kind}/${m.file}`, m);
      }
    }
    const saved = [...rows.values()];
    const skipped = JSON.parse(await readFile(join(ctx.resultsDir, 'quality-skipped.json'), 'utf8').catch(() => '[]')) as string[];
    await publish(saved, ctx, skipped, loadavg()[0]);
    return report(saved, ctx, loadavg()[0], skipped);
  }
  const only = process.env.BENCH_QUALITY_KINDS?.split(',');
  const savedPeers = new Map<string, Record<string, Point[]>>();
  for (const f of process.env.BENCH_QUALITY_PEERS?.split(',') ?? []) {
    for (const r of JSON.parse(await readFile(f, 'utf8')) as { kind: string; file: string; peers: Record<string, Point[]> }[]) savedPeers.set(`${r.kind}/${r.file}`, r.peers);
  }
  const files = process.env.BENCH_QUALITY_FILES ? new RegExp(process.env.BENCH_QUALITY_FILES) : undefined;
  const work = await mkdtemp(join(tmpdir(), 'bench-quality-'));
  const made = join(work, 'made');
  await mkdir(made);
  const load = loadavg()[0];
  const all: Measured[] = [];
  const skipped: string[] = [];
  try {
    for (const [kind, k] of Object.entries(KINDS).filter(([name]) => !only || only.includes(name))) {
      for (const input of await k.inputs(ctx, made)) {
        if (files && !files.test(basename(input))) continue;
        if (await tooLarge(input)) {
          skipped.push(`${kind}/${basename(input)}`);
          continue;
        }
        const dir = await mkdtemp(join(work, `${kind}-`));
        let n = 0;
        const ours = await timed(ctx.runs, async () => {
          const out = join(dir, `ours-${n++}`);
          await mkdir(out);
          return k.ours({ inputPath: input, format: input.split('.').pop() ?? '', options: {} }, { dir: out }, ctxOf);
        }).catch((err: Error) => {
          console.log(`quality: ${basename(input)} failed: ${err.message.slice(0, 100)}`);
          return undefined;
        });
        if (!ours) continue;
        // No reference decode (an AVIF sequence ImageMagick cannot read, say): nothing to compare against.
        const result = { path: ours.result.path, ms: ours.ms, reported: ours.result.perceivedQuality };
        const measured = await (kind === 'office' ? measureOffice(input, dir, result) : measureImage(kind, k, input, dir, result, savedPeers.get(`${kind}/${basename(input)}`))).catch(
          (err: Error) => {
            skipped.push(`${kind}/${basename(input)} (${err.message.split('\n')[0].slice(0, 80)})`);
            return undefined;
          },
        );
        if (measured) {
          all.push(measured);
          console.log(progressLine(measured));
          await writeFile(join(ctx.resultsDir, 'quality.json'), JSON.stringify(all.map(toResult), null, 2));
        }
        referencePngs.delete(input);
        await rm(dir, { recursive: true, force: true });
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await writeFile(join(ctx.resultsDir, 'quality.json'), JSON.stringify(all.map(toResult), null, 2));
  await writeFile(join(ctx.resultsDir, 'quality-skipped.json'), JSON.stringify(skipped));
  const markdown = await report(all, ctx, load, skipped);
  if (!only && !files) await publish(all, ctx, skipped, load);
  return markdown;
}

function progressLine(m: Measured): string {
  const list = (metric: Metric) => ratios(m, metric).map((r) => `${r.peer} ${r.ratio.toFixed(3)}${r.bound ? ` (${r.bound})` : ''}`).join(', ');
  return `quality: ${m.kind} ${m.file}: SSIM ${m.ours.ssim.toFixed(4)}: ${list('ssim')} · SSIMULACRA2 ${m.ours.score?.toFixed(2) ?? '—'}: ${list('score')}`;
}

/**
 * BENCH_QUALITY_MAX_MP: leave out images over this many megapixels (every peer setting is a full
 * encode and a full-resolution SSIM, minutes per file on a loaded 2-core machine). Documents are never left out.
 */
async function tooLarge(input: string): Promise<boolean> {
  const max = Number(process.env.BENCH_QUALITY_MAX_MP ?? Infinity);
  if (!Number.isFinite(max) || /\.(docx|pptx)$/i.test(input)) return false;
  const { width = 0, height = 0 } = await sharp(input, { limitInputPixels: false }).metadata().catch(() => ({ width: 0, height: 0 }));
  return width * height > max * 1e6;
}

async function measureImage(kind: string, k: Kind, input: string, dir: string, ours: Ours, saved?: Record<string, Point[]>): Promise<Measured | undefined> {
  const judge = await k.judge(input, dir);
  const scores = await judge.score(ours.path);
  if (scores === undefined) return undefined;
  const peers: Record<string, Point[]> = { ...saved };
  for (const [name, peer] of Object.entries(saved ? {} : k.peers)) {
    const peerDir = await mkdtemp(join(dir, 'peer-'));
    const points = await peer(input, peerDir, judge).catch(() => []);
    if (points.length) peers[name] = points;
  }
  return { kind, file: basename(input), bytesIn: (await stat(input)).size, ours: { setting: 'ours', bytes: (await stat(ours.path)).size, ...scores, ms: ours.ms, reported: ours.reported }, peers };
}

const pct = (v: number) => `${v.toFixed(1)} %`;
const fmtRatio = (r: Ratio | undefined) => (r ? `${r.ratio.toFixed(3)}${r.bound === 'beyond' ? ' ≥' : r.bound === 'below' ? ' ≤' : ''}` : '—');

/** The per-kind table docs/benchmarks.md shows. */
function summaryTable(all: Measured[]): string {
  const rows = [...new Set(all.map((m) => m.kind))].map((kind) => {
    const mine = all.filter((m) => m.kind === kind);
    const strong = mine.map((m) => strongest(m)).filter((r): r is Ratio => r !== undefined);
    const worse = mine.filter((m) => (strongest(m)?.ratio ?? 0) > WORSE);
    const unmatched = mine.filter((m) => strongest(m) === undefined);
    const peerSavings = mine.flatMap((m) => {
      const s = strongest(m);
      return s ? [100 * (1 - m.ours.bytes / s.ratio / m.bytesIn)] : [];
    });
    return [
      kind,
      mine.length,
      pct(median(mine.map((m) => 100 * (1 - m.ours.bytes / m.bytesIn)))),
      median(mine.map((m) => m.ours.ssim)).toFixed(4),
      `${(median(mine.map((m) => m.ours.ms)) / 1000).toFixed(2)} s`,
      peerSavings.length ? pct(median(peerSavings)) : '—',
      strong.length ? median(strong.map((r) => r.ratio)).toFixed(3) : '—',
      `${worse.length}${worse.length ? ` (${worse.map((m) => m.file).join(', ')})` : ''}`,
      unmatched.map((m) => m.file).join(', ') || '—',
    ];
  });
  return markdownTable(
    ['kind', 'files', 'our savings (median)', 'our SSIM (median)', 'our time (median)', 'strongest peer\'s savings at our SSIM (median)', 'ours / strongest peer at equal SSIM (median)', `files > ${Math.round((WORSE - 1) * 100)} % bigger`, 'no peer reached our SSIM'],
    rows,
  );
}

function detailTable(all: Measured[], kind: string): string {
  const mine = all.filter((m) => m.kind === kind);
  const peers = [...new Set(mine.flatMap((m) => Object.keys(m.peers)))];
  return markdownTable(
    ['file', 'bytes in', 'ours bytes', 'ours SSIM', 'ours time', ...peers.map((p) => `ours / ${p}`)],
    mine.map((m) => {
      const r = ratios(m);
      return [m.file, m.bytesIn, m.ours.bytes, m.ours.ssim.toFixed(4), `${(m.ours.ms / 1000).toFixed(2)} s`, ...peers.map((p) => fmtRatio(r.find((x) => x.peer === p)))];
    }),
  );
}

function peerPoints(all: Measured[], kind: string): string {
  return all
    .filter((m) => m.kind === kind)
    .map((m) => `- ${m.file}: ${Object.entries(m.peers).map(([p, pts]) => `${p}: ${pts.map((x) => `${x.setting} ${x.bytes} B / ${x.ssim.toFixed(4)} / ${x.score?.toFixed(2) ?? '—'} / ${x.ms.toFixed(0)} ms`).join('; ')}`).join(' · ')}`)
    .join('\n');
}

async function charts(all: Measured[], dir: string, prefix: string): Promise<string[]> {
  const names: string[] = [];
  for (const kind of [...new Set(all.map((m) => m.kind))]) {
    const mine = all.filter((m) => m.kind === kind);
    const rows: ChartRow[] = mine.flatMap((m) => [
      { file: m.file, tool: 'compressd', bytesIn: m.bytesIn, bytesOut: m.ours.bytes, ssim: m.ours.ssim, score: m.ours.score, ms: m.ours.ms },
      ...Object.entries(m.peers).flatMap(([tool, pts]) => pts.map((p) => ({ file: m.file, tool, bytesIn: m.bytesIn, bytesOut: p.bytes, ssim: p.ssim, score: p.score, ms: p.ms }))),
    ]);
    const curve = `${prefix}${kind}-rate-quality.png`;
    await savingsVsSsimChart(join(dir, curve), `${kind}: savings vs SSIM, every peer setting (dashed: 0.98)`, rows, 0.98);
    const bars = `${prefix}${kind}-ratio.png`;
    await ratioChart(join(dir, bars), `${kind}: our bytes / peer bytes at our SSIM (1 = equal; right of 1.05 = we are bigger)`, mine.flatMap((m) => ratios(m).map((r) => ({ file: m.file, tool: r.peer, value: r.ratio }))), [1, WORSE]);
    names.push(curve, bars, ...(await scoreCharts(mine, rows, dir, `${prefix}${kind}`)));
  }
  return names;
}

/** The SSIMULACRA2 twins of the two charts above (none for a kind without scores). */
async function scoreCharts(mine: Measured[], rows: ChartRow[], dir: string, stem: string): Promise<string[]> {
  const bars = mine.flatMap((m) => ratios(m, 'score').map((r) => ({ file: m.file, tool: r.peer, value: r.ratio })));
  if (bars.length === 0) return [];
  const kind = mine[0].kind;
  const curve = `${stem}-rate-ssimulacra2.png`;
  await savingsVsScoreChart(join(dir, curve), `${kind}: savings vs SSIMULACRA2, every peer setting (dashed: 90)`, rows, 90);
  const ratio = `${stem}-ratio-ssimulacra2.png`;
  await ratioChart(join(dir, ratio), `${kind}: our bytes / peer bytes at our SSIMULACRA2 (right of 1.05 = we are bigger)`, bars, [1, WORSE]);
  return [curve, ratio];
}

const SCORE_NOTE =
  'SSIMULACRA2 against the same reference decode (0–100; 90: hard to tell apart at 1:1, 70: high quality, 50: medium); ' +
  'animations: the mean over frames; Camera RAW: both pictures binned 2×2 in RGB; Office: per picture at the size our output keeps, a document\'s score the mean over its pictures. ' +
  'Each peer\'s bytes are interpolated at our score (log bytes against log(100 − score) between its two settings around it).';

const skippedNote = (skipped: string[]): string =>
  skipped.length ? `Left out (over BENCH_QUALITY_MAX_MP=${process.env.BENCH_QUALITY_MAX_MP ?? '∞'} MP, or no reference decode): ${skipped.join(', ')}.` : '';

async function report(all: Measured[], ctx: BenchContext, load: number, skipped: string[]): Promise<string> {
  const images = await charts(all, ctx.resultsDir, 'quality-');
  const kinds = [...new Set(all.map((m) => m.kind))];
  return [
    '## Rate–quality at equal SSIM',
    '',
    `Ours: median of ${ctx.runs} runs (load average at the start ${load.toFixed(1)} on ${availableParallelism()} cores). Peers: one run per setting. ` +
      'Ratio = our bytes / the peer\'s bytes interpolated at our SSIM (≥: the peer never reached our SSIM, its size there is larger than the one used; ≤: our SSIM is below every setting of the peer).',
    '',
    summaryTable(all),
    '',
    skippedNote(skipped),
    '',
    '## Rate–quality at equal SSIMULACRA2',
    '',
    SCORE_NOTE,
    '',
    scoreSummaryTable(all, WORSE),
    '',
    scorePeerTable(all),
    '',
    unscoredNote(all, MAX_SCORED_PIXELS),
    '',
    ...kinds.flatMap((kind) => [
      `### ${kind}`,
      '',
      detailTable(all, kind),
      '',
      'At equal SSIMULACRA2:',
      '',
      scoreDetailTable(all, kind),
      '',
      '<details><summary>every peer setting (bytes / SSIM / SSIMULACRA2 / time)</summary>',
      '',
      peerPoints(all, kind),
      '',
      '</details>',
      '',
    ]),
    images.map((f) => `![${f}](${f})`).join(' '),
  ].join('\n');
}

/** docs/benchmarks.md's "How well it compresses" table and charts (docs/bench/), between its markers. */
async function publish(all: Measured[], ctx: BenchContext, skipped: string[], load: number): Promise<void> {
  const root = new URL('../../', import.meta.url).pathname;
  const docs = join(root, 'docs', 'bench');
  await mkdir(docs, { recursive: true });
  const images = await charts(all, docs, '');
  const pagePath = join(root, 'docs', 'benchmarks.md');
  const page = await readFile(pagePath, 'utf8');
  const start = '<!-- bench:quality -->';
  const end = '<!-- /bench:quality -->';
  const from = page.indexOf(start);
  const to = page.indexOf(end);
  if (from < 0 || to < from) return;
  const body = [
    start,
    `Measured by \`npm run bench quality\` on ${new Date().toISOString().slice(0, 10)} (${all.length} files: the shared corpus and made files; ${ctx.runs} run(s), load average ${load.toFixed(1)} on ${availableParallelism()} cores at the start; sizes and SSIM do not depend on it, times do).`,
    '',
    summaryTable(all),
    '',
    'At equal SSIMULACRA2 (see above; ratios are ours / the peer at our score, a peer that never reached it is not compared):',
    '',
    scoreSummaryTable(all, WORSE),
    '',
    scorePeerTable(all),
    '',
    ...[skippedNote(skipped), unscoredNote(all, MAX_SCORED_PIXELS)].filter(Boolean).flatMap((note) => [note, '']),
    ...images.map((f) => `![${f}](bench/${f})`),
    end,
  ].join('\n');
  await writeFile(pagePath, page.slice(0, from) + body + page.slice(to + end.length));
}
