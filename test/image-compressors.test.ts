import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import sharp from 'sharp';
import type { JobOptions } from '../src/catalog/index.ts';
import type { Compress } from '../workers/contract.ts';
import { compress as gif } from '../workers/gif.ts';
import { answerAfter, begunAhead, belowClearlyFails, chooseJpeg, chooseJpegQuality, defaultSetting, encodeJpeg, encodeJpegAuto, finalJpeg, jpegOptions, probesOf, type JpegAutoOptions } from '../workers/image/encode.ts';
import { Bracket, MAX_QUALITY, MIN_QUALITY, secantProbe } from '../workers/image/quality-bracket.ts';
import { PERCEIVED_TARGET } from '../workers/image/perceived.ts';
import { atMostTwoColours, encodePng } from '../workers/image/png-encode.ts';
import { greyOf, openImage } from '../workers/image/door.ts';
import { tiffReader } from '../workers/image/exif-thumbnail.ts';
import { rowOrder } from '../workers/image/gif/compose.ts';
import { lzwDecode, lzwEncode } from '../workers/image/gif/lzw.ts';
import { parseGif } from '../workers/image/gif/parse.ts';
import { GifRecompressor } from '../workers/image/gif/recompress.ts';
import { ClassQualities, FULL_SEARCH, IMAGE_SEARCH, incompressible, oxipngFilters, type SearchBudget } from '../workers/image/budget.ts';
import { estimatedProgress, forwardProgress, onScale } from '../workers/shared/progress.ts';
import { profiled } from '../workers/shared/profile.ts';
import { ProgressOfThread } from '../src/jobs/thread-progress.ts';
import { progressThroughPool, valuesWithin } from './helpers/pool-progress.ts';
import { LANE_PIXELS, Lanes, PICTURE_LANES, SMALL_LANE_PIXELS } from '../workers/shared/lanes.ts';
import { DocumentCaps } from '../workers/shared/document-caps.ts';
import { peakBytes } from '../workers/shared/memory.ts';
import { proxyOf } from '../workers/image/proxy.ts';
import { applyResize, targetSize } from '../workers/image/resize.ts';
import { ssim } from '../workers/image/ssim.ts';
import { compress as jpg } from '../workers/jpg.ts';
import { compress as png } from '../workers/png.ts';
import { screenRecordingGif } from '../bench/generated.ts';
import { rejectsWithJobError } from './helpers/job-error.ts';
import { greyPictures, screenshotPng } from './helpers/made-files.ts';
import { perceived } from './helpers/perceived.ts';

const corpus = new URL('../../shared/corpus/', import.meta.url).pathname;
let work: string;
let n = 0;

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'image-test-'));
});
after(async () => {
  await rm(work, { recursive: true, force: true });
});

async function run(c: Compress, inputPath: string, options: JobOptions = {}) {
  const dir = join(work, String(n++));
  await import('node:fs/promises').then((fs) => fs.mkdir(dir));
  const phases: string[] = [];
  const result = await c({ inputPath, format: inputPath.split('.').pop() ?? '', options }, { dir }, { signal: new AbortController().signal, progress: (_p, phase) => phases.push(phase) });
  return { ...result, phases, inSize: (await stat(inputPath)).size, outSize: (await stat(result.path)).size };
}

async function pixels(path: string | Buffer) {
  const { data, info } = await sharp(path).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** The EXIF payload of a JPEG's APP1 segment, read from the bytes. */
function exifSegment(jpeg: Buffer): Buffer | undefined {
  let p = 2;
  while (p + 4 <= jpeg.length && jpeg[p] === 0xff) {
    const marker = jpeg[p + 1];
    const len = jpeg.readUInt16BE(p + 2);
    if (marker === 0xe1 && jpeg.toString('latin1', p + 4, p + 10) === 'Exif\0\0') return jpeg.subarray(p + 10, p + 2 + len);
    if (marker === 0xda) return undefined;
    p += 2 + len;
  }
  return undefined;
}

/** The JPEG without its COM segments. */
function withoutComments(jpeg: Buffer): Buffer {
  const parts: Buffer[] = [jpeg.subarray(0, 2)];
  let p = 2;
  while (jpeg[p] === 0xff && jpeg[p + 1] !== 0xda) {
    const end = p + 2 + jpeg.readUInt16BE(p + 2);
    if (jpeg[p + 1] !== 0xfe) parts.push(jpeg.subarray(p, end));
    p = end;
  }
  return Buffer.concat([...parts, jpeg.subarray(p)]);
}

/**
 * The lowest quality of plain mozjpeg (its default tables and 4:2:0) whose full-image SSIMULACRA2
 * reaches `target`, by bisection, and the bytes one quality step above it.
 */
async function fullSearch(input: Buffer, target: number): Promise<{ quality: number; nextBytes: number }> {
  const at = (q: number) => sharp(input).jpeg(jpegOptions(defaultSetting(q))).toBuffer();
  let lo = 30;
  let hi = 95;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if ((await perceived(input, await at(mid))) >= target) hi = mid;
    else lo = mid;
  }
  return { quality: hi, nextBytes: (await at(Math.min(95, hi + 1))).length };
}

/** Per-frame delays (centiseconds) from a GIF's graphic control extensions. */
function gifTiming(g: Buffer): { delays: number[]; loop: number | undefined } {
  const delays: number[] = [];
  let loop: number | undefined;
  for (let p = 0; p + 8 < g.length; p++) {
    if (g[p] === 0x21 && g[p + 1] === 0xf9 && g[p + 2] === 4) delays.push(g.readUInt16LE(p + 4));
    if (g[p] === 0x21 && g[p + 1] === 0xff && g.toString('latin1', p + 3, p + 14) === 'NETSCAPE2.0') loop = g.readUInt16LE(p + 16);
  }
  return { delays, loop };
}

/** Every frame as displayed (composited by libvips), stacked. */
async function shownFrames(gifBytes: Buffer | string) {
  const { data, info } = await sharp(gifBytes, { animated: true }).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/**
 * An animation as naive encoders write it: six full, opaque 256×256 frames of lena.gif's pixels
 * (one global palette, no transparency) with a dark square moving across, 0.1 s each, looping.
 */
async function unoptimisedAnimation(): Promise<Buffer> {
  const lena = parseGif(await readFile(`${corpus}gif/lena.gif`)).frames[0];
  const rows = rowOrder(256, lena.interlaced);
  const plain = new Uint8Array(256 * 256);
  for (let r = 0; r < 256; r++) plain.set(lena.indices.subarray(r * 256, r * 256 + 256), rows[r] * 256);
  const subBlocks = (d: Uint8Array) => {
    const out: number[] = [];
    for (let i = 0; i < d.length; i += 255) out.push(Math.min(255, d.length - i), ...d.subarray(i, i + 255));
    return Uint8Array.from([...out, 0]);
  };
  const loop = Uint8Array.of(0x21, 0xff, 11, ...Buffer.from('NETSCAPE2.0'), 3, 1, 0, 0, 0);
  const parts: Uint8Array[] = [Buffer.from('GIF89a'), Uint8Array.of(0, 1, 0, 1, 0xf7, 0, 0), lena.palette, loop];
  for (let k = 0; k < 6; k++) {
    const px = plain.slice();
    for (let y = 100; y < 124; y++) px.fill(0, y * 256 + 20 + k * 30, y * 256 + 44 + k * 30);
    const data = lzwEncode(px, 8, { rgb: lena.palette, transparent: -1 });
    parts.push(Uint8Array.of(0x21, 0xf9, 4, 4, 10, 0, 0, 0), Uint8Array.of(0x2c, 0, 0, 0, 0, 0, 1, 0, 1, 0, 8), subBlocks(data));
  }
  return Buffer.concat([...parts, Uint8Array.of(0x3b)]);
}

describe('resize targets', () => {
  it('applies presets, pixels and percentage to the longest edge and never upscales', () => {
    assert.deepEqual(targetSize(6000, 4000, { enabled: true, preset: '1080p' }), { width: 1920, height: 1280 });
    assert.deepEqual(targetSize(4000, 6000, { enabled: true, mode: 'pixels', value: 600, preset: 'custom' }), { width: 400, height: 600 });
    assert.deepEqual(targetSize(800, 600, { enabled: true, mode: 'percentage', value: 50 }), { width: 400, height: 300 });
    assert.equal(targetSize(800, 600, { enabled: true, preset: '4k' }), null);
    assert.equal(targetSize(800, 600, { enabled: false, preset: '720p' }), null);
    assert.equal(targetSize(800, 600, { enabled: true, preset: 'off' }), null);
  });
});

describe('ssim', () => {
  it('is 1 for identical images and falls with noise', async () => {
    const a = await pixels(`${corpus}png/density_plot.png`);
    assert.equal(ssim(a, a), 1);
    const noisy = Uint8Array.from(a.data, (v, i) => (i % 4 === 3 ? v : Math.max(0, Math.min(255, v + ((i * 7919) % 41) - 20))));
    const s = ssim(a, { ...a, data: noisy });
    assert.ok(s < 0.95 && s > 0, `ssim ${s}`);
  });
});

describe('JPEG form, chosen per picture by the perceived metric', () => {
  const rgb = async (input: Buffer | string) => {
    const { data, info } = await sharp(input).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height, channels: info.channels };
  };

  it('keeps full-resolution chroma for coloured text, and halves it on a photo', async () => {
    const lines = Array.from({ length: 16 }, (_, i) => `<text x="8" y="${24 + i * 24}" font-size="20" fill="#ff2010">Red on blue, line ${i}</text>`).join('');
    const text = await rgb(Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400"><rect width="400" height="400" fill="#1030c0"/>${lines}</svg>`));
    const photo = await rgb(await sharp(`${corpus}jpg/jpeg420exif.jpg`).resize(400).png().toBuffer());
    const forText = await chooseJpeg(text);
    assert.equal(forText.chroma, '4:4:4');
    assert.ok(forText.score >= PERCEIVED_TARGET, `${forText.score}`);
    // Among mozjpeg's forms (a small photo may take jpegli's 4:4:4 where its file is smaller: withJpegliOnItself).
    assert.equal((await chooseJpeg(photo, PERCEIVED_TARGET, 'full', { ...IMAGE_SEARCH, jpegli: false })).chroma, '4:2:0');
  });

  it('settles forms predicted close on the quarter proxy on the 1 MP one: a 3 MP photo leaves the default for a smaller form', async () => {
    // jpeg420exif.jpg, searched as the JPG job searches a JPEG kept on its own grid (mozjpeg's forms):
    // the quarter proxy put table 5 1.2 % under the default, within the switching margin, so the
    // default was kept; on the 1 MP proxy table 5 is 5.6 % smaller at its own answer.
    const p = await rgb(`${corpus}jpg/jpeg420exif.jpg`);
    const choice = await chooseJpeg(p, PERCEIVED_TARGET, 'full', { ...IMAGE_SEARCH, jpegli: false });
    assert.equal(choice.chroma, '4:2:0');
    assert.notEqual(choice.table, 3);
    assert.ok(choice.score >= PERCEIVED_TARGET, `${choice.score}`);
    const asDefault = await chooseJpegQuality(p, { judgedAt: 'full', search: FULL_SEARCH });
    const [chosen, plain] = await Promise.all([encodeJpeg(p, choice), encodeJpeg(p, defaultSetting(asDefault))]);
    assert.ok(chosen.length < plain.length * 0.97, `${choice.table} q${choice.quality}: ${chosen.length} B; default q${asDefault}: ${plain.length} B`);
  });

  it('takes a form predicted well behind the leader into the runoff: a grey text scan gets the smaller one', async () => {
    // A 0.94 MP grey scan, searched as the JPG job searches a JPEG kept on its own grid: the quarter
    // proxy put table 2 first and table 5 11.5 % behind it; at their own answers on the whole
    // picture table 5 is 11 % smaller, and both reach the target.
    const { scan } = await greyPictures(work);
    const p = greyOf(await rgb(scan));
    assert.ok(p, 'the scan is grey');
    const choice = await chooseJpeg(p, PERCEIVED_TARGET, 'full', { ...IMAGE_SEARCH, jpegli: false });
    assert.ok(choice.score >= PERCEIVED_TARGET, `${choice.score}`);
    const leader = { table: 2, chroma: '4:2:0' } as const;
    const leaderQuality = await chooseJpegQuality(p, { form: leader });
    const [chosen, led] = await Promise.all([encodeJpeg(p, choice), encodeJpeg(p, { quality: leaderQuality, ...leader })]);
    assert.ok(chosen.length < led.length * 0.95, `${choice.table} q${choice.quality}: ${chosen.length} B; table 2 q${leaderQuality}: ${led.length} B`);
  });

  it('reaches the target on pictures that are their own proxy, as the metric measures the encode', async () => {
    for (const file of ['tiff/lena.tif', 'webp/denali.webp']) {
      const p = await rgb(`${corpus}${file}`);
      const choice = await chooseJpeg(p);
      const encoded = await encodeJpeg(p, choice);
      const measured = await perceived(p, await rgb(encoded));
      assert.ok(measured >= PERCEIVED_TARGET, `${file}: ${measured}`);
      assert.ok(Math.abs(measured - choice.score) < 0.01, `${file}: reported ${choice.score}, measured ${measured}`);
    }
  });
});

describe('JPEG quality search', () => {
  // Fresh pixel buffers for every search: probes are memoised per buffer.
  const photo = async (file: string) => {
    const { data, info } = await sharp(`${corpus}${file}`).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height, channels: info.channels };
  };
  const unguided: SearchBudget = { ...FULL_SEARCH, probes: 1000 };

  it('a guided search (quarter-size proxy first) answers what the full search alone answers', async () => {
    for (const file of ['jpg/craft-beer.jpg', 'jpg/jpeg420exif.jpg', 'jpg/phone-IMG_20180725_163423.jpg']) {
      assert.equal(await chooseJpegQuality(await photo(file)), await chooseJpegQuality(await photo(file), { judgedAt: 'full', search: unguided }), file);
    }
  });

  it('a first probe at the guide\'s answer that passes is not confirmed below when the guide puts the quality below clearly under the aim', async () => {
    // jpeg420exif.jpg's quarter-proxy guide (answer 83), then its first 1 MP probe; aim 81.2, margin 0.5.
    const guide = { quality: 83, seen: [{ q: 80, s: 80.29 }, { q: 85, s: 84.24 }, { q: 81, s: 80.57 }, { q: 82, s: 80.92 }, { q: 83, s: 82.89 }] };
    const cases = [
      { first: 82.34, skips: true }, // the curve puts q82 at 80.31
      { first: 82.8, skips: false }, // at 80.80: within the margin, probed
      { first: 80.9, skips: false }, // the first probe failed
    ];
    for (const { first, skips } of cases) {
      const bracket = new Bracket(async () => first, 81.2, Infinity);
      await bracket.probe(83);
      assert.equal(belowClearlyFails(bracket, guide), skips, `first probe ${first}`);
    }
    // The whole search (nothing encoded ahead): one 1 MP probe, the unguided answer (see above).
    const pixels = await photo('jpg/jpeg420exif.jpg');
    const { result, profile } = await profiled(() => chooseJpegQuality(pixels, { judgedAt: 'full', search: FULL_SEARCH }));
    assert.equal(result, 83);
    const [quarter, full] = [probesOf(pixels, 16).proxy, probesOf(pixels).proxy].map((p) => p.width * p.height);
    assert.equal((profile.probePixels - profile.probes * quarter) / (full - quarter), 1);
  });

  it('a pool thread sees a spare core only while fewer jobs run than there are cores (the pool\'s shared count)', async () => {
    const running = new Int32Array(new SharedArrayBuffer(4));
    const module = new URL('../workers/shared/spare-core.ts', import.meta.url).href;
    const code = `const { parentPort } = require('node:worker_threads');
      import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(module)}); })
        .then(({ spareCore }) => parentPort.on('message', () => parentPort.postMessage(spareCore())));`;
    const thread = new Worker(code, { eval: true, workerData: { runningJobs: running.buffer } });
    const ask = () => new Promise<boolean>((resolve) => {
      thread.once('message', resolve);
      thread.postMessage('?');
    });
    try {
      const cores = availableParallelism();
      Atomics.store(running, 0, cores - 1);
      assert.equal(await ask(), true);
      Atomics.store(running, 0, cores);
      assert.equal(await ask(), false);
    } finally {
      await thread.terminate();
    }
  });

  it('a small picture whose table is not the default one searches it from the probe the form choice made, to the same answer', async () => {
    // Most probes: what the search took from the shared probe (BSG1.tiff took 16 from q80).
    for (const [file, most] of [['tiff/bali.tif', 16], ['tiff/BSG1.tiff', 14]] as const) {
      // Among mozjpeg's forms: jpegli's probes on pictures this small are counted in their own test (universal-compressor).
      const { result: choice, profile } = await profiled(async () => chooseJpeg(await photo(file), PERCEIVED_TARGET, 'full', { ...IMAGE_SEARCH, jpegli: false }));
      assert.notEqual(choice.table, 3, file);
      const { table, chroma } = choice;
      assert.equal(choice.quality, await chooseJpegQuality(await photo(file), { judgedAt: 'full', search: unguided, form: { table, chroma } }), file);
      assert.ok(profile.probes <= most, `${file}: ${profile.probes} probes`);
    }
  });

  it('halves the bracket where the score does not rise with quality, instead of creeping one quality a probe', async () => {
    // A grey scan of faint detail (searched as one component, as the job does) that scores 97-98 at every quality.
    const grey = greyOf(await photo('tiff/exifr-001.tif'));
    assert.ok(grey);
    const { result, profile } = await profiled(() => chooseJpeg(grey));
    assert.equal(result.quality, MIN_QUALITY);
    assert.ok(profile.probes <= 20, `${profile.probes} probes (32 when the secant crept)`);
  });

  it('goes to the end of the range where the score is flat, far from the aim, and every probe so far is on one side of it', async () => {
    const next = async (aim: number, probes: [number, number][]) => {
      const scores = new Map(probes);
      const bracket = new Bracket(async (q) => scores.get(q)!, aim, Infinity);
      for (const [q] of probes) await bracket.probe(q);
      return secantProbe(bracket);
    };
    const cases: { probes: [number, number][]; next: number; why: string }[] = [
      { probes: [[80, 100], [75, 100]], next: MIN_QUALITY, why: 'a flat graphic passing everywhere so far' },
      { probes: [[80, 51.5], [85, 51.0]], next: MAX_QUALITY - 1, why: 'flat and far under the aim everywhere so far' },
      { probes: [[80, 82.3], [75, 84.0]], next: 60, why: 'noisy near the aim: the bracket halved, at most MAX_JUMP from the last probe' },
      { probes: [[80, 84], [75, 82]], next: 71, why: 'rising: along the secant' },
      { probes: [[80, 100], [75, 100], [40, 70]], next: 42, why: 'both ends measured: along the secant' },
    ];
    for (const c of cases) assert.equal(await next(80, c.probes), c.next, c.why);
    // A flat-coloured graphic's whole search: 80 and 75, then the floor, which passes (9 probes when it was halved toward it).
    const boxes = await sharp({ create: { width: 640, height: 480, channels: 3, background: '#1f6f8b' } })
      .composite([{ input: { create: { width: 320, height: 240, channels: 3, background: '#f2c14e' } }, left: 64, top: 64 }])
      .raw()
      .toBuffer({ resolveWithObject: true });
    const flat = { data: boxes.data, width: boxes.info.width, height: boxes.info.height, channels: boxes.info.channels };
    const { result, profile } = await profiled(() => chooseJpegQuality(flat, { judgedAt: 'full', search: unguided }));
    assert.equal(result, MIN_QUALITY);
    assert.equal(profile.probes, 3);
  });

  it('predicts the answer a probe closes the search on, where its predicted outcome closes the bracket', async () => {
    const bracketOf = async (probes: [number, number][]) => {
      const scores = new Map(probes);
      const bracket = new Bracket(async (q) => scores.get(q)!, 81.2, Infinity);
      for (const [q] of probes) await bracket.probe(q);
      return bracket;
    };
    const cases: { probes: [number, number][]; q: number; answer: number | undefined; why: string }[] = [
      { probes: [[78, 80.2], [82, 82.53], [80, 80.98]], q: 81, answer: 81, why: 'predicted to pass, the one below failed: the probe is the answer' },
      { probes: [[55, 79.36], [58, 81.46]], q: 57, answer: 58, why: 'predicted to fail, the one above passed: that one is' },
      { probes: [[70, 75], [90, 88]], q: 80, answer: undefined, why: 'either outcome leaves the bracket open' },
      { probes: [[40, 79.2]], q: 94, answer: undefined, why: 'one point is no curve' },
      { probes: [[80, 70], [90, 75]], q: 94, answer: undefined, why: 'predicted to fail below a top end never probed (only assumed to pass)' },
    ];
    for (const c of cases) {
      const bracket = await bracketOf(c.probes);
      assert.equal(answerAfter(bracket, c.q, bracket.seen), c.answer, c.why);
    }
  });

  it('the final encode begun while the last probe decides is the answer\'s own file; begun for another setting, it is not taken', async () => {
    // As image.jpg-compress searches a JPEG on its own grid: mozjpeg's forms. jpeg420exif.jpg's last probe
    // (table 5, q81, between 80 failing and 82 passing) is predicted to pass, and does.
    const search = { ...IMAGE_SEARCH, jpegli: false, encodesAnswer: true };
    const pixels = await photo('jpg/jpeg420exif.jpg');
    const choice = await chooseJpeg(pixels, undefined, 'full', search);
    const { score: _, ...setting } = choice;
    assert.deepEqual(await begunAhead(pixels), setting);
    assert.ok((await finalJpeg(pixels, setting)).equals(await encodeJpeg(pixels, setting)));
    assert.equal(await begunAhead(pixels), undefined, 'taken once');
    // The same picture's final encode at another setting is that setting's own.
    const again = await photo('jpg/jpeg420exif.jpg');
    await chooseJpeg(again, undefined, 'full', search);
    const other = { ...setting, quality: setting.quality + 1 };
    assert.ok((await finalJpeg(again, other)).equals(await encodeJpeg(again, other)));
    // Nothing is begun without the caller's word that it encodes the answer, nor with work ahead of need held
    // back, nor where the answer's file is predicted clearly over the caller's size limit (its size rule would
    // encode a lower quality: 449,465 B here).
    for (const held of [{ ...search, encodesAnswer: false }, { ...search, ahead: false }, { ...search, answerWithin: 300_000 }]) {
      const fresh = await photo('jpg/jpeg420exif.jpg');
      await chooseJpeg(fresh, undefined, 'full', held);
      assert.equal(await begunAhead(fresh), undefined);
    }
    const within = await photo('jpg/jpeg420exif.jpg');
    await chooseJpeg(within, undefined, 'full', { ...search, answerWithin: 600_000 });
    assert.deepEqual(await begunAhead(within), setting);
  });

  it('work started ahead of need on a spare core leaves the answer as it is, the form included', async () => {
    for (const file of ['webp/denali.webp', 'jpg/craft-beer.jpg']) {
      assert.deepEqual(await chooseJpeg(await photo(file), undefined, 'full', IMAGE_SEARCH), await chooseJpeg(await photo(file), undefined, 'full', { ...IMAGE_SEARCH, ahead: false }), file);
    }
  });
});

describe('work budget', () => {
  it('recognises noise from a sample, and not a noisy photo or a graphic', async () => {
    const noise = { data: randomBytes(2048 * 1536 * 3), width: 2048, height: 1536, channels: 3 };
    assert.equal(await incompressible(proxyOf(noise)), true);
    for (const file of ['jpg/phone-IMG_20180725_163423.jpg', 'png/exifr-logo-black-highres.png']) {
      const { data, info } = await sharp(`${corpus}${file}`).raw().toBuffer({ resolveWithObject: true });
      assert.equal(await incompressible(proxyOf({ data, width: info.width, height: info.height, channels: info.channels })), false, file);
    }
  });

  it('gives oxipng every filter on ordinary images and one on huge ones', () => {
    assert.equal(oxipngFilters(2_000_000, 8, false), undefined);
    assert.equal(oxipngFilters(16_000_000, 8, false), undefined);
    assert.equal(oxipngFilters(40_000_000, 8, false)?.length, 1);
    assert.equal(oxipngFilters(40_000_000, 8, true)?.length, 1);
    assert.equal(oxipngFilters(1000, 1, true)?.length, 1);
  });
});

describe('document pictures in lanes', () => {
  const later = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('runs two pictures at once (four small ones), starts them in order, and gives results in order', async () => {
    for (const { pixels, lanesUsed } of [
      { pixels: SMALL_LANE_PIXELS, lanesUsed: 2 },
      { pixels: 48 * 48, lanesUsed: 4 },
    ]) {
      const started: number[] = [];
      let running = 0;
      let most = 0;
      const lanes = new Lanes(
        8,
        async (i) => {
          started.push(i);
          most = Math.max(most, ++running);
          await later(i % 2 ? 5 : 20);
          running--;
          return i * 10;
        },
        () => pixels,
        2,
      );
      const got: number[] = [];
      for (let i = 0; i < 8; i++) got.push(await lanes.take(i));
      assert.deepEqual(got, [0, 10, 20, 30, 40, 50, 60, 70]);
      assert.deepEqual(started, [0, 1, 2, 3, 4, 5, 6, 7]);
      assert.equal(most, lanesUsed, `pictures of ${pixels} pixels`);
    }
  });

  it("reserves a document's peak for the pictures its lanes can hold together", { skip: PICTURE_LANES === 1 && 'one core: one lane' }, () => {
    const MP = 1e6;
    const cases: { what: string; pictures: number[]; inFlight: number }[] = [
      { what: 'three photos within the bound, all in flight', pictures: [12.2 * MP, 11.9 * MP, 17.5 * MP], inFlight: 41.6 * MP },
      { what: 'more than PICTURE_LANES photos: the largest ones', pictures: [1 * MP, 9 * MP, 2 * MP, 8 * MP, 7 * MP].slice(0, PICTURE_LANES + 2), inFlight: [9, 8, 7, 2, 1].slice(0, PICTURE_LANES).reduce((a, b) => a + b, 0) * MP },
      { what: 'large scans: the pixel bound', pictures: [30 * MP, 30 * MP, 30 * MP], inFlight: Math.max(30 * MP, Math.min(LANE_PIXELS, PICTURE_LANES * 30 * MP)) },
      { what: 'one over the bound: alone', pictures: [100 * MP, 5 * MP], inFlight: 100 * MP },
      { what: 'many small pictures: twice the lanes of the largest', pictures: Array(50).fill(10_000), inFlight: Math.max(PICTURE_LANES * 10_000, Math.min(SMALL_LANE_PIXELS, 2 * PICTURE_LANES * 10_000)) },
    ];
    for (const { what, pictures, inFlight } of cases) {
      const caps = new DocumentCaps();
      pictures.forEach((p, i) => assert.ok(caps.admit(String(i), p), what));
      assert.equal(caps.peakBytes(), peakBytes(Math.round(inFlight)), what);
    }
  });

  it('runs a picture over the pixel bound alone, and passes a failure to its taker only', async () => {
    let running = 0;
    let withBig = 0;
    const pixels = [1, LANE_PIXELS, 1, 1];
    const lanes = new Lanes(
      4,
      async (i) => {
        running++;
        await later(5);
        if (pixels[i] === LANE_PIXELS) withBig = Math.max(withBig, running);
        running--;
        if (i === 2) throw new Error('broken picture');
        return i;
      },
      (i) => pixels[i],
      2,
    );
    assert.equal(await lanes.take(0), 0);
    assert.equal(await lanes.take(1), 1);
    await assert.rejects(lanes.take(2), /broken picture/);
    assert.equal(await lanes.take(3), 3);
    assert.equal(withBig, 1);
  });

  it('counts a picture whose work failed as done, so the searches waiting for it go on', async () => {
    const full = { probes: Infinity, proxyTiles: 64, fastEncode: false };
    const limited = { probes: 3, proxyTiles: 64, fastEncode: false };
    const classes = new ClassQualities([
      { similar: 'a', search: full },
      { similar: 'a', search: full },
      { similar: 'a', search: limited },
    ]);
    const broken = classes.run(0, async () => {
      throw new Error('unreadable part');
    });
    await assert.rejects(broken, /unreadable part/);
    await classes.run(1, async (picture) => picture.found({ quality: 72 }));
    const start = await classes.run(2, async (picture) => picture.search.start);
    assert.equal(start, 72);
  });

  it('starts every limited search from the same qualities whatever order the pictures finish in', async () => {
    const full = { probes: Infinity, proxyTiles: 64, fastEncode: false };
    const limited = { probes: 3, proxyTiles: 64, fastEncode: false };
    // Two classes: a, a, a(limited), b(limited, none of its class searched: the document's median), a(limited).
    const pictures = [
      { similar: 'a', search: full },
      { similar: 'a', search: full },
      { similar: 'a', search: limited },
      { similar: 'b', search: limited },
      { similar: 'a', search: limited },
    ];
    const found = [70, 80, 50, 40, 45];
    const startsWith = async (delays: number[]) => {
      const classes = new ClassQualities(pictures);
      const starts = await Promise.all(
        pictures.map((_, i) =>
          classes.run(i, async (picture) => {
            await later(delays[i]);
            picture.found({ quality: found[i], loss: i === 0 ? 0.004 : 0.002 });
            return [picture.search.start, picture.known.loss];
          }),
        ),
      );
      return starts;
    };
    const inOrder = await startsWith([1, 2, 3, 4, 5]);
    const reversed = await startsWith([25, 20, 15, 10, 5]);
    assert.deepEqual(inOrder, [[undefined, undefined], [undefined, undefined], [75, 0.004], [75, undefined], [75, 0.004]]);
    assert.deepEqual(reversed, inOrder);
  });
});

describe('LZW', () => {
  it('round-trips exactly at threshold 0', () => {
    const indices = Uint8Array.from({ length: 50_000 }, (_, i) => (i * i + (i >> 7)) % 13);
    const palette = { rgb: new Uint8Array(768), transparent: -1 };
    assert.deepEqual(lzwDecode(lzwEncode(indices, 4, palette), 4, indices.length), indices);
  });

  it('keeps a full code table to the end when asked (a deferred clear), and decodes the same', () => {
    // Enough varied strings to fill the 4096-code table well before the end.
    const indices = Uint8Array.from({ length: 200_000 }, (_, i) => ((i * 7919) >> 5) % 16 ^ (i % 3));
    const palette = { rgb: new Uint8Array(768), transparent: -1 };
    const cleared = lzwEncode(indices, 4, palette);
    const deferred = lzwEncode(indices, 4, palette, { deferClear: true });
    assert.equal(cleared.filled, true);
    assert.equal(deferred.filled, true);
    assert.notDeepEqual(deferred, cleared);
    assert.deepEqual(lzwDecode(deferred, 4, indices.length), indices);
  });

  it('reports the indices a lossy encoding decodes to, each near the wanted one', () => {
    const indices = Uint8Array.from({ length: 50_000 }, (_, i) => ((i >> 3) + ((i * 7) % 3)) % 16);
    const rgb = Uint8Array.from({ length: 48 }, (_, k) => (k % 3) * 40 + Math.floor(k / 3) * 8);
    const shows = new Uint8Array(indices.length);
    const data = lzwEncode(indices, 4, { rgb, transparent: -1 }, { threshold: 20, shows });
    assert.deepEqual(lzwDecode(data, 4, indices.length), shows);
    assert.ok(data.length < lzwEncode(indices, 4, { rgb, transparent: -1 }).length);
    let traded = 0;
    for (let i = 0; i < indices.length; i++) {
      if (shows[i] === indices[i]) continue;
      traded++;
      const d = [0, 1, 2].map((c) => rgb[shows[i] * 3 + c] - rgb[indices[i] * 3 + c]);
      // Within the threshold once the error diffused from the pixel before (at most 3/4 of it) is added.
      assert.ok((d[0] ** 2 * 3 + d[1] ** 2 * 4 + d[2] ** 2 * 2) / 9 <= (2 * 20) ** 2);
    }
    assert.ok(traded > 0);
  });
});

describe('image.jpg-compress', () => {
  it('reports progress through the quality search and the final encode, never backwards', async () => {
    // Before, a 12 MP photo sat at 55 % for the 2.4 s of its final encode (one mozjpeg call).
    const seen = await progressThroughPool('image.jpg-compress', `${corpus}jpg/phone-IMG_20180725_163423.jpg`);
    assert.ok(valuesWithin(seen, 30, 55, 'analyzing') >= 2, JSON.stringify(seen));
    assert.ok(valuesWithin(seen, 55, 90, 'encoding') >= 2, JSON.stringify(seen));
  });

  it('saves bytes on a camera JPEG, keeps EXIF byte for byte and stays visually close', async () => {
    const input = `${corpus}jpg/jpeg420exif.jpg`;
    const r = await run(jpg, input);
    assert.equal(r.format, 'jpg');
    assert.equal(r.contentType, 'image/jpeg');
    assert.deepEqual([r.width, r.height], [2048, 1536]);
    assert.ok(r.outSize < r.inSize * 0.8, `${r.outSize} vs ${r.inSize}`);
    const inExif = exifSegment(await readFile(input));
    const outExif = exifSegment(await readFile(r.path));
    assert.ok(inExif && outExif);
    // The EXIF block is rewritten by libexif, so compare what it says: camera and capture date.
    for (const text of ['Hewlett-Packard', 'PhotoSmart 715']) {
      assert.ok(inExif.includes(text) && outExif.includes(text), text);
    }
    assert.equal((await sharp(r.path).metadata()).exif?.includes('Exif'), true);
    const s1 = await perceived(input, r.path);
    // Searched on a 1 MP proxy of a 3 MP photo: the proxy's margin covers what it misses.
    assert.ok(s1 >= PERCEIVED_TARGET - 1, `SSIMULACRA2 ${s1}`);
    assert.ok(r.perceivedQuality !== undefined && Math.abs(r.perceivedQuality - s1) < 2, `reported ${r.perceivedQuality}, measured ${s1}`);
    assert.ok(r.phases.every((p) => ['decoding', 'analyzing', 'encoding', 'optimizing', 'finalizing'].includes(p)));
  });

  it("drops EXIF's embedded thumbnail and keeps the rest of EXIF", async () => {
    const input = `${corpus}jpg/phone-IMG_20180725_163423.jpg`;
    const r = await run(jpg, input);
    const [inExif, outExif] = [exifSegment(await readFile(input))!, exifSegment(await readFile(r.path))!];
    const thumbnail = (exif: Buffer) => exif.indexOf(Buffer.from([0xff, 0xd8, 0xff]), 6) >= 0;
    assert.ok(thumbnail(inExif), 'the phone wrote a thumbnail');
    assert.ok(!thumbnail(outExif), 'ours has none');
    assert.ok(outExif.length < inExif.length - 5000, `${inExif.length} → ${outExif.length} bytes of EXIF`);
    for (const text of ['Google', 'Pixel']) assert.ok(outExif.includes(text), text);
    // The block still reads: its IFD0 links to no IFD1 now, and sharp parses it.
    const reader = tiffReader(outExif)!;
    const ifd0 = reader.u32(4);
    assert.equal(reader.u32(ifd0 + 2 + reader.u16(ifd0) * 12), 0);
    assert.equal((await sharp(r.path).metadata()).orientation, (await sharp(input).metadata()).orientation);
  });

  it('keeps the EXIF orientation and reports the displayed size', async () => {
    const oriented = join(work, 'oriented.jpg');
    await sharp(`${corpus}jpg/jpeg420exif.jpg`).resize(800, 600).withMetadata({ orientation: 6 }).jpeg({ quality: 95 }).toFile(oriented);
    const r = await run(jpg, oriented);
    const meta = await sharp(r.path).metadata();
    assert.equal(meta.orientation, 6);
    assert.deepEqual([meta.width, meta.height], [800, 600]);
    assert.deepEqual([r.width, r.height], [600, 800]);
  });

  it('returns its own output unchanged when resubmitted, signed or not (no second generation loss)', async () => {
    const source = join(work, 'export.jpg');
    await sharp(`${corpus}jpg/jpeg420exif.jpg`).resize(800).jpeg({ quality: 95 }).toFile(source);
    const first = await run(jpg, source);
    const output = await readFile(first.path);
    assert.ok(output.includes('compressd/1'), 'signed with a COM segment');
    const second = await run(jpg, first.path);
    assert.deepEqual(await readFile(second.path), output);
    // What an earlier, unsigning version wrote (or ours with its comment stripped): same tables, no signature.
    const unsigned = join(work, 'unsigned.jpg');
    await writeFile(unsigned, withoutComments(output));
    const third = await run(jpg, unsigned);
    assert.deepEqual(await readFile(third.path), await readFile(unsigned));
  });

  it('recompresses maximum-quality exports of any encoder at least as small as plain mozjpeg searched to the same perceived quality', async () => {
    const photo = await sharp(`${corpus}jpg/jpeg420exif.jpg`).resize(640, 480).png().toBuffer();
    const exports: [string, Buffer][] = [
      ['libjpeg q100 (all-ones tables)', await sharp(photo).jpeg({ quality: 100 }).toBuffer()],
      ['mozjpeg q99', await sharp(photo).jpeg({ quality: 99, mozjpeg: true }).toBuffer()],
      ['mozjpeg q95, 4:4:4', await sharp(photo).jpeg({ quality: 95, mozjpeg: true, chromaSubsampling: '4:4:4' }).toBuffer()],
    ];
    for (const [name, bytes] of exports) {
      const input = join(work, `export-${n}.jpg`);
      await writeFile(input, bytes);
      const r = await run(jpg, input);
      const searched = await fullSearch(bytes, PERCEIVED_TARGET);
      const s = await perceived(input, r.path);
      assert.ok(s >= PERCEIVED_TARGET, `${name}: SSIMULACRA2 ${s}`);
      // 1 % for what we carry over (EXIF, ICC) and our signature.
      assert.ok(r.outSize <= searched.nextBytes * 1.01, `${name}: ${r.outSize} B, the search found q${searched.quality} (${searched.nextBytes} B one step up; input ${r.inSize} B)`);
      assert.ok(r.outSize < r.inSize * 0.85, `${name}: ${r.outSize} vs ${r.inSize}`);
    }
  });

  it('encodes the pixels it searched once, with the metadata the pipeline writes, byte for byte what a second decode through the pipeline gives', async () => {
    const small = sharp(`${corpus}jpg/jpeg420exif.jpg`).resize(480);
    const xmp = '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/></x:xmpmeta>';
    const iptc = Buffer.concat([Buffer.from('Photoshop 3.0\0' + '8BIM\x04\x04\0\0\0\0\0\x0c', 'latin1'), Buffer.from([0x1c, 2, 0x78, 0, 7]), Buffer.from('caption\0', 'latin1')]);
    const jfif300 = Buffer.from([0xff, 0xe0, 0, 16, ...Buffer.from('JFIF\0', 'latin1'), 1, 2, 1, 1, 44, 1, 44, 0, 0]);
    const app = (marker: number, payload: Buffer) => Buffer.concat([Buffer.from([0xff, marker, (payload.length + 2) >> 8, (payload.length + 2) & 255]), payload]);
    const spliced = (jpeg: Buffer, ...segments: Buffer[]) => Buffer.concat([jpeg.subarray(0, 2), ...segments, jpeg.subarray(2)]);
    const plain = await small.clone().jpeg({ quality: 95 }).toBuffer();
    const cases: [string, Buffer, JpegAutoOptions, JobOptions['resize']?][] = [
      ['EXIF with a thumbnail and a camera orientation', await small.clone().keepExif().withMetadata({ orientation: 6 }).jpeg({ quality: 95 }).toBuffer(), {}],
      ['no metadata at all', plain, {}],
      ["a camera's private segment and an MPF index", spliced(plain, app(0xe3, Buffer.alloc(1000, 7)), app(0xe2, Buffer.concat([Buffer.from('MPF\0', 'latin1'), Buffer.alloc(64)]))), {}],
      ['JFIF at 300 dpi, XMP and IPTC', spliced(await small.clone().withXmp(xmp).jpeg({ quality: 95 }).toBuffer(), jfif300, app(0xed, iptc)), {}],
      ['an sRGB profile kept', await small.clone().keepExif().withIccProfile('srgb').jpeg({ quality: 95 }).toBuffer(), {}],
      ['a profile converted into sRGB', await small.clone().keepExif().withIccProfile('p3').jpeg({ quality: 95 }).toBuffer(), { convertProfile: true }],
      ['a grey picture', await small.clone().keepExif().greyscale().jpeg({ quality: 95 }).toBuffer(), {}],
      ['CMYK without a profile', await readFile(`${corpus}jpg/baiona_cmyk.jpg`), {}],
      ['CMYK with its profile', await small.clone().keepExif().toColourspace('cmyk').withIccProfile('cmyk').jpeg({ quality: 95 }).toBuffer(), {}],
      ['resized', await small.clone().keepExif().jpeg({ quality: 95 }).toBuffer(), {}, { enabled: true, mode: 'pixels', preset: 'custom', value: 200 }],
    ];
    for (const [name, input, options, resize] of cases) {
      const open = async () => {
        const { image, facts } = await openImage(input, { kind: 'jpeg' });
        return applyResize(image, facts.width, facts.height, resize);
      };
      const twice = await encodeJpegAuto(await open(), { keepMetadata: true, ...options });
      const once = await encodeJpegAuto(await open(), { keepMetadata: true, ...options, metadataFrom: input });
      assert.ok(twice && once);
      assert.ok(once.data.equals(twice.data), `${name}: ${once.data.length} and ${twice.data.length} bytes`);
    }
  });

  it('turns a CMYK JPEG into sRGB and resizes by preset', async () => {
    const r = await run(jpg, `${corpus}jpg/baiona_cmyk.jpg`, { resize: { enabled: true, mode: 'pixels', preset: 'custom', value: 320 } });
    const meta = await sharp(r.path).metadata();
    assert.equal(meta.space, 'srgb');
    assert.deepEqual([meta.width, meta.height], [r.width, r.height]);
    assert.equal(Math.max(meta.width, meta.height), 320);
  });

  it('fails hostile files with clear codes', async () => {
    const cases: [string, string][] = [
      ['bad/truncated.jpg', 'image.truncated'],
      ['bad/actually-pdf.jpg', 'image.format_mismatch'],
      ['bad/empty.jpg', 'image.empty'],
    ];
    for (const [file, code] of cases) {
      await rejectsWithJobError(run(jpg, `${corpus}${file}`), code, file);
    }
  });
});

describe('image.png-compress', () => {
  it('lossy keeps real transparency, saves bytes and stays visually close', async () => {
    const input = `${corpus}png/exifr-logo-black-highres.png`;
    const r = await run(png, input);
    const alpha = await sharp(r.path).ensureAlpha().extractChannel(3).stats();
    assert.equal(alpha.channels[0].min, 0);
    assert.ok(r.outSize < r.inSize * 0.6);
    // 1.4 MP: its own proxy, so the search's score is the picture's.
    const s2 = await perceived(input, r.path);
    assert.ok(s2 >= PERCEIVED_TARGET, `SSIMULACRA2 ${s2}`);
    assert.equal(r.perceivedQuality?.toFixed(3), s2.toFixed(3));
  });

  it('gives the same palette whether or not the next palettes are quantised ahead on a spare core', async () => {
    for (const input of [`${corpus}png/exifr-logo-black-highres.png`, `${corpus}png/baiona_alpha.png`, await screenshotPng(join(work, 'ahead-screenshot.png'))]) {
      const [ahead, asked] = await Promise.all([true, false].map((ahead) => encodePng(sharp(input), 'lossy', { ahead })));
      assert.ok(ahead.score !== undefined, `${input}: a palette`);
      assert.equal(ahead.score, asked.score, input);
      assert.ok(ahead.data.equals(asked.data), input);
    }
  });

  it('counts two colours at most over every channel, alpha included', () => {
    const px = (channels: number, ...colours: number[][]) => ({ data: Uint8Array.from(colours.flat()), width: colours.length, height: 1, channels });
    const cases: [string, ReturnType<typeof px>, boolean][] = [
      ['one grey', px(1, [7], [7], [7]), true],
      ['two greys', px(1, [0], [255], [0], [255]), true],
      ['three greys', px(1, [0], [255], [128]), false],
      ['black and white RGB', px(3, [0, 0, 0], [255, 255, 255], [0, 0, 0]), true],
      ['a third colour late', px(3, [0, 0, 0], [255, 255, 255], [0, 0, 0], [255, 255, 254]), false],
      ['the same RGB at two alphas', px(4, [0, 0, 0, 255], [0, 0, 0, 0], [0, 0, 0, 255]), true],
      ['and a third alpha', px(4, [0, 0, 0, 255], [0, 0, 0, 0], [0, 0, 0, 128]), false],
    ];
    for (const [what, p, expected] of cases) assert.equal(atMostTwoColours(p), expected, what);
  });

  it('stores a two-colour picture losslessly without a palette search (no quality can take a colour away)', async () => {
    // An RGB bilevel scan: the lossless encode is a 1-bit palette already.
    const input = join(work, 'bilevel.png');
    const { data, info } = await sharp(`${corpus}png/linn-scan.png`).extract({ left: 0, top: 0, width: 1600, height: 1200 }).toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
    await sharp(data, { raw: info }).png({ compressionLevel: 1 }).toFile(input);
    const r = await run(png, input);
    assert.equal(r.perceivedQuality, undefined);
    assert.ok(r.outSize < r.inSize / 4, `${r.outSize} of ${r.inSize} B`);
    const [a, b] = await Promise.all([sharp(input).toColourspace('srgb').raw().toBuffer(), sharp(r.path).toColourspace('srgb').raw().toBuffer()]);
    assert.ok(a.equals(b), 'pixel-identical');
  });

  it('takes a palette at the lowest quality that passes, below 50 when it passes there', async () => {
    // baiona_colormapped.png: 86.1 at quality 30, 87.9 at 50, the lowest of the qualities tried before.
    const input = `${corpus}png/baiona_colormapped.png`;
    const r = await run(png, input);
    const shown = await perceived(input, r.path);
    assert.ok(shown >= PERCEIVED_TARGET && shown < 87, `SSIMULACRA2 ${shown}`);
    assert.equal(r.perceivedQuality?.toFixed(3), shown.toFixed(3));
    assert.ok(r.outSize < 36_000, `${r.outSize} B (37,722 at quality 50)`);
  });

  it("a run's progress reaches the pool never backwards and only when it changes", () => {
    const sent: { percent: number; phase: string }[] = [];
    const progress = forwardProgress((p) => sent.push(p));
    for (const [p, phase] of [[0, 'analyzing'], [10.4, 'images'], [10.2, 'images'], [8, 'images'], [30, 'images'], [25, 'writing'], [101, 'finalizing']] as const) progress(p, phase);
    assert.deepEqual(sent, [
      { percent: 0, phase: 'analyzing' },
      { percent: 10, phase: 'images' },
      { percent: 30, phase: 'images' },
      { percent: 30, phase: 'writing' },
      { percent: 100, phase: 'finalizing' },
    ]);
  });

  it('reports progress while it works, the palette search as analyzing and oxipng as encoding, never backwards', async () => {
    // Before, a 12 MP PNG sat at 10 % for all of its 12 s: oxipng is one native call that reports nothing.
    const seen = await progressThroughPool('image.png-compress', `${corpus}png/exifr-logo-black-highres.png`);
    assert.ok(valuesWithin(seen, 10, 90, 'analyzing') >= 2, JSON.stringify(seen));
    assert.ok(valuesWithin(seen, 10, 90, 'encoding') >= 2, JSON.stringify(seen));
    assert.deepEqual([...new Set(seen.map(([, s]) => s))], ['decoding', 'analyzing', 'encoding', 'finalizing']);
  });

  it('a step that cannot report its own is announced with its end and predicted time, and its end reported only when it has ended', async () => {
    const reports: [number, unknown][] = [];
    const step = () => new Promise<string>((r) => setTimeout(() => r('done'), 50));
    assert.equal(await estimatedProgress(step, { from: 20, to: 60, predictedMs: 300 }, (p, toward) => reports.push([p, toward])), 'done');
    assert.deepEqual(reports, [[20, { percent: 60, predictedMs: 300 }], [60, undefined]]);
    const failed: number[] = [];
    const failing = () => Promise.reject(new Error('native call failed'));
    await assert.rejects(estimatedProgress(failing, { from: 0, to: 100, predictedMs: 100 }, (p) => failed.push(p)), /native call failed/);
    assert.deepEqual(failed, [0], 'no end reported for a step that failed');
    const scaled: [number, unknown][] = [];
    onScale(10, 80, (p, toward) => scaled.push([p, toward]))(0.5, { percent: 1, predictedMs: 40 });
    assert.deepEqual(scaled, [[50, { percent: 90, predictedMs: 40 }]]);
  });

  it('the pool moves an announced step on by its prediction, never to its end, and stops at the next message', async () => {
    const seen: number[] = [];
    const moving = new ProgressOfThread((p) => seen.push(p));
    moving.told({ percent: 20, phase: 'encoding', toward: { percent: 60, predictedMs: 300 } });
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(seen.length >= 3 && seen[0] === 20 && seen.every((p, i) => p < 60 && (i === 0 || p > seen[i - 1])), JSON.stringify(seen));
    assert.ok(seen.at(-1)! > 40, 'past halfway after three predicted times');
    moving.told({ percent: 60, phase: 'finalizing' });
    const count = seen.length;
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(seen.length, count, 'no estimate after the next message');
    moving.told({ percent: 30, phase: 'finalizing' });
    assert.equal(seen.length, count, 'never backwards');
    moving.stop();
  });

  it('a UI screenshot is no bigger than pngquant at the perceived quality it reaches (a larger palette can be the smaller file)', async () => {
    // Issue 19: the lowest palette quality that passed dithered the screenshot's gradient into
    // noise, 33 % bigger than pngquant's smallest file that was also closer to the original.
    const input = await screenshotPng(join(work, 'screenshot.png'));
    const r = await run(png, input);
    const reached = await perceived(input, r.path);
    assert.ok(reached >= PERCEIVED_TARGET, `SSIMULACRA2 ${reached}`);
    let peer = Infinity;
    for (const range of ['40-60', '65-80', '85-95', '95-100']) {
      const out = join(work, `pngquant-${range}.png`);
      try {
        execFileSync('pngquant', [`--quality=${range}`, '--force', '--output', out, input]);
      } catch {
        continue;
      }
      if ((await perceived(input, out)) >= reached) peer = Math.min(peer, (await stat(out)).size);
    }
    // Lossless is what pngquant falls back to at no range; every palette it makes is a candidate.
    if (peer < Infinity) assert.ok(r.outSize <= peer * 1.05, `ours ${r.outSize} B at SSIMULACRA2 ${reached.toFixed(2)}, pngquant ${peer} B at least as close`);
  });

  it('lossless and compression disabled are pixel-identical and smaller', async () => {
    const cases: [string, JobOptions][] = [
      ['exifr-logo-black-highres.png', { compression: { mode: 'lossless' } }],
      ['density_plot.png', { compression: { enabled: false } }],
      ['baiona_alpha.png', { compression: { mode: 'lossless' } }],
      ['baiona_colormapped.png', { compression: { mode: 'lossless' } }],
    ];
    for (const [file, options] of cases) {
      const input = `${corpus}png/${file}`;
      const r = await run(png, input, options);
      assert.ok(r.outSize <= r.inSize);
      // 16-bit samples, so a palette or bit-depth change that rounds anything would show.
      const exact = async (path: string) => sharp(path).ensureAlpha().raw({ depth: 'ushort' }).toBuffer();
      assert.equal(Buffer.compare(await exact(input), await exact(r.path)), 0, file);
      if (file !== 'baiona_colormapped.png') assert.ok(r.outSize < r.inSize * 0.9, `${file}: ${r.outSize} vs ${r.inSize}`);
    }
  });

  it('keeps an RGB ICC profile and the colour type it describes', async () => {
    const input = join(work, 'grey-in-p3.png');
    const grey = Buffer.alloc(64 * 64 * 3, 0);
    for (let i = 0; i < grey.length; i++) grey[i] = (Math.floor(i / 3) * 7) % 256;
    await sharp(grey, { raw: { width: 64, height: 64, channels: 3 } }).withIccProfile('p3').png().toFile(input);
    const iccIn = (await sharp(input).metadata()).icc;
    for (const mode of ['lossless', 'lossy'] as const) {
      const r = await run(png, input, { compression: { mode } });
      const out = await readFile(r.path);
      // Greyscale pixels would be smaller, but a greyscale PNG may not carry an RGB profile.
      assert.equal(out[25], 2, `${mode}: colour type`);
      assert.deepEqual((await sharp(r.path).metadata()).icc, iccIn);
    }
  });

  it('never returns a larger file (1-bit scan)', async () => {
    const input = `${corpus}png/linn-scan.png`;
    const r = await run(png, input);
    assert.ok(r.outSize <= r.inSize);
  });

  it('returns incompressible noise unchanged, pixel for pixel, in both modes', async () => {
    // Every byte random, alpha included: what an attacker or a screenshot of noise sends.
    const input = join(work, 'noise.png');
    await sharp(randomBytes(1280 * 1280 * 4), { raw: { width: 1280, height: 1280, channels: 4 } }).png().toFile(input);
    for (const mode of ['lossy', 'lossless'] as const) {
      const r = await run(png, input, { compression: { mode } });
      assert.ok(r.outSize <= r.inSize, `${mode}: ${r.outSize} > ${r.inSize}`);
      assert.equal(Buffer.compare(await sharp(input).raw().toBuffer(), await sharp(r.path).raw().toBuffer()), 0, `${mode}: pixels changed`);
    }
  });

  it('fails hostile files with clear codes', async () => {
    for (const mode of ['lossy', 'lossless'] as const) {
      await rejectsWithJobError(run(png, `${corpus}bad/bad-crc.png`, { compression: { mode } }), 'image.decode_failed');
    }
    await rejectsWithJobError(run(png, `${corpus}bad/huge-dimensions.png`), 'image.too_many_pixels');
  });
});

describe('image.gif-compress', () => {
  it('keeps frame count, delays and loop count, and saves bytes', async () => {
    const input = `${corpus}gif/exifr-readme-animated.gif`;
    const r = await run(gif, input);
    const before = gifTiming(await readFile(input));
    const after = gifTiming(await readFile(r.path));
    assert.deepEqual(after.delays, before.delays);
    assert.equal(after.loop, before.loop);
    const [mIn, mOut] = await Promise.all([sharp(input).metadata(), sharp(r.path).metadata()]);
    assert.equal(mOut.pages, mIn.pages);
    assert.deepEqual(mOut.delay, mIn.delay);
    // 0.67 under the luma bar alone, which let its frames fall to SSIMULACRA2 76.
    assert.ok(r.outSize < r.inSize * 0.85, `${r.outSize} vs ${r.inSize}`);
    // Every fourth displayed frame (composited by libvips, not by our own code), at full
    // resolution, within the perceived target (the compressor checks a sample of 5 of them).
    const [framesIn, framesOut] = await Promise.all([shownFrames(input), shownFrames(r.path)]);
    const every4th = (f: typeof framesIn) => {
      const frame = f.width * (f.height / 34) * 4;
      const picked = Array.from({ length: 9 }, (_, i) => f.data.subarray(i * 4 * frame, (i * 4 + 1) * frame));
      return { data: Buffer.concat(picked), width: f.width, height: (f.height / 34) * 9, channels: 4 };
    };
    const score = await perceived(every4th(framesIn), every4th(framesOut));
    assert.ok(score >= PERCEIVED_TARGET - 2, `SSIMULACRA2 ${score}`);
    assert.ok(r.perceivedQuality !== undefined && r.perceivedQuality >= PERCEIVED_TARGET, `reported ${r.perceivedQuality}`);
  });

  it('gives a frame that draws few colours a local colour table at a smaller code size, exactly', async () => {
    // A screen recording: later frames draw a few of the 256 global colours (issue 19: 5 % of
    // the file, the gap to gifsicle -O3 at equal SSIM).
    const input = join(work, 'screen-recording.gif');
    await screenRecordingGif(input);
    const bytes = await readFile(input);
    const withLocal = new GifRecompressor(bytes).recompress(0).data;
    const frames = parseGif(withLocal).frames;
    const local = frames.filter((f) => (f.descriptor[9] & 0x80) !== 0 && f.minCodeSize < 8);
    assert.ok(local.length >= frames.length / 2, `${local.length} of ${frames.length} frames with a small local table`);
    assert.ok(withLocal.length < bytes.length * 0.97, `${withLocal.length} vs ${bytes.length}`);
    const [a, b] = await Promise.all([sharp(bytes, { animated: true }).raw().toBuffer(), sharp(withLocal, { animated: true }).raw().toBuffer()]);
    assert.ok(a.equals(b), 'every frame decodes to the same pixels');
  });

  it('judges the frames it composites as libvips displays them, the input and every recompression', async () => {
    // The perceived steps score the displayed frames the recompressor composited instead of
    // decoding each candidate file again: the same pixels, so the same scores.
    const input = join(work, 'screen-recording.gif');
    await screenRecordingGif(input);
    for (const bytes of [await readFile(`${corpus}gif/exifr-readme-animated.gif`), await readFile(input)]) {
      const gifs = new GifRecompressor(bytes);
      const { width, height, frames } = gifs.screen;
      const watched = [0, Math.floor(frames / 3), frames - 1];
      gifs.watch(watched);
      const stacked = async (file: Buffer) => {
        const all = await shownFrames(file);
        return Buffer.concat(watched.map((f) => all.data.subarray(f * width * height * 4, (f + 1) * width * height * 4)));
      };
      assert.ok(Buffer.from(gifs.inputFrames().data).equals(await stacked(bytes)), 'the input');
      for (const threshold of [6, 20]) {
        const r = gifs.recompress(threshold);
        assert.equal(r.frames?.height, height * watched.length);
        assert.ok(Buffer.from(r.frames!.data).equals(await stacked(r.data)), `threshold ${threshold}`);
      }
    }
  });

  it('a recompression begun, scored on its watched frames, left or finished, is the same one as made whole', async () => {
    // The search encodes a threshold as far as its last watched frame, and the rest only when it passes.
    const input = join(work, 'screen-recording.gif');
    await screenRecordingGif(input);
    const bytes = await readFile(input);
    const whole = new GifRecompressor(bytes);
    const parts = new GifRecompressor(bytes);
    for (const g of [whole, parts]) g.watch([0, 9, 20]);
    for (const g of [whole, parts]) g.recompress(0);
    const left = parts.begin(30);
    const begun = parts.begin(12);
    assert.throws(() => left.finish(), /begun before this one was finished/);
    const expected = whole.recompress(12);
    assert.ok(Buffer.from(begun.frames!.data).equals(Buffer.from(expected.frames!.data)), 'the watched frames');
    assert.ok(begun.finish().data.equals(expected.data), 'the file');
    assert.equal(begun.finish(), begun.finish(), 'finished once');
    assert.ok(parts.begin(0).finish().data.equals(whole.recompress(0).data), 'the exact re-encode, kept');
  });

  it('optimises an unoptimised animation between frames, exactly at threshold 0', async () => {
    const input = join(work, 'unoptimised.gif');
    const bytes = await unoptimisedAnimation();
    await import('node:fs/promises').then((fs) => fs.writeFile(input, bytes));
    const exact = new GifRecompressor(bytes).recompress(0).data;
    assert.ok(exact.length < bytes.length * 0.3, `${exact.length} vs ${bytes.length}`);
    assert.equal(Buffer.compare((await shownFrames(bytes)).data, (await shownFrames(exact)).data), 0);
    const r = await run(gif, input);
    assert.deepEqual(gifTiming(await readFile(r.path)), gifTiming(bytes));
    assert.equal((await sharp(r.path).metadata()).pages, 6);
    assert.ok(r.outSize <= exact.length, `${r.outSize} vs ${exact.length}`);
    const shown = await perceived(await shownFrames(bytes), await shownFrames(r.path));
    assert.ok(shown >= PERCEIVED_TARGET - 2, `displayed SSIMULACRA2 ${shown}`);
  });

  it('measures an interlaced GIF in display order', async () => {
    const input = `${corpus}gif/lena.gif`;
    const r = await run(gif, input);
    assert.ok(r.outSize <= r.inSize);
    // One frame: what the compressor scored is the picture.
    const s3 = await perceived(await pixels(input), await pixels(r.path));
    assert.ok(s3 >= PERCEIVED_TARGET, `SSIMULACRA2 ${s3}`);
    assert.equal(r.perceivedQuality?.toFixed(3), s3.toFixed(3));
  });

  it('lands within 2 points above the target once a threshold fails: inside the bracket it aims by the scores, not at the middle', async () => {
    // file-type-fixture.gif: threshold 8 passes with room, 16 fails and so does their midpoint
    // 11.3; interpolating by the scores lands at 8.9 (82.1), then 9.4 (81.2). Midpoints alone
    // stopped 3.5 points above the target.
    const input = `${corpus}gif/file-type-fixture.gif`;
    const r = await run(gif, input);
    const shown = await perceived(await pixels(input), await pixels(r.path));
    assert.ok(shown >= PERCEIVED_TARGET && shown < PERCEIVED_TARGET + 2, `SSIMULACRA2 ${shown}`);
    assert.equal(r.perceivedQuality?.toFixed(3), shown.toFixed(3));
  });

  it('resizes every frame of an animation', async () => {
    const input = `${corpus}gif/exifr-readme-animated.gif`;
    const r = await run(gif, input, { resize: { enabled: true, mode: 'pixels', preset: 'custom', value: 222 } });
    const m = await sharp(r.path).metadata();
    assert.equal(m.pages, 34);
    assert.deepEqual([m.width, m.height], [140, 222]);
    assert.deepEqual([r.width, r.height], [140, 222]);
  });

  it('rejects a file that is not a GIF', async () => {
    await rejectsWithJobError(run(gif, `${corpus}png/density_plot.png`), 'image.format_mismatch');
  });
});

describe('never larger', () => {
  it('returns the input byte for byte when nothing can be saved', async () => {
    const input = join(work, 'tiny.png');
    await sharp({ create: { width: 1, height: 1, channels: 3, background: '#fff' } }).png().toFile(input);
    const copy = join(work, 'tiny-copy.png');
    await copyFile(input, copy);
    const r = await run(png, copy, { compression: { mode: 'lossless' } });
    assert.ok(r.outSize <= r.inSize);
  });
});
