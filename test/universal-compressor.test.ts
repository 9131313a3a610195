// Issue 5: image.universal-compress on the real corpus (webp, avif, heic, tiff, bmp, psd, raw) and hostile inputs.
// Subset for time: of the five 12 MP HEICs one is compressed (the others share its decoder path), the
// 20 MP 10-bit AVIF and the 12 MP simulated Pixel DNG are left to the benchmark.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import type { CompressResult } from '../src/catalog/contract.ts';
import { decodeBmp } from '../workers/decoders/bmp.ts';
import { detectFamily } from '../workers/decoders/detect.ts';
import { decodeImage } from '../workers/decoders/index.ts';
import { openImage } from '../workers/image/door.ts';
import { ssim, type Pixels } from '../workers/image/ssim.ts';
import { jpegOrigin } from '../workers/image/jpeg-mark.ts';
import { lumaQuantTable, ourQualityOf } from '../workers/image/jpeg-quant.ts';
import { compress as jpg } from '../workers/jpg.ts';
import { compress, encodeJpegWithin, JPEG_FLOOR, outputFormat } from '../workers/universal.ts';
import { rejectsWithJobError } from './helpers/job-error.ts';
import { progressThroughPool, valuesWithin } from './helpers/pool-progress.ts';
import { ditheredPaletteBmp, ditheredPaletteTiff, rangeMismatchAvif } from './helpers/made-files.ts';
import { plainJpegBytesAt, rgba } from './helpers/peer.ts';
import { perceived } from './helpers/perceived.ts';
import { PERCEIVED_TARGET } from '../workers/image/perceived.ts';
import { chooseJpegQuality, encodeJpeg, OUR_FORMS } from '../workers/image/encode.ts';
import { IMAGE_SEARCH } from '../workers/image/budget.ts';
import { ssimulacra2 } from '../workers/image/ssimulacra2.ts';

const corpus = new URL('../../shared/corpus/', import.meta.url).pathname;
const limits = { maxPixels: 100_000_000, signal: new AbortController().signal };

let work: string;
before(async () => {
  work = await mkdtemp(join(tmpdir(), 'universal-test-'));
});
after(() => rm(work, { recursive: true, force: true }));

async function run(rel: string, options = {}): Promise<{ result: CompressResult; phases: Set<string> }> {
  const inputPath = join(corpus, rel);
  const dir = await mkdtemp(join(work, 'job-'));
  const phases = new Set<string>();
  const result = await compress({ inputPath, format: rel.split('.').pop()!, options }, { dir }, {
    signal: new AbortController().signal,
    progress: (_p, phase) => phases.add(phase),
  });
  return { result, phases };
}

async function failsWith(rel: string, code: RegExp): Promise<void> {
  await rejectsWithJobError(run(rel), code);
}

/** [file, output format, displayed width, height] — formats by the spec table, alpha judged by content. RAW: below. */
const CASES: [string, 'jpg' | 'png', number, number][] = [
  ['webp/denali.webp', 'jpg', 600, 315],
  ['webp/derived-baiona-lossy-alpha-dropped-opaque.webp', 'jpg', 640, 682],
  ['webp/derived-exifr-logo-lossless-alpha.webp', 'png', 1616, 855],
  ['webp/derived-exifr-readme-animated.webp', 'jpg', 560, 888],
  ['webp/file-type-fixture.webp', 'jpg', 200, 133],
  ['avif/Irvine_CA.avif', 'jpg', 480, 640],
  ['avif/file-type-sequence-animated.avif', 'jpg', 800, 450],
  ['heic/IMG_2682.heic', 'jpg', 4032, 3024],
  // Declares an alpha channel that is 255 everywhere: no transparency, so JPG.
  ['tiff/BSG1.tiff', 'jpg', 635, 348],
  ['tiff/bali.tif', 'jpg', 725, 489],
  ['tiff/exifr-001.tif', 'jpg', 640, 512],
  ['tiff/lena.tif', 'jpg', 512, 512],
  ['bmp/derived-baiona-32bit-alpha.bmp', 'jpg', 640, 682],
  ['bmp/derived-japanese-shop-8bit-palette.bmp', 'jpg', 1200, 802],
  ['bmp/derived-prairie_falcon-24bit.bmp', 'jpg', 800, 533],
  ['bmp/file-type-fixture.bmp', 'jpg', 200, 133],
  // Saved without a real merged image: the layers are composited; a rotated photo leaves transparent corners.
  ['psd/ag-psd-16bits.psd', 'png', 500, 500],
  ['psd/ag-psd-animation-timeline.psd', 'jpg', 500, 336],
  ['psd/ag-psd-cmyk.psd', 'jpg', 200, 200],
  ['psd/file-type-fixture.psd', 'jpg', 200, 133],
  ['psd/psdjs-example.psd', 'jpg', 900, 600],
];

describe('universal compressor: every format decodes to the right output', () => {
  for (const [rel, format, width, height] of CASES) {
    it(`${rel} → ${format} ${width}×${height}`, async () => {
      const { result, phases } = await run(rel);
      assert.equal(result.format, format);
      assert.equal(result.contentType, format === 'jpg' ? 'image/jpeg' : 'image/png');
      const meta = await sharp(result.path).metadata();
      assert.equal(meta.format, format === 'jpg' ? 'jpeg' : 'png');
      assert.deepEqual([meta.width, meta.height, result.width, result.height], [width, height, width, height]);
      assert.ok(meta.orientation === undefined || meta.orientation === 1, 'pixels are upright, orientation reset');
      if (format === 'png') assert.ok(meta.hasAlpha, 'PNG output keeps the transparency');
      for (const phase of ['decoding', 'analyzing', 'encoding', 'finalizing']) assert.ok(phases.has(phase), `phase ${phase}`);
    });
  }
});

describe('progress', () => {
  it('moves through the encode of a 12 MP photo, never backwards (a final mozjpeg encode is one call of seconds)', async () => {
    const seen = await progressThroughPool('image.universal-compress', join(corpus, 'heic/IMG_2682.heic'));
    assert.ok(valuesWithin(seen, 45, 90, 'encoding') >= 3, JSON.stringify(seen));
  });
});

async function pixelsOf(input: string | Buffer): Promise<Pixels> {
  const { data, info } = await sharp(input).raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

describe('PSD without a real merged image (layers composited)', () => {
  // Debian's ImageMagick composites the layers of such files; its render is the reference.
  for (const name of ['ag-psd-16bits.psd', 'ag-psd-animation-timeline.psd']) {
    it(`${name} looks like ImageMagick's render`, async () => {
      const { result } = await run(`psd/${name}`);
      const ref = execFileSync('/usr/bin/convert', [`${join(corpus, 'psd', name)}[0]`, 'png:-'], { maxBuffer: 64 << 20 });
      const score = ssim(await pixelsOf(ref), await pixelsOf(result.path));
      assert.ok(score > 0.97, `SSIM against ImageMagick ${score.toFixed(4)}`);
    });
  }
});

describe('AVIF colour range: the colr property, not the bitstream (MIAF)', () => {
  // colr says full range with unspecified matrix (2/2/2), the AV1 bitstream says limited: read as
  // limited, the picture is stretched by 16 % (7-8 levels off on average, SSIM 0.973-0.993).
  // Debian's ImageMagick (libheif) follows colr, as libavif does; its decode is the reference.
  const cases: [string, () => Promise<string>][] = [
    ['a made file (avifenc, range flag set in colr)', () => rangeMismatchAvif(join(work, 'range-mismatch.avif'))],
    ['avif/Irvine_CA.avif', async () => join(corpus, 'avif/Irvine_CA.avif')],
  ];
  for (const [name, make] of cases) {
    it(`${name} decodes as ImageMagick and libavif show it`, async () => {
      const file = await make();
      const { decoded } = await decodeImage(await readFile(file), 'avif', limits);
      const ours = await pixelsOf(await decoded.image.toColourspace('srgb').removeAlpha().png().toBuffer());
      const ref = await pixelsOf(await sharp(execFileSync('/usr/bin/convert', [file, 'png:-'], { maxBuffer: 64 << 20 })).removeAlpha().png().toBuffer());
      let diff = 0;
      for (let i = 0; i < ours.data.length; i++) diff += Math.abs(ours.data[i] - ref.data[i]);
      const mean = diff / ours.data.length;
      const score = ssim(ref, ours);
      assert.ok(mean < 2 && score > 0.999, `mean difference ${mean.toFixed(2)} levels, SSIM ${score.toFixed(4)}`);
    });
  }
});

describe('size rule: a JPG made from another format stays within the input size', () => {
  it('a lossy WebP that JPEG at the usual target would outgrow fits, above the floor', async () => {
    const rel = 'webp/file-type-fixture.webp';
    const { result } = await run(rel);
    const input = await readFile(join(corpus, rel));
    const output = await readFile(result.path);
    assert.ok(output.length <= input.length, `${output.length} > ${input.length}`);
    const score = await perceived(input, output);
    assert.ok(score >= JPEG_FLOOR, `SSIMULACRA2 ${score.toFixed(2)}`);
  });

  it('without a limit the usual target; a limit it cannot reach gives the floor, never below it', async () => {
    const { decoded } = await decodeImage(await readFile(join(corpus, 'tiff/lena.tif')), 'tif', limits);
    const pixels = await pixelsOf(await decoded.image.removeAlpha().png().toBuffer());
    const free = await encodeJpegWithin(pixels);
    assert.equal(free.rule, 'target');
    const fit = await encodeJpegWithin(pixels, { maxBytes: free.data.length - 1 });
    assert.equal(fit.rule, 'fit');
    assert.ok(fit.data.length < free.data.length && fit.quality < free.quality);
    const floor = await encodeJpegWithin(pixels, { maxBytes: 1000 });
    assert.equal(floor.rule, 'floor');
    for (const r of [fit, floor]) {
      // lena is its own proxy: what the search measured is what the file scores.
      const score = await perceived(pixels, r.data);
      assert.ok(score >= JPEG_FLOOR, `q${r.quality}: SSIMULACRA2 ${score.toFixed(2)}`);
      assert.ok(Math.abs(score - r.score) < 0.01, `reported ${r.score}, measured ${score}`);
    }
  });

  it("a jpegli leader that a mozjpeg form overtakes only by its final encode is settled by searching both on the 1 MP proxy: a 12 MP HEIC's target file fits", async () => {
    // On the quarter proxy jpegli's 4:4:4 led and table 5 passed it by the scaling for mozjpeg's
    // scan search; table 5 at its answer was 1,338,988 B, over the input's size, and the fit lowered
    // its quality to 1,307,244 B. Searched on the 1 MP proxy, jpegli's form is 7 % smaller at the target.
    const input = join(corpus, 'heic/file-type-fixture-heic.heic');
    const { result } = await run('heic/file-type-fixture-heic.heic');
    const [inSize, outSize] = [(await stat(input)).size, (await stat(result.path)).size];
    assert.ok(outSize < inSize * 0.97, `${outSize} B of ${inSize}`);
    assert.ok((result.perceivedQuality ?? 0) >= PERCEIVED_TARGET, `${result.perceivedQuality}`);
  });

  it('on a picture too small for a guide, jpegli is tried beside the chosen mozjpeg form and the smaller file at the target kept: a 0.19 MP photo takes jpegli, a 0.26 MP one keeps mozjpeg', async () => {
    for (const [rel, jpegliWins] of [
      ['webp/denali.webp', true],
      ['tiff/lena.tif', false],
    ] as const) {
      const { decoded } = await decodeImage(await readFile(join(corpus, rel)), rel.split('.').pop()!, limits);
      const pixels = await pixelsOf(await decoded.image.toColourspace('srgb').removeAlpha().png().toBuffer());
      const [chosen, mozjpeg] = [await encodeJpegWithin(pixels), await encodeJpegWithin(pixels, { jpegli: false })];
      const said = `${rel}: ${chosen.table} q${chosen.quality} ${chosen.data.length} B, mozjpeg's t${mozjpeg.table} q${mozjpeg.quality} ${mozjpeg.data.length} B`;
      if (jpegliWins) {
        // denali.webp: jpegli's 4:4:4 4.5 % smaller.
        assert.equal(chosen.table, 'jpegli', said);
        assert.ok(chosen.data.length < mozjpeg.data.length * 0.97, said);
        assert.ok((await perceived(pixels, chosen.data)) >= PERCEIVED_TARGET, said);
      } else {
        // lena.tif: jpegli's probes near the aim predict no gain worth it, and its search stops there.
        assert.deepEqual(chosen.data, mozjpeg.data, said);
      }
    }
  });

  it("at the floor the forms are compared again: a file smaller than the target's form makes there", async () => {
    // A 1.7 MP AVIF: mozjpeg's default form is the smallest at the usual target, table 5 at the floor.
    const { decoded } = await decodeImage(await readFile(join(corpus, 'avif/immich-8bit-sRGB.avif')), 'avif', limits);
    const pixels = await pixelsOf(await decoded.image.toColourspace('srgb').removeAlpha().png().toBuffer());
    const free = await encodeJpegWithin(pixels);
    const floor = await encodeJpegWithin(pixels, { maxBytes: 1000 });
    assert.equal(floor.rule, 'floor');
    const form = { table: free.table, chroma: free.chroma };
    const quality = await chooseJpegQuality(pixels, { target: JPEG_FLOOR, form, search: IMAGE_SEARCH });
    const targetsForm = await encodeJpeg(pixels, { quality, ...form });
    assert.ok(floor.data.length < targetsForm.length, `t${floor.table} q${floor.quality}: ${floor.data.length} B; t${form.table} q${quality}: ${targetsForm.length} B`);
    // Judged on the 1 MP proxy, the floor holds within the proxy's error (median 0.47).
    const score = await perceived(pixels, floor.data);
    assert.ok(score >= JPEG_FLOOR - 1, `SSIMULACRA2 ${score.toFixed(2)}, reported ${floor.score.toFixed(2)}`);
  });
});

async function rgb(input: Buffer | string): Promise<Pixels> {
  const { data, info } = await sharp(input).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: 3 };
}

/** Half size, each pixel the mean of a 2×2 block. */
async function binned(p: Pixels): Promise<Pixels> {
  const { data, info } = await sharp(p.data, { raw: { width: p.width, height: p.height, channels: 3 } })
    .resize(p.width >> 1, p.height >> 1, { kernel: 'linear' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: 3 };
}

/** A P6 PPM as dcraw writes it. */
function parsePpm(b: Buffer): { data: Buffer; width: number; height: number } {
  const fields: string[] = [];
  let p = 0;
  while (fields.length < 4) {
    while (b[p] === 0x20 || b[p] === 0x0a || b[p] === 0x0d || b[p] === 0x09) p++;
    let s = '';
    while (b[p] > 0x20) s += String.fromCharCode(b[p++]);
    fields.push(s);
  }
  assert.equal(fields[0], 'P6');
  return { data: b.subarray(p + 1), width: Number(fields[1]), height: Number(fields[2]) };
}

describe('camera RAW', () => {
  for (const name of ['canon-eos-kiss-x4-tinydng.dng', 'canon-eos-6d-photoprism-lossy.dng', 'derived-craft-beer-orientation6.dng']) {
    it(`${name} is the picture dcraw develops (camera WB, orientation applied)`, async () => {
      const { result, phases } = await run(`raw/${name}`);
      assert.equal(result.format, 'jpg');
      assert.equal(phases.size, 4);
      const ref = parsePpm(execFileSync('dcraw', ['-w', '-c', join(corpus, 'raw', name)], { maxBuffer: 256 * 1024 * 1024 }));
      const ours = await sharp(result.path).raw().toBuffer({ resolveWithObject: true });
      assert.deepEqual([ours.info.width, ours.info.height, result.width, result.height], [ref.width, ref.height, ref.width, ref.height]);
      // Judged where the sensor recorded colour (2×2 binned), as the quality search judges it,
      // against dcraw's development (ours agrees with it to 0.998 luma SSIM before any JPEG loss).
      const score = ssimulacra2(await binned({ ...ref, channels: 3 }), await binned({ data: ours.data, width: ref.width, height: ref.height, channels: 3 }));
      assert.ok(score > PERCEIVED_TARGET - 5, `binned SSIMULACRA2 against dcraw ${score.toFixed(2)}`);
    });
  }

  it('develops like dcraw (AHD demosaicing): before any JPEG loss the two agree at full resolution', async () => {
    // With PPG this file read 0.969 against dcraw, more than any JPEG quality loses (issue 19).
    const name = 'canon-eos-kiss-x4-tinydng.dng';
    const { decoded } = await decodeImage(await readFile(join(corpus, 'raw', name)), 'dng', limits);
    const ours = await decoded.image.rotate().toColourspace('srgb').removeAlpha().raw().toBuffer({ resolveWithObject: true });
    const ref = parsePpm(execFileSync('dcraw', ['-w', '-c', join(corpus, 'raw', name)], { maxBuffer: 256 * 1024 * 1024 }));
    const score = ssim({ data: ours.data, width: ours.info.width, height: ours.info.height, channels: 3 }, { ...ref, channels: 3 });
    assert.ok(score > 0.995, `full-resolution SSIM against dcraw ${score.toFixed(4)}`);
  });

  it('spends no bytes on what the sensor did not record (the target binned, at half the bytes of q95 4:4:4)', async () => {
    const name = 'canon-eos-kiss-x4-tinydng.dng';
    const { result } = await run(`raw/${name}`);
    assert.equal((await sharp(result.path).metadata()).chromaSubsampling, '4:2:0');
    const ref = await binned({ ...parsePpm(execFileSync('dcraw', ['-w', '-c', join(corpus, 'raw', name)], { maxBuffer: 256 * 1024 * 1024 })), channels: 3 });
    const { decoded } = await decodeImage(await readFile(join(corpus, 'raw', name)), 'dng', limits);
    const q95 = await decoded.image.jpeg({ quality: 95, mozjpeg: true, chromaSubsampling: '4:4:4' }).toBuffer();
    const score = async (jpeg: Buffer | string) => ssimulacra2(ref, await binned(await rgb(jpeg)));
    const [ours, best] = [await score(result.path), await score(q95)];
    assert.ok(ours >= PERCEIVED_TARGET - 5 && ours <= best, `ours ${ours.toFixed(2)} vs q95 4:4:4 ${best.toFixed(2)}`);
    assert.ok((await readFile(result.path)).length < q95.length * 0.5);
  });

  it('EXIF with the camera make and model goes into the JPG', async () => {
    const { result } = await run('raw/canon-eos-6d-photoprism-lossy.dng');
    const exif = (await sharp(result.path).metadata()).exif;
    assert.ok(exif && exif.includes(Buffer.from('Canon')), 'EXIF names the camera');
  });

  // Stripped or cut camera files from other projects' test suites: no picture to develop and no
  // full-size preview, so they fail cleanly instead of producing noise or a thumbnail.
  for (const name of ['exiftool-CanonRaw.cr2', 'exiftool-FujiFilm.raf', 'exiftool-Nikon.nef', 'exiftool-Panasonic.rw2', 'exiftool-Sigma.x3f', 'file-type-Leica-M10.dng', 'file-type-fixture.cr3', 'file-type-sony-zv-e10.arw']) {
    it(`${name} fails with a RAW code`, () => failsWith(`raw/${name}`, /^raw\.(no_image_data|unsupported)$/));
  }
});

describe('BMP decoder', () => {
  it('32-bit BMP with alpha is the exact pixels of its source PNG', async () => {
    const bmp = await decodeBmp(await readFile(join(corpus, 'bmp/derived-baiona-32bit-alpha.bmp')), limits);
    const ours = await bmp.image.ensureAlpha().raw().toBuffer();
    const source = await sharp(join(corpus, 'png/baiona_alpha.png')).ensureAlpha().raw().toBuffer();
    assert.ok(ours.equals(source));
  });

  it('RLE8 palette BMP decodes to a full picture', async () => {
    const bmp = await decodeBmp(await readFile(join(corpus, 'bmp/derived-japanese-shop-8bit-palette.bmp')), limits);
    const ours = await bmp.image.removeAlpha().raw().toBuffer({ resolveWithObject: true });
    assert.deepEqual([ours.info.width, ours.info.height], [1200, 802]);
    const mean = ours.data.reduce((a, v) => a + v, 0) / ours.data.length;
    assert.ok(mean > 20 && mean < 235, 'a real picture, not a flat frame');
  });
});

describe('dithered palette pictures at equal quality', () => {
  it('a dithered 256-colour BMP is no bigger than a plain libjpeg JPEG at the perceived quality it reaches', async () => {
    // The dither is luma noise that drives the quality up, where mozjpeg's 4:4:4 chroma used to cost
    // 60 % more bytes for nothing: the colour of such an image is smooth, so mozjpeg's form stays
    // 4:2:0. jpegli's 4:4:4 (its adaptive quantisation spends little on smooth colour) is taken
    // where its file is the smaller one.
    const bmp = await ditheredPaletteBmp(join(work, 'dithered.bmp'), 600);
    const dir = await mkdtemp(join(work, 'job-'));
    const result = await compress({ inputPath: bmp, format: 'bmp', options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} });
    const reference = await rgba(await sharp(execFileSync('convert', [bmp, 'png:-'], { maxBuffer: 64 << 20 })).png().toBuffer());
    const ours = await readFile(result.path);
    const reached = ssimulacra2(reference, await rgba(ours));
    const peer = await plainJpegBytesAt(reference, reached);
    if ((await sharp(ours).metadata()).chromaSubsampling !== '4:2:0') {
      assert.notEqual(await ourQualityOf(lumaQuantTable(ours)!, { table: 'jpegli', chroma: '4:4:4' }), undefined, "4:4:4 only in jpegli's form");
    }
    assert.ok(ours.length <= peer.bytes * 1.05, `ours ${ours.length} B at SSIMULACRA2 ${reached.toFixed(2)}, libjpeg q${peer.quality} ${peer.bytes} B`);
  });

  it('a 64-colour dithered LZW TIFF is no bigger than plain libjpeg at the perceived quality it reaches', async () => {
    // mozjpeg's default tables quantise the dither's high frequencies hardest; the form search
    // (image/encode.ts) takes other tables for such a picture.
    const tif = await ditheredPaletteTiff(join(work, 'dithered.tif'));
    const dir = await mkdtemp(join(work, 'job-'));
    const result = await compress({ inputPath: tif, format: 'tif', options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} });
    const reference = await rgba(await sharp(execFileSync('convert', [tif, 'png:-'], { maxBuffer: 64 << 20 })).png().toBuffer());
    const ours = await readFile(result.path);
    const reached = ssimulacra2(reference, await rgba(ours));
    const peer = await plainJpegBytesAt(reference, reached);
    const input = (await readFile(tif)).length;
    assert.ok(ours.length < input, `ours ${ours.length} B for an input of ${input} B`);
    assert.ok(reached >= JPEG_FLOOR, `SSIMULACRA2 ${reached.toFixed(2)}`);
    assert.ok(ours.length <= peer.bytes * 1.05, `ours ${ours.length} B at SSIMULACRA2 ${reached.toFixed(2)}, libjpeg q${peer.quality} ${peer.bytes} B`);
    // Written in one of the forms the search chooses from: ours by the signature, so it
    // comes back unchanged, while the same tables without it are anyone's.
    const table = lumaQuantTable(ours)!;
    const tables = await Promise.all(OUR_FORMS.map((form) => ourQualityOf(table, form)));
    assert.ok(tables.some((q) => q !== undefined), 'one of our tables');
    assert.equal(await jpegOrigin(ours), 'ours');
    const again = await mkdtemp(join(work, 'job-'));
    const second = await jpg({ inputPath: result.path, format: 'jpg', options: {} }, { dir: again }, { signal: new AbortController().signal, progress: () => {} });
    assert.deepEqual(await readFile(second.path), ours);
    assert.equal(await jpegOrigin(await sharp(ours).jpeg({ quality: 85 }).toBuffer()), 'other');
  });
});

describe('detection and hostile input', () => {
  it('detects by magic bytes, not by name', () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    assert.equal(detectFamily(png, 'webp'), 'png');
    assert.equal(detectFamily(Buffer.from('II*\0\x08\0\0\0', 'latin1'), 'tiff'), 'tiff');
    assert.equal(detectFamily(Buffer.from('II*\0\x08\0\0\0', 'latin1'), 'nef'), 'raw');
  });

  it('output table: JPG and RAW stay JPG, others by alpha', () => {
    assert.equal(outputFormat('jpeg', true), 'jpg');
    assert.equal(outputFormat('raw', true), 'jpg');
    assert.equal(outputFormat('png', false), 'jpg');
    assert.equal(outputFormat('webp', true), 'png');
  });

  it('empty file', () => failsWith('bad/empty.jpg', /^image\.empty$/));
  it('the image door refuses an empty file on every path', async () => {
    for (const as of [{ declared: 'png', signal: limits.signal }, { kind: 'png' as const }, { embedded: true as const, memory: 'reserve' as const }]) {
      await rejectsWithJobError(openImage(Buffer.alloc(0), as), 'image.empty');
    }
  });
  it('a PDF named .jpg', () => failsWith('bad/actually-pdf.jpg', /^image\.format_mismatch$/));
  it('truncated JPEG', () => failsWith('bad/truncated.jpg', /^image\.truncated$/));
  it('100000×100000 PNG is refused before decoding', () => failsWith('bad/huge-dimensions.png', /^image\.too_many_pixels$/));

  it('a JPG input never grows, and our output resubmitted comes back unchanged', async () => {
    const { result } = await run('jpg/jpeg420exif.jpg');
    assert.equal(result.format, 'jpg');
    const [a, b] = await Promise.all([readFile(result.path), readFile(join(corpus, 'jpg/jpeg420exif.jpg'))]);
    assert.ok(a.length <= b.length);
    const dir = await mkdtemp(join(work, 'job-'));
    const again = await compress({ inputPath: result.path, format: 'jpg', options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} });
    assert.deepEqual(await readFile(again.path), a);
  });
});
