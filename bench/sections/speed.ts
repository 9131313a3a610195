// Speed against single-shot peers (issue 21) and against each file's physical limit (issue 40):
// per kind, on files of at least 1 MP (where per-job overhead does not dominate; PDF and Office:
// at least 1 MB), the median of (our time / the fastest peer's time in the same run), of (our
// time / the limit: the fastest decoder plus one encode with our setting, bench/limit.ts) and
// the worst file; where our time goes, phase by phase (workers/shared/profile.ts); then jobs per
// minute when a mixed batch goes through the service with two worker threads.
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import sharp from 'sharp';
import { CompressorPool } from '../../src/jobs/pool.ts';
import type { Compress } from '../../workers/contract.ts';
import { compress as gif } from '../../workers/gif.ts';
import { compress as jpg } from '../../workers/jpg.ts';
import { compress as office } from '../../workers/office.ts';
import { compress as pdf } from '../../workers/pdf.ts';
import { compress as png } from '../../workers/png.ts';
import { compress as universal } from '../../workers/universal.ts';
import { profiled, type Phase, type Profile } from '../../workers/shared/profile.ts';
import { generatedInputs, pathologicalDocuments } from '../generated.ts';
import { type Limit, physicalLimit } from '../limit.ts';
import { type BenchContext, exec, isRaw, markdownTable, median, timed } from '../lib.ts';
import { startServer } from './api.ts';
import { sharpBruteForce } from './images.ts';
import { reference as officeReference } from './office.ts';

type Tool = (input: string, dir: string) => Promise<unknown>;
type Ours = (input: string, dir: string) => Promise<Profile>;

const MAGICK = '/usr/bin/convert';
const MIN_PIXELS = 1_000_000;
const MIN_BYTES = 1_000_000;

const ours = (c: Compress): Ours => async (input, dir) =>
  (await profiled(() => c({ inputPath: input, format: input.split('.').pop() ?? '', options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} }))).profile;
const sh = (script: string): Tool => (input, dir) => exec('sh', ['-c', script, 'sh', input, dir], { maxBuffer: 64 << 20 });

interface Kind {
  name: string;
  jobType: string;
  ours: Ours;
  peers: Record<string, Tool>;
  /** Peers that apply to this file (RAW and HEIC have their own developers). */
  peersFor?: (input: string) => string[];
}


const KINDS: Kind[] = [
  { name: 'JPG', jobType: 'image.jpg-compress', ours: ours(jpg), peers: { 'jpegoptim --max=80': sh('cp "$1" "$2/o.jpg" && jpegoptim -q --max=80 "$2/o.jpg"') } },
  // The comparison issue 21 names for JPG: the same job (the lowest quality reaching the perceived
  // target) done by a plain search. A single-shot jpegoptim chooses no quality (it only caps it at 80).
  { name: 'JPG vs SSIMULACRA2 search', jobType: 'image.jpg-compress', ours: ours(jpg), peers: { 'mozjpeg SSIMULACRA2≥80 bisection': sharpBruteForce } },
  {
    name: 'PNG',
    jobType: 'image.png-compress',
    ours: ours(png),
    peers: { 'pngquant --quality=65-80 --speed 3 + optipng -o2': sh('pngquant --quality=65-80 --speed 3 --force --output "$2/o.png" "$1" || cp "$1" "$2/o.png"; optipng -quiet -o2 "$2/o.png"') },
  },
  { name: 'GIF', jobType: 'image.gif-compress', ours: ours(gif), peers: { 'gifsicle -O3 --lossy=80': sh('gifsicle -O3 --lossy=80 "$1" -o "$2/o.gif"') } },
  {
    name: 'universal',
    jobType: 'image.universal-compress',
    ours: ours(universal),
    peers: {
      'vips q80': sh('vips copy "$1" "$2/o.jpg[Q=80]"'),
      'ImageMagick q80': sh(`${MAGICK} "$1[0]" -auto-orient -quality 80 "$2/o.jpg"`),
      'dcraw | cjpeg q80': sh('dcraw -c -w "$1" | cjpeg -quality 80 > "$2/o.jpg"'),
      'heif-convert q80': sh('heif-convert -q 80 "$1" "$2/o.jpg"'),
    },
    peersFor: (input) => (isRaw(input) ? ['dcraw | cjpeg q80'] : /\.hei[cf]$/i.test(input) ? ['heif-convert q80'] : ['vips q80', 'ImageMagick q80']),
  },
  { name: 'PDF', jobType: 'document.pdf-compress', ours: ours(pdf), peers: { 'gs /ebook': sh('gs -q -dNOPAUSE -dBATCH -dSAFER -sDEVICE=pdfwrite -dPDFSETTINGS=/ebook -sOutputFile="$2/o.pdf" "$1"') } },
  { name: 'Office', jobType: 'document.office-compress', ours: ours(office), peers: { 'unzip + jpegoptim/pngquant + zip -9': officeReference } },
];

const DIRS: Record<string, string[]> = {
  JPG: ['jpg'],
  'JPG vs SSIMULACRA2 search': ['jpg'],
  PNG: ['png'],
  GIF: ['gif'],
  universal: ['webp', 'avif', 'heic', 'tiff', 'bmp', 'psd', 'raw'],
  PDF: ['pdf'],
  Office: ['docx', 'pptx'],
};

/** Large enough that per-job overhead does not dominate: pixels (all frames) for images, bytes for documents. */
async function bigEnough(kind: string, input: string): Promise<boolean> {
  if (kind === 'PDF' || kind === 'Office') return (await stat(input)).size >= MIN_BYTES;
  if (kind === 'universal' && isRaw(input)) return (await stat(input)).size >= MIN_BYTES;
  try {
    // Every frame counts for GIF (all are recompressed); the universal compressor keeps the first.
    const m = await sharp(input, { animated: true, limitInputPixels: false }).metadata();
    const frames = kind === 'GIF' ? (m.pages ?? 1) : 1;
    return (m.width ?? 0) * (m.pageHeight ?? m.height ?? 0) * frames >= MIN_PIXELS;
  } catch {
    // Formats sharp cannot read here (BMP, PSD, HEIC's HEVC): ImageMagick reads their headers. Only
    // the first image counts: the universal compressor keeps a PSD's composite, a file's first page.
    const seen = await exec('identify', ['-ping', '-format', '%w %h\n', input]).catch(() => undefined);
    const [w, h] = (seen?.stdout.split('\n')[0] ?? '').split(' ').map(Number);
    return w > 0 && h > 0 ? w * h >= MIN_PIXELS : (await stat(input)).size >= MIN_BYTES;
  }
}

interface Measured {
  kind: string;
  file: string;
  oursMs: number;
  peer: string;
  peerMs: number;
  oursBytes: number;
  inBytes: number;
  /** The profile of our median run. */
  profile: Profile;
  limit?: Limit;
}

async function largestOutput(dir: string): Promise<number> {
  let size = 0;
  for (const f of await readdir(dir, { recursive: true })) {
    const s = await stat(join(dir, f)).catch(() => undefined);
    if (s?.isFile()) size = Math.max(size, s.size);
  }
  return size;
}

/** Our runs of one file: the median time, with that run's profile and output directory. */
async function runOurs(kind: Kind, input: string, runs: number, work: string): Promise<{ ms: number; profile: Profile; dir: string }> {
  const all: { ms: number; profile: Profile; dir: string }[] = [];
  for (let i = 0; i < runs; i++) {
    const dir = await mkdtemp(join(work, 'ours-'));
    const t = performance.now();
    const profile = await kind.ours(input, dir);
    all.push({ ms: performance.now() - t, profile, dir });
  }
  return [...all].sort((a, b) => a.ms - b.ms)[all.length >> 1];
}

/**
 * What handing a job to the worker pool costs on top of the work (thread messages, the job's
 * progress port; a warm thread): the same file through a one-thread pool and in this process.
 */
async function dispatchMs(kind: Kind, input: string, runs: number, work: string, inProcessMs: number): Promise<number> {
  const pool = new CompressorPool(1);
  try {
    const req = async () => {
      const outDir = await mkdtemp(join(work, 'pool-'));
      await pool.run({ jobId: 'bench', jobType: kind.jobType, format: input.split('.').pop() ?? '', options: {}, inputPath: input, outDir }, new AbortController().signal, () => {});
    };
    await req();
    return (await timed(runs, req)).ms - inProcessMs;
  } finally {
    await pool.close();
  }
}

async function inputsOf(ctx: BenchContext, kind: Kind): Promise<string[]> {
  const generated = await generatedInputs();
  const inputs: string[] = [];
  for (const d of DIRS[kind.name]) for (const f of (await readdir(join(ctx.corpus, d))).sort()) inputs.push(join(ctx.corpus, d, f));
  if (kind.name === 'PNG') inputs.push(generated.noise, generated.photo);
  if (kind.name === 'GIF') inputs.push(generated.screenGif, generated.photoGif, generated.spriteGif);
  if (kind.name === 'PDF' || kind.name === 'Office') inputs.push(...(await pathologicalDocuments())[kind.name === 'PDF' ? 'pdf' : 'office']);
  const measured: string[] = [];
  for (const input of inputs) if (await bigEnough(kind.name, input)) measured.push(input);
  return measured;
}

/** A document's pictures have no decoder of their own to run: its limit is its own decodes and final encodes. */
function documentLimit(profile: Profile): Limit {
  const decodeMs = profile.ms.decode ?? 0;
  const encodeMs = profile.ms.encode ?? 0;
  return { decoder: "the job's own", decodeMs, encodeMs, ms: decodeMs + encodeMs, encode: "the job's own" };
}

async function perFile(ctx: BenchContext, work: string): Promise<{ rows: Measured[]; dispatch: Map<string, number> }> {
  const only = process.env.BENCH_SPEED_KINDS?.split(',');
  const rows: Measured[] = [];
  const dispatch = new Map<string, number>();
  for (const kind of KINDS.filter((k) => !only || only.includes(k.name))) {
    const measured = await inputsOf(ctx, kind);
    // One untimed run first, so that no file's time includes loading the codecs (WASM modules included).
    if (measured.length > 0) await kind.ours(measured[0], await mkdtemp(join(work, 'warm-'))).catch(() => undefined);
    for (const input of measured) {
      const mine = await runOurs(kind, input, ctx.runs, work).catch(() => undefined);
      if (!mine) continue;
      let best: { peer: string; ms: number } | undefined;
      for (const name of kind.peersFor?.(input) ?? Object.keys(kind.peers)) {
        const run = await timed(ctx.runs, async () => {
          const dir = await mkdtemp(join(work, 'peer-'));
          await kind.peers[name](input, dir);
          return dir;
        }).catch(() => undefined);
        if (run && (!best || run.ms < best.ms)) best = { peer: name, ms: run.ms };
      }
      if (!best) continue;
      const document = kind.name === 'PDF' || kind.name === 'Office';
      const limit = document ? documentLimit(mine.profile) : await physicalLimit(input, mine.profile, ctx.runs, work).catch(() => undefined);
      if (!dispatch.has(kind.name)) dispatch.set(kind.name, await dispatchMs(kind, input, ctx.runs, work, mine.ms).catch(() => NaN));
      rows.push({ kind: kind.name, file: basename(input), oursMs: mine.ms, peer: best.peer, peerMs: best.ms, oursBytes: await largestOutput(mine.dir), inBytes: (await stat(input)).size, profile: mine.profile, limit });
      await rm(work, { recursive: true, force: true }).then(() => exec('mkdir', ['-p', work]));
    }
  }
  return { rows, dispatch };
}

/** A mixed batch submitted at once to a service with two worker threads: jobs per minute, and how long the quick jobs waited. */
async function mixedBatch(ctx: BenchContext): Promise<{ jobs: number; seconds: number; perMinute: number; quickMedianS: number; slowest: string; served: { file: string; s: number }[] }> {
  const generated = await generatedInputs();
  const pick = (d: string, f: string) => join(ctx.corpus, d, f);
  const batch = [
    generated.noise,
    pick('raw', 'derived-pixel-IMG_20180725_163423.dng'),
    pick('jpg', 'canon-dslr.jpg'),
    pick('png', 'baiona_alpha.png'),
    pick('heic', 'IMG_2682.heic'),
    pick('gif', 'exifr-readme-animated.gif'),
    pick('jpg', 'craft-beer.jpg'),
    pick('pdf', 'ocrmypdf-multipage.pdf'),
    pick('png', 'linn-scan.png'),
    pick('docx', 'derived-photo-report.docx'),
    pick('jpg', 'jpeg420exif.jpg'),
    pick('gif', 'lena.gif'),
  ];
  const { child, base, key, dataDir } = await startServer(2);
  const headers = { 'x-service-api-key': key };
  try {
    const t0 = performance.now();
    const ids: { id: string; file: string; submitted: number }[] = [];
    for (const file of batch) {
      const form = new FormData();
      form.set('file', new Blob([readFileSync(file)]), basename(file));
      const res = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
      const body = (await res.json()) as { id?: string; error?: string };
      if (!body.id) throw new Error(`submit ${basename(file)}: ${res.status} ${body.error}`);
      ids.push({ id: body.id, file: basename(file), submitted: performance.now() });
    }
    const done = new Map<string, number>();
    // Each job's own time in a worker (completedAt − startedAt): with both cores busy, the batch's rate is their sum's.
    const servedMs = new Map<string, number>();
    while (done.size < ids.length) {
      await new Promise((r) => setTimeout(r, 100));
      for (const j of ids.filter((x) => !done.has(x.id))) {
        const job = (await (await fetch(`${base}/compress/job/${j.id}`, { headers })).json()) as { status: string; startedAt?: string; completedAt?: string };
        if (job.status === 'Queued' || job.status === 'Running') continue;
        done.set(j.id, performance.now() - j.submitted);
        if (job.startedAt && job.completedAt) servedMs.set(j.id, Date.parse(job.completedAt) - Date.parse(job.startedAt));
      }
    }
    const seconds = (performance.now() - t0) / 1000;
    const latencies = ids.map((j) => ({ file: j.file, s: done.get(j.id)! / 1000 }));
    const sorted = [...latencies].sort((a, b) => a.s - b.s);
    const quick = sorted.slice(0, Math.ceil(sorted.length / 2)).map((l) => l.s);
    const last = sorted[sorted.length - 1];
    const served = ids.map((j) => ({ file: j.file, s: (servedMs.get(j.id) ?? Number.NaN) / 1000 })).sort((a, b) => b.s - a.s);
    return { jobs: ids.length, seconds, perMinute: (ids.length / seconds) * 60, quickMedianS: median(quick), slowest: `${last.file} ${last.s.toFixed(1)} s`, served };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await rm(dataDir, { recursive: true, force: true });
  }
}

const PHASES: Phase[] = ['read', 'decode', 'normalise', 'analyse', 'search', 'score', 'encode', 'fit', 'write'];

/** Per kind: median and worst of a ratio over its files. */
function ratioSummary(rows: Measured[], ratio: (r: Measured) => number | undefined): Map<string, { median: number; worst: number; file: string } | undefined> {
  const out = new Map<string, { median: number; worst: number; file: string } | undefined>();
  for (const k of new Set(rows.map((r) => r.kind))) {
    const mine = rows.filter((r) => r.kind === k && ratio(r) !== undefined);
    if (mine.length === 0) {
      out.set(k, undefined);
      continue;
    }
    const worst = mine.reduce((a, b) => (ratio(b)! > ratio(a)! ? b : a));
    out.set(k, { median: median(mine.map((r) => ratio(r)!)), worst: ratio(worst)!, file: worst.file });
  }
  return out;
}

/** One row of the phase profile: each phase's share of our time (search without its scoring: its probes' encodes and decodes). */
function phaseRow(r: Measured): string[] {
  const ms = r.profile.ms;
  const cell = (v: number | undefined) => (v ? `${Math.round(v)}` : '');
  const probing = ms.search !== undefined ? ms.search - (ms.score ?? 0) : undefined;
  const counted = PHASES.filter((p) => p !== 'score').reduce((sum, p) => sum + (ms[p] ?? 0), 0);
  const values = PHASES.map((p) => (p === 'search' ? cell(probing) : cell(ms[p])));
  const probes = r.profile.probes ? `${r.profile.probes} (${(r.profile.probePixels / 1e6).toFixed(1)} MP)` : '';
  return [r.kind, r.file, `${Math.round(r.oursMs)}`, ...values, cell(Math.max(0, r.oursMs - counted)), probes];
}

function variantRow(r: Measured): string[] {
  const [ours, ...rest] = r.limit!.variants!;
  const vs = (v: { ms: number; bytes: number }) => `${Math.round(v.ms)} ms, ${v.bytes} B (${((v.bytes / ours.bytes - 1) * 100).toFixed(1)} %)`;
  return [r.kind, r.file, ((r.limit!.pixels ?? 0) / 1e6).toFixed(1), `${Math.round(ours.ms)} ms, ${ours.bytes} B`, ...rest.map(vs)];
}

export default async function speed(ctx: BenchContext): Promise<string> {
  const load = loadavg()[0];
  const work = await mkdtemp(join(tmpdir(), 'bench-speed-'));
  let measured: Awaited<ReturnType<typeof perFile>>;
  try {
    measured = await perFile(ctx, work);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const { rows, dispatch } = measured;
  const ratio = (r: Measured) => r.oursMs / r.peerMs;
  const toLimit = (r: Measured) => (r.limit ? r.oursMs / r.limit.ms : undefined);
  const byPeer = ratioSummary(rows, ratio);
  const byLimit = ratioSummary(rows, toLimit);
  const x = (v: number) => `×${v.toFixed(2)}`;
  const summary = [...byPeer.keys()].map((k) => {
    const p = byPeer.get(k)!;
    const l = byLimit.get(k);
    const d = dispatch.get(k);
    return [k, rows.filter((r) => r.kind === k).length, x(p.median), `${x(p.worst)} (${p.file})`, l ? x(l.median) : '–', l ? `${x(l.worst)} (${l.file})` : '–', d === undefined || Number.isNaN(d) ? '–' : `${Math.round(d)} ms`];
  });
  const batch = process.env.BENCH_SPEED_BATCH === '0' ? undefined : await mixedBatch(ctx);
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  return [
    '## Speed against single-shot peers and against the physical limit',
    '',
    `Medians of ${ctx.runs} runs (load average at the start: ${load.toFixed(2)} on ${availableParallelism()} cores). Files of at least 1 MP (PDF, Office and RAW: 1 MB); ÷ peer = our time / the fastest applicable peer's time in the same run; ÷ limit = our time / the file's physical limit: the fastest decoder on the machine as a process to raw pixels (vips, djpeg, ImageMagick, dcraw, and for HEIC and AVIF Debian's libheif in the helper program our jobs run) plus one encode of those pixels here with our encoder at the setting our job chose (GIF: one lossy LZW pass at its threshold; PNG: the job's own final oxipng; PDF and Office: the job's own decodes and final encodes of its pictures). Dispatch: the same first file through a one-thread worker pool, minus its time in-process. PNG includes two generated files: 2400×2400 RGBA noise and a 4000×3000 photo-like PNG (gradients + noise); GIF three generated animations: a 1280×720 screen recording (48 frames), a 640×400 photo-like pan (30 frames) and a 480×360 sprite loop (150 frames).`,
    '',
    markdownTable(['kind', 'files', 'median ÷ peer', 'worst ÷ peer', 'median ÷ limit', 'worst ÷ limit', 'dispatch'], summary),
    '',
    batch
      ? `Mixed batch through the service (2 worker threads, one account, ${batch.jobs} jobs of every kind submitted at once): ${batch.seconds.toFixed(1)} s, **${batch.perMinute.toFixed(1)} jobs/minute**; median finish time of the quicker half ${batch.quickMedianS.toFixed(1)} s; last: ${batch.slowest}. Each job's time in its worker (completedAt − startedAt, two running at once), longest first: ${batch.served.map((j) => `${j.file} ${j.s.toFixed(1)} s`).join(', ')}.`
      : '',
    '',
    '### Where our time goes (ms, our median run)',
    '',
    'decode: libvips decodes and normalises in one pipeline for JPG, PNG and GIF, so their `decode` holds both; search: its probes\' encodes and decodes; score: the perceptual metric within the search; encode: the output\'s encode (a GIF\'s is its search\'s last probe); fit: the size rule\'s calibrating encodes and further full-size encodes; other: the rest (allocations, metadata, progress, and the size rule\'s predictions on the proxy). A document\'s pictures run a few at a time, so its phases may add up to more than its time.',
    '',
    markdownTable(['kind', 'file', 'total', ...PHASES, 'other', 'JPEG probes'], rows.map(phaseRow)),
    '',
    '### The final encode: what trellis quantisation and the progressive scan search cost and save',
    '',
    'Each JPEG output\'s pixels (from the limit\'s decoder) encoded at the job\'s own setting, with parts of mozjpeg\'s work left out: time (ms) and bytes. Without trellis the pixels are closer to the original, so those bytes are not at equal quality.',
    '',
    markdownTable(['kind', 'file', 'MP', ...(rows.find((r) => r.limit?.variants)?.limit?.variants?.map((v) => v.name) ?? [])], rows.filter((r) => r.limit?.variants).map(variantRow)),
    '',
    markdownTable(
      ['kind', 'file', 'input B', 'ours B', 'ours', 'fastest peer', 'peer', '÷ peer', 'limit (decoder + encode)', '÷ limit'],
      rows.map((r) => [r.kind, r.file, r.inBytes, r.oursBytes, s(r.oursMs), r.peer, s(r.peerMs), x(ratio(r)), r.limit ? `${s(r.limit.ms)} (${r.limit.decoder} ${Math.round(r.limit.decodeMs)} ms + ${r.limit.encode} ${Math.round(r.limit.encodeMs)} ms)` : '–', r.limit ? x(toLimit(r)!) : '–']),
    ),
  ].join('\n');
}
