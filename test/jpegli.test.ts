// Issues 39 and 40: jpegli, the JPEG XL project's JPEG encoder, as a form the JPEG search compares with
// mozjpeg's on pictures over about 1 MP and of 0.1-0.5 MP (not on a JPEG re-encoded on its own YCbCr grid,
// nor on a grey picture over 0.5 MP), grey ones with its colour luminance table, its outputs told as
// ours, and mozjpeg's forms alone where it does not load or fails; the program kept serving a thread's
// encodes with the bytes it makes run once.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import type { CompressResult } from '../src/catalog/contract.ts';
import { decodeImage } from '../workers/decoders/index.ts';
import { OUR_FORMS, type JpegForm } from '../workers/image/encode.ts';
import { encodeJpegli, jpegliAvailable, useJpegli } from '../workers/image/jpegli.ts';
import { jpegOrigin } from '../workers/image/jpeg-mark.ts';
import { appSegments } from '../workers/image/jpeg-segments.ts';
import { lumaQuantTable, ourQualityOf } from '../workers/image/jpeg-quant.ts';
import { ssimulacra2 } from '../workers/image/ssimulacra2.ts';
import { compress as jpg } from '../workers/jpg.ts';
import { compress as universal } from '../workers/universal.ts';

const corpus = new URL('../../shared/corpus/', import.meta.url).pathname;
// At the perceived target jpegli 4:2:0 makes this 12 MP phone photo 9 % smaller than mozjpeg's best form.
const HEIC = join(corpus, 'heic/IMG_2682.heic');
const JPEGLI: JpegForm[] = OUR_FORMS.filter((f) => f.table === 'jpegli');
const MOZJPEG: JpegForm[] = OUR_FORMS.filter((f) => f.table !== 'jpegli');

let work: string;
before(() => {
  work = mkdtempSync(join(tmpdir(), 'jpegli-test-'));
  // Where the workers look for it from source (npm test's setup builds it too).
  execFileSync(process.execPath, [new URL('../scripts/jpegli.mjs', import.meta.url).pathname], { stdio: 'inherit' });
  useJpegli();
});
after(() => {
  useJpegli();
  rmSync(work, { recursive: true, force: true });
});

type Compress = typeof jpg;
async function run(compress: Compress, inputPath: string, options = {}): Promise<{ result: CompressResult; data: Buffer }> {
  const dir = await mkdtemp(join(work, 'job-'));
  const result = await compress({ inputPath, format: 'jpg', options }, { dir }, { signal: new AbortController().signal, progress: () => {} });
  return { result, data: await readFile(result.path) };
}

/** The forms among `forms` whose luminance table the file carries (at a quality of the search range). */
async function formsOf(jpeg: Buffer, forms: JpegForm[]): Promise<JpegForm[]> {
  const table = lumaQuantTable(jpeg)!;
  const found = await Promise.all(forms.map(async (form) => ((await ourQualityOf(table, form)) !== undefined ? form : undefined)));
  return found.filter((f) => f !== undefined);
}

async function decoded(file: string | Buffer) {
  const { data, info } = await sharp(file).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

describe('jpegli in the JPEG search', () => {
  it('loads from source and encodes a grey picture as one component, a colour one as three', async () => {
    assert.equal(await jpegliAvailable(), true);
    const grey = await encodeJpegli({ data: new Uint8Array(64 * 48).fill(90), width: 64, height: 48, channels: 1 }, 80, '4:2:0');
    assert.deepEqual([(await sharp(grey).metadata()).channels, (await sharp(grey).metadata()).width], [1, 64]);
    const colour = await encodeJpegli({ data: new Uint8Array(64 * 48 * 3).fill(200), width: 64, height: 48, channels: 3 }, 80, '4:4:4');
    assert.deepEqual([(await sharp(colour).metadata()).channels, (await sharp(colour).metadata()).chromaSubsampling], [3, '4:4:4']);
    // One component takes jpegli's colour luminance table too, not the standard one jpegli gives it.
    for (const chroma of ['4:2:0', '4:4:4'] as const) {
      const greyOne = await encodeJpegli({ data: new Uint8Array(64 * 48).fill(90), width: 64, height: 48, channels: 1 }, 80, chroma);
      const greyThree = await encodeJpegli({ data: new Uint8Array(64 * 48 * 3).fill(90), width: 64, height: 48, channels: 3 }, 80, chroma);
      assert.deepEqual(lumaQuantTable(greyOne), lumaQuantTable(greyThree), chroma);
    }
  });

  it('encodes a grey picture that is its own proxy with jpegli where it is smaller, as ours: resubmitted it comes back unchanged', async () => {
    const input = join(work, 'grey-beer.tif');
    await sharp(join(corpus, 'jpg/craft-beer.jpg')).resize(640).toColourspace('b-w').tiff({ compression: 'lzw' }).toFile(input);
    const { data } = await run(universal, input);
    assert.equal((await sharp(data).metadata()).channels, 1);
    assert.equal((await formsOf(data, JPEGLI)).length > 0, true, 'a jpegli table');
    const reference = await decoded(await sharp(input).toColourspace('srgb').png().toBuffer());
    assert.ok(ssimulacra2(reference, await decoded(await sharp(data).toColourspace('srgb').png().toBuffer())) >= 79.5);
    const path = join(work, 'grey-beer.jpg');
    writeFileSync(path, data);
    assert.deepEqual((await run(jpg, path)).data, data);

    useJpegli(join(work, 'nowhere'));
    try {
      const without = await run(universal, input);
      assert.deepEqual(await formsOf(without.data, JPEGLI), []);
      assert.ok(data.length < without.data.length, `jpegli ${data.length} B, mozjpeg ${without.data.length} B`);
    } finally {
      useJpegli();
    }
  });

  it('is chosen where it is smaller at the target, reaches the target, and its output is ours: resubmitted it comes back unchanged', async () => {
    const { result, data } = await run(universal, HEIC);
    assert.equal((await formsOf(data, JPEGLI)).length > 0, true, 'a jpegli table');
    assert.deepEqual(await formsOf(data, MOZJPEG), []);
    const { decoded: input } = await decodeImage(await readFile(HEIC), 'heic', { maxPixels: 100_000_000, signal: new AbortController().signal });
    const score = ssimulacra2(await decoded(await input.image.toColourspace('srgb').png().toBuffer()), await decoded(data));
    assert.ok(result.perceivedQuality !== undefined && score >= result.perceivedQuality - 3, `SSIMULACRA2 ${score.toFixed(1)}, reported ${result.perceivedQuality}`);
    assert.equal(await jpegOrigin(data), 'ours');
    const again = await run(jpg, result.path);
    assert.deepEqual(again.data, data);

    // Without jpegli the same job takes one of mozjpeg's forms, larger.
    useJpegli(join(work, 'nowhere'));
    try {
      const without = await run(universal, HEIC);
      assert.deepEqual(await formsOf(without.data, JPEGLI), []);
      assert.ok((await formsOf(without.data, MOZJPEG)).length > 0, 'a mozjpeg table');
      assert.ok(data.length < without.data.length, `jpegli ${data.length} B, mozjpeg ${without.data.length} B`);
    } finally {
      useJpegli();
    }
  });

  it('is not compared for a JPEG re-encoded on its own grid, and is once the picture is resized', async () => {
    const photo = join(corpus, 'jpg/jpeg420exif.jpg');
    const same = await run(jpg, photo);
    assert.deepEqual(await formsOf(same.data, JPEGLI), []);
    const dir = mkdtempSync(join(work, 'probe-'));
    const calls = join(dir, 'calls');
    // A stand-in that counts its encodes and makes none: the job then falls back to mozjpeg's forms.
    mkdirSync(join(dir, 'bin'));
    writeFileSync(join(dir, 'bin', 'compressd-jpegli'), `#!/bin/sh\nif [ "$1" = --version ]; then echo 0.11.2; exit 0; fi\necho "$@" >> '${calls}'\nexit 1\n`);
    chmodSync(join(dir, 'bin', 'compressd-jpegli'), 0o755);
    useJpegli(join(dir, 'bin'));
    try {
      await run(jpg, photo);
      assert.throws(() => execFileSync('cat', [calls], { stdio: 'pipe' }), 'no jpegli encode on the input grid');
      const resized = await run(jpg, photo, { resize: { enabled: true, mode: 'pixels', value: 1600 } });
      assert.ok(execFileSync('cat', [calls], { encoding: 'utf8' }).trim().split('\n').length >= 1, 'jpegli compared for the resized picture');
      // Failing on every encode, jpegli left the search to mozjpeg's forms, and the job succeeded.
      assert.ok((await formsOf(resized.data, MOZJPEG)).length > 0);
      assert.equal((await sharp(resized.data).metadata()).width, 1600);
    } finally {
      useJpegli();
    }
  });

  it('is compared for a CMYK JPEG, whose blocks are not those of its sRGB pixels, which carry the profile and EXIF the pipeline writes', async () => {
    const cmyk = join(corpus, 'jpg/baiona_cmyk.jpg');
    const { result, data } = await run(jpg, cmyk);
    assert.equal((await formsOf(data, JPEGLI)).length > 0, true, 'a jpegli table');
    const meta = await sharp(data).metadata();
    assert.deepEqual([meta.space, meta.channels, meta.exif !== undefined], ['srgb', 3, true]);
    assert.equal(meta.icc?.toString('latin1', 36, 40), 'acsp', 'an ICC profile');
    const score = ssimulacra2(await decoded(await sharp(cmyk).toColourspace('srgb').png().toBuffer()), await decoded(data));
    assert.ok(result.perceivedQuality !== undefined && score >= result.perceivedQuality - 0.5, `SSIMULACRA2 ${score.toFixed(1)}, reported ${result.perceivedQuality}`);

    useJpegli(join(work, 'nowhere'));
    try {
      const without = await run(jpg, cmyk);
      assert.ok((await formsOf(without.data, MOZJPEG)).length > 0, 'a mozjpeg table');
      assert.ok(data.length < without.data.length, `jpegli ${data.length} B, mozjpeg ${without.data.length} B`);
      assert.deepEqual(appSegments(data), appSegments(without.data), 'the same metadata either way');
    } finally {
      useJpegli();
    }
  });
});

describe('jpegli kept serving the thread\'s encodes', () => {
  const program = join(new URL('../dist/jpegli/', import.meta.url).pathname, process.arch, 'compressd-jpegli');
  const ppm = (p: { data: Uint8Array; width: number; height: number; channels: number }) =>
    Buffer.concat([Buffer.from(`P${p.channels === 1 ? 5 : 6}\n${p.width} ${p.height}\n255\n`), p.data]);
  const once = (p: Parameters<typeof ppm>[0], quality: number, chroma: string) => execFileSync(program, [String(quality), chroma === '4:2:0' ? '420' : '444'], { input: ppm(p) });
  /** The process ids of the programs serving now. */
  const serving = () =>
    readdirSync('/proc')
      .filter((pid) => /^\d+$/.test(pid))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'latin1') === `${program}\0--serve\0`;
        } catch {
          return false;
        }
      });
  let colour: Awaited<ReturnType<typeof decoded>>;
  let grey: Awaited<ReturnType<typeof decoded>>;
  before(async () => {
    const photo = sharp(join(corpus, 'jpg/jpeg420exif.jpg')).resize(480);
    colour = await decoded(await photo.clone().png().toBuffer());
    const g = await photo.clone().toColourspace('b-w').raw().toBuffer({ resolveWithObject: true });
    grey = { data: g.data, width: g.info.width, height: g.info.height, channels: 1 };
  });

  it('answers with the bytes the program makes run once, one encode or several at a time', async () => {
    for (const [p, quality, chroma] of [[colour, 80, '4:2:0'], [colour, 62, '4:4:4'], [grey, 71, '4:2:0']] as const) {
      assert.deepEqual(await encodeJpegli(p, quality, chroma), once(p, quality, chroma), `${p.channels} channels, q${quality} ${chroma}`);
    }
    const settings = [[80, '4:2:0'], [80, '4:4:4'], [55, '4:4:4']] as const;
    const together = await Promise.all(settings.map(([q, c]) => encodeJpegli(colour, q, c)));
    settings.forEach(([q, c], i) => assert.deepEqual(together[i], once(colour, q, c), `q${q} ${c} at once`));
    assert.ok(serving().length >= 1, 'a program serving');
  });

  it('is started again after it ends; a request it ended under is encoded once instead, the same bytes', async () => {
    await encodeJpegli(colour, 75, '4:2:0');
    const before = serving();
    assert.ok(before.length >= 1);
    for (const pid of before) process.kill(Number(pid), 'SIGKILL');
    assert.deepEqual(await encodeJpegli(colour, 76, '4:2:0'), once(colour, 76, '4:2:0'));
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(await encodeJpegli(colour, 77, '4:2:0'), once(colour, 77, '4:2:0'));
    const after = serving();
    assert.ok(after.length >= 1 && after.every((pid) => !before.includes(pid)), `serving ${after.join(', ')} after ${before.join(', ')}`);
  });

  it('answers each request in turn, and refuses one that is not a request with an error line and ends', () => {
    const pic = ppm(colour);
    const two = spawnSync(program, ['--serve'], { input: Buffer.concat([Buffer.from('80 420\n'), pic, Buffer.from('60 444\n'), pic]) });
    assert.equal(two.status, 0);
    const answers: Buffer[] = [];
    for (let at = 0; at < two.stdout.length; ) {
      const eol = two.stdout.indexOf(10, at);
      const size = Number(/^ok (\d+)$/.exec(two.stdout.subarray(at, eol).toString())![1]);
      answers.push(two.stdout.subarray(eol + 1, eol + 1 + size));
      at = eol + 1 + size;
    }
    assert.deepEqual(answers, [once(colour, 80, '4:2:0'), once(colour, 60, '4:4:4')]);
    const bad = spawnSync(program, ['--serve'], { input: Buffer.concat([Buffer.from('80 422\n'), pic]) });
    assert.deepEqual([bad.status, bad.stdout.toString()], [1, 'error a request is a line QUALITY 444|420, then the picture\n']);
  });
});
