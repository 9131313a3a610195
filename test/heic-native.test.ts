// Issue 40: HEIC and AVIF decoded natively (Debian's libheif with libde265 and dav1d in a helper
// process), with the WebAssembly libheif-js (HEIC) and libvips (AVIF) where the native libraries do not load.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { decodeHeifWasm } from '../workers/decoders/heic.ts';
import { decodeHeifNatively, probeNativeHeif, useNativeHeif, type NativeHeif } from '../workers/decoders/heic-native.ts';
import { memoryArgs, programEnv } from '../workers/decoders/native-program.ts';
import { decodeImage } from '../workers/decoders/index.ts';
import { imageError } from '../workers/image/decode-policy.ts';
import { tiffOf, type RawPixels } from '../workers/decoders/pixels.ts';
import { rejectsWithJobError } from './helpers/job-error.ts';
import { rangeMismatchAvif, tenBitAlphaAvif, tenBitAlphaHeic, tenBitP3Avif } from './helpers/made-files.ts';

const corpus = new URL('../../shared/corpus/', import.meta.url).pathname;
const HEICS = ['heic/IMG_2682.heic', 'heic/HMD_Nokia_8.3_5G.heif', 'heic/file-type-fixture-heic.heic', 'heic/heic-iphone7.heic', 'heic/iphone_13_pro_max.heic'];
const canUnshare = spawnSync('unshare', ['-rm', 'true']).status === 0;
const limits = (maxPixels = 100_000_000) => ({ maxPixels, signal: new AbortController().signal });

let work: string;
let dir: string;
let heif: NativeHeif;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'heic-native-'));
  // Where the workers look for it from source (scripts/heif-decoder.mjs; npm test builds it too).
  dir = new URL(`../dist/heif-decoder/${process.arch}`, import.meta.url).pathname;
  execFileSync(process.execPath, [new URL('../scripts/heif-decoder.mjs', import.meta.url).pathname, '--arch', process.arch], { stdio: 'inherit' });
  const probed = await probeNativeHeif(dir);
  assert.ok(probed, `the native HEIF decoder built in ${dir} does not load`);
  heif = probed;
  useNativeHeif(dir);
});
after(() => {
  useNativeHeif();
  rmSync(work, { recursive: true, force: true });
});

interface Difference {
  max: number;
  mean: number;
  /** Share of the samples more than 2 levels apart. */
  over2: number;
}

function difference(a: RawPixels, b: RawPixels): Difference {
  assert.deepEqual([a.width, a.height, a.channels], [b.width, b.height, b.channels]);
  let max = 0;
  let sum = 0;
  let over2 = 0;
  for (let i = 0; i < a.data.length; i++) {
    const d = Math.abs(a.data[i] - b.data[i]);
    sum += d;
    if (d > max) max = d;
    if (d > 2) over2++;
  }
  return { max, mean: sum / a.data.length, over2: over2 / a.data.length };
}

describe('native HEIC decoding', () => {
  // The WebAssembly build leaves out HEVC's in-loop filters (deblocking, SAO): the two differ only on
  // a few block edges (measured: mean 0.10-0.20 levels, max 10-13, 0.09-0.85 % of samples > 2).
  for (const rel of HEICS) {
    it(`${rel}: the picture of the WebAssembly decoder, bar its unfiltered block edges`, async () => {
      const bytes = await readFile(join(corpus, rel));
      const d = difference(await decodeHeifNatively(heif, bytes, limits()), await decodeHeifWasm(bytes, limits()));
      assert.ok(d.mean < 0.3 && d.over2 < 0.01 && d.max <= 16, JSON.stringify(d));
    });
  }

  it('a 10-bit HEIC with alpha: 8-bit RGBA, alpha kept, as the WebAssembly decoder gives it', async () => {
    const bytes = await readFile(await tenBitAlphaHeic(join(work, 'ten-bit-alpha.heic')));
    const native = await decodeHeifNatively(heif, bytes, limits());
    assert.equal(native.channels, 4);
    const d = difference(native, await decodeHeifWasm(bytes, limits()));
    assert.ok(d.mean < 0.3 && d.over2 < 0.01, JSON.stringify(d));
    const { decoded } = await decodeImage(bytes, 'heic', limits());
    assert.equal(decoded.via, 'libheif');
    const { info } = await decoded.image.raw().toBuffer({ resolveWithObject: true });
    assert.equal(info.channels, 4);
  });

  it("refuses a picture over the pixel budget from libheif's header, with the image door's error", async () => {
    const bytes = await readFile(join(corpus, 'heic/IMG_2682.heic'));
    const failure = await rejectsWithJobError(decodeHeifNatively(heif, bytes, limits(1_000_000)), 'image.too_many_pixels');
    assert.match(failure.message, /4032×3024/);
  });

  it("a decode that needs more memory than its picture's declared size allows fails at once as undecodable, naming the bound", async () => {
    const bytes = await readFile(join(corpus, 'heic/IMG_2682.heic'));
    // Past the bound an allocation fails, or a thread's stack does not fit (with a spare core): both end the program alike.
    const tight = { ...heif, memory: { baseBytes: 8 * 1024 ** 2, bytesPerPixel: 1 } };
    const failure = await rejectsWithJobError(decodeHeifNatively(tight, bytes, limits()), 'image.decode_failed');
    // The file's 0.84 MB, 8 MB and a byte for each of its 12.2 MP.
    assert.match(failure.message, /more memory than a picture of the size it declares may take \(20 MB\)/);
  });

  it('the program is the first process the kernel ends when memory runs out', async () => {
    const child = spawn(join(dir, heif.program), ['100000000', '1', ...memoryArgs(heif)], { env: programEnv(dir), stdio: ['pipe', 'ignore', 'ignore'] });
    try {
      // It says so before it reads its file, which this test never ends.
      let score = '';
      for (let i = 0; i < 100 && score !== '1000'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        score = readFileSync(`/proc/${child.pid}/oom_score_adj`, 'utf8').trim();
      }
      assert.equal(score, '1000');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a file cut short fails as truncated (the WebAssembly decoder left the missing tiles grey); a broken one as undecodable', async () => {
    const whole = await readFile(join(corpus, 'heic/heic-iphone7.heic'));
    const decode = (bytes: Buffer) => decodeHeifNatively(heif, bytes, limits());
    await rejectsWithJobError(decode(whole.subarray(0, Math.floor(whole.length * 0.6))), 'image.truncated');
    await rejectsWithJobError(decode(whole.subarray(0, 3000)), 'image.decode_failed');
    const damaged = Buffer.from(whole);
    damaged.fill(0x5a, 4096, 300_000);
    await rejectsWithJobError(decode(damaged), /^image\.(decode_failed|truncated)$/);
  });

  it("with the container's profile: the pixels read into the end of the TIFF that carries it, the same file tiffOf makes", async () => {
    const bytes = await readFile(join(corpus, 'heic/IMG_2682.heic'));
    const icc = (await sharp(bytes).metadata()).icc;
    assert.ok(icc);
    const plain = await decodeHeifNatively(heif, bytes, limits());
    const tagged = await decodeHeifNatively(heif, bytes, limits(), icc);
    assert.equal(plain.tiff, undefined);
    assert.ok(tagged.tiff && tagged.data.buffer === tagged.tiff.buffer);
    assert.ok(tagged.tiff.equals(tiffOf({ ...plain, icc })));
  });

  it('the picture crosses by a temporary file that is gone when the decode ends, and fails or succeeds; through the pipe where no file can be made', async () => {
    const tmp = join(work, 'tmp');
    mkdirSync(tmp);
    const before = process.env.TMPDIR;
    const whole = await readFile(join(corpus, 'heic/heic-iphone7.heic'));
    try {
      process.env.TMPDIR = tmp;
      const byFile = await decodeHeifNatively(heif, whole, limits());
      assert.equal(byFile.data.length, byFile.width * byFile.height * byFile.channels);
      await rejectsWithJobError(decodeHeifNatively(heif, whole.subarray(0, Math.floor(whole.length * 0.6)), limits()), 'image.truncated');
      await rejectsWithJobError(decodeHeifNatively(heif, whole, limits(1_000_000)), 'image.too_many_pixels');
      assert.deepEqual(readdirSync(tmp), []);
      process.env.TMPDIR = join(work, 'no-such-dir');
      const byPipe = await decodeHeifNatively(heif, whole, limits());
      assert.deepEqual([byPipe.width, byPipe.height, byPipe.channels], [byFile.width, byFile.height, byFile.channels]);
      assert.ok(Buffer.from(byPipe.data).equals(Buffer.from(byFile.data)));
      await rejectsWithJobError(decodeHeifNatively(heif, whole.subarray(0, 3000), limits()), 'image.decode_failed');
    } finally {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
    }
  });

  it('a temporary filesystem too small for the picture: it comes through the pipe, the same pixels', { skip: !canUnshare && 'no user namespaces' }, async () => {
    const small = join(work, 'small-tmp');
    mkdirSync(small);
    const bytes = await readFile(join(corpus, 'heic/heic-iphone7.heic'));
    const here = await decodeHeifNatively(heif, bytes, limits());
    // Inside a mount namespace of its own, with $TMPDIR a 1 MB tmpfs, a process decodes the same file.
    const module = new URL('../workers/decoders/heic-native.ts', import.meta.url).href;
    const script = `const m = await import(${JSON.stringify(module)}); const heif = await m.probeNativeHeif(${JSON.stringify(dir)});
      const p = await m.decodeHeifNatively(heif, Buffer.from(await (await import('node:fs/promises')).readFile(${JSON.stringify(join(corpus, 'heic/heic-iphone7.heic'))})), { maxPixels: 1e8, signal: new AbortController().signal });
      process.stdout.write(JSON.stringify({ width: p.width, height: p.height, sha: (await import('node:crypto')).createHash('sha256').update(p.data).digest('hex') }));`;
    const shell = `mount -t tmpfs -o size=1m tmpfs "${small}" && exec "${process.execPath}" --import tsx --input-type=module -e '${script.replace(/'/g, `'\\''`)}'`;
    const r = spawnSync('unshare', ['-rm', '/bin/sh', '-c', shell], { env: { ...process.env, TMPDIR: small }, encoding: 'utf8', cwd: new URL('..', import.meta.url).pathname });
    assert.equal(r.status, 0, r.stderr);
    // The log's lines first, then the answer.
    const lines = r.stdout.trim().split('\n');
    assert.ok(lines.some((line) => JSON.parse(line).event === 'heic.temporary_file_failed'), r.stdout);
    const sha = createHash('sha256').update(here.data).digest('hex');
    assert.deepEqual(JSON.parse(lines.at(-1)!), { width: here.width, height: here.height, sha });
  });

  it("asks the program's malloc, either of them, for huge pages, keeping what the operator set", () => {
    const env = programEnv('/opt/heif', { LD_LIBRARY_PATH: '/opt/lib', MALLOC_CONF: 'background_thread:true', GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' });
    assert.deepEqual([env.LD_LIBRARY_PATH, env.MALLOC_CONF, env.GLIBC_TUNABLES], ['/opt/lib:/opt/heif', 'background_thread:true,thp:always', 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1']);
    const bare = programEnv('/opt/heif', {});
    assert.deepEqual([bare.LD_LIBRARY_PATH, bare.MALLOC_CONF, bare.GLIBC_TUNABLES], ['/opt/heif', 'thp:always', 'glibc.malloc.hugetlb=1']);
  });

  it('falls back to WebAssembly where the native libraries do not load', async () => {
    const broken = join(work, 'broken');
    cpSync(dir, broken, { recursive: true });
    writeFileSync(join(broken, 'libheif.so.1'), '');
    assert.equal(await probeNativeHeif(broken), undefined);
    const bytes = await readFile(join(corpus, 'heic/IMG_2682.heic'));
    useNativeHeif(broken);
    try {
      const { decoded } = await decodeImage(bytes, 'heic', limits());
      assert.equal(decoded.via, 'libheif-wasm');
      const wasm = await decodeHeifWasm(bytes, limits());
      const { data, info } = await decoded.image.keepIccProfile().raw().toBuffer({ resolveWithObject: true });
      assert.equal(difference({ data, width: info.width, height: info.height, channels: 3 }, wasm).max, 0);
    } finally {
      useNativeHeif(dir);
    }
  });
});

describe('native AVIF decoding', () => {
  const AVIFS = ['avif/Irvine_CA.avif', 'avif/immich-8bit-sRGB.avif', 'avif/immich-10bit-HDR-P3-nclx.avif', 'avif/file-type-sequence-animated.avif'];
  let broken: string;
  before(() => {
    broken = join(work, 'no-native-avif');
    cpSync(dir, broken, { recursive: true });
    writeFileSync(join(broken, 'libdav1d.so.6'), '');
  });

  /** The picture as the universal compressor normalises it (8-bit sRGB), and which path decoded it. */
  async function shown(bytes: Buffer, native: boolean): Promise<{ via: string; pixels: RawPixels }> {
    useNativeHeif(native ? dir : broken);
    try {
      const { decoded } = await decodeImage(bytes, 'avif', limits());
      const { data, info } = await decoded.image.rotate().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
      return { via: decoded.via, pixels: { data, width: info.width, height: info.height, channels: info.channels } };
    } finally {
      useNativeHeif(dir);
    }
  }

  it("a file past the helper's memory bound fails as undecodable, not read again by libvips in the server", async () => {
    const bytes = await readFile(join(corpus, 'avif/immich-8bit-sRGB.avif'));
    useNativeHeif(dir, { baseBytes: 8 * 1024 ** 2, bytesPerPixel: 1 });
    try {
      const failure = await rejectsWithJobError(decodeImage(bytes, 'avif', limits()), 'image.decode_failed');
      assert.match(failure.message, /more memory than a picture of the size it declares may take \(10 MB\)/);
    } finally {
      useNativeHeif(dir);
    }
    assert.equal((await decodeImage(bytes, 'avif', limits())).decoded.via, 'libheif');
  });

  // The helper carries dav1d; where it does not load, libvips decodes (sharp's libheif and dav1d).
  const cases: [string, () => Promise<string>][] = [
    ...AVIFS.map((rel): [string, () => Promise<string>] => [rel, async () => join(corpus, rel)]),
    ['a made 10-bit 4:4:4 AVIF with alpha', () => tenBitAlphaAvif(join(work, 'ten-bit-alpha.avif'))],
    ['a made AVIF whose colr says full range and its bitstream limited', () => rangeMismatchAvif(join(work, 'range-mismatch.avif'))],
  ];
  for (const [name, file] of cases) {
    it(`${name}: by the helper, the picture libvips decodes, within a level`, async () => {
      const bytes = await readFile(await file());
      const [native, vips] = [await shown(bytes, true), await shown(bytes, false)];
      assert.deepEqual([native.via, vips.via], ['libheif', 'sharp:heif']);
      assert.ok(difference(native.pixels, vips.pixels).max <= 1, JSON.stringify(difference(native.pixels, vips.pixels)));
    });
  }

  it('samples deeper than 8 bits in a profile of their own stay with libvips, converted at 16 bits', async () => {
    const bytes = await readFile(await tenBitP3Avif(join(work, 'ten-bit-p3.avif')));
    assert.ok((await sharp(bytes).metadata()).icc);
    assert.equal((await shown(bytes, true)).via, 'sharp:heif');
  });

  it('a file the helper cannot decode fails with the code libvips gives it, and its pixel budget first', async () => {
    const whole = await readFile(join(corpus, 'avif/immich-8bit-sRGB.avif'));
    for (const bytes of [whole.subarray(0, Math.floor(whole.length * 0.6)), whole.subarray(0, 600)]) {
      const codes: string[] = [];
      for (const native of [true, false]) {
        useNativeHeif(native ? dir : broken);
        try {
          await decodeImage(bytes, 'avif', limits()).then((d) => d.decoded.image.raw().toBuffer());
          codes.push('decoded');
        } catch (err) {
          // libvips fails lazily, when the pixels are asked for; the compressors map that as the door does.
          codes.push(imageError(err).code);
        } finally {
          useNativeHeif(dir);
        }
      }
      assert.equal(codes[0], codes[1]);
      assert.match(codes[0], /^image\./);
    }
    await rejectsWithJobError(decodeImage(whole, 'avif', limits(1_000_000)), 'image.too_many_pixels');
  });
});
