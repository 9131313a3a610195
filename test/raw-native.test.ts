// Issue 40: camera RAW developed natively (Debian's LibRaw in a helper process), with LibRaw in
// WebAssembly where the native library does not load and for every file it does not develop whole.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeRaw, decodeRawWasm } from '../workers/decoders/raw.ts';
import { developNatively, probeNativeRaw, useNativeRaw } from '../workers/decoders/raw-native.ts';
import type { NativeProgram } from '../workers/decoders/native-program.ts';
import type { Decoded } from '../workers/decoders/types.ts';
import { rejectsWithJobError } from './helpers/job-error.ts';

const corpus = new URL('../../shared/corpus/raw/', import.meta.url).pathname;
const DEVELOPED = ['canon-eos-6d-photoprism-lossy.dng', 'canon-eos-kiss-x4-tinydng.dng', 'derived-craft-beer-orientation6.dng', 'derived-pixel-IMG_20180725_163423.dng'];
const limits = (maxPixels = 100_000_000) => ({ maxPixels, signal: new AbortController().signal });

let work: string;
let dir: string;
let raw: NativeProgram;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'raw-native-'));
  // Where the workers look for it from source (scripts/raw-decoder.mjs; npm test builds it too).
  dir = new URL(`../dist/raw-decoder/${process.arch}`, import.meta.url).pathname;
  execFileSync(process.execPath, [new URL('../scripts/raw-decoder.mjs', import.meta.url).pathname, '--arch', process.arch], { stdio: 'inherit' });
  const probed = await probeNativeRaw(dir);
  assert.ok(probed, `the native RAW decoder built in ${dir} does not load`);
  raw = probed;
  useNativeRaw(dir);
});
after(() => {
  useNativeRaw();
  rmSync(work, { recursive: true, force: true });
});

const pixelsOf = async (d: Decoded) => d.image.raw().toBuffer({ resolveWithObject: true });

type Outcome = { via: string; shape: number[]; data: Buffer; exif?: string } | { code: string };

/** Either the decoded picture (its path, size, pixels and EXIF) or the failure's code. */
async function outcome(decode: Promise<Decoded>): Promise<Outcome> {
  try {
    const d = await decode;
    const { data, info } = await pixelsOf(d);
    return { via: d.via, shape: [info.width, info.height, info.channels], data, exif: d.exif?.toString('hex') };
  } catch (err) {
    return { code: (err as { code?: string }).code ?? (err as Error).message };
  }
}

describe('camera RAW through the native LibRaw', () => {
  it('says its version: Debian bookworm\'s LibRaw 0.20', () => {
    assert.match(raw.version, /^0\.20\.\d+$/);
  });

  for (const name of DEVELOPED) {
    it(`${name}: the same picture and EXIF as LibRaw in WebAssembly, within rounding`, async () => {
      const bytes = await readFile(join(corpus, name));
      const native = await outcome(decodeRaw(bytes, limits()));
      const wasm = await outcome(decodeRawWasm(bytes, limits()));
      assert.ok('data' in native && 'data' in wasm, JSON.stringify([native, wasm].map((o) => ('code' in o ? o.code : o.via))));
      assert.equal(native.via, 'libraw');
      assert.deepEqual(native.shape, wasm.shape);
      assert.equal(native.exif, wasm.exif);
      let over2 = 0;
      for (let i = 0; i < native.data.length; i++) if (Math.abs(native.data[i] - wasm.data[i]) > 2) over2++;
      // Measured: at most 0.0011 % (clipped highlights where the WebAssembly build writes 0 for 255).
      assert.ok(over2 / native.data.length < 1e-4, `${over2} of ${native.data.length} samples more than 2 apart`);
    });
  }

  it('every other corpus RAW file ends as it does in WebAssembly (its error, or its preview)', async () => {
    for (const name of readdirSync(corpus).filter((f) => !DEVELOPED.includes(f))) {
      const bytes = await readFile(join(corpus, name));
      const native = await outcome(decodeRaw(bytes, limits()));
      const wasm = await outcome(decodeRawWasm(bytes, limits()));
      assert.deepEqual('code' in native ? native.code : native.via, 'code' in wasm ? wasm.code : wasm.via, name);
    }
  });

  it('declines what it cannot develop whole, before unpacking: a stripped file, a cut one, a foreign one', async () => {
    const stripped = await readFile(join(corpus, 'exiftool-Panasonic.rw2'));
    assert.equal(await developNatively(raw, stripped, limits(), 32), undefined);
    const whole = await readFile(join(corpus, 'canon-eos-kiss-x4-tinydng.dng'));
    assert.equal(await developNatively(raw, whole.subarray(0, whole.length >> 1), limits(), 32), undefined);
    assert.equal(await developNatively(raw, Buffer.from('not a raw file at all'), limits(), 32), undefined);
    await rejectsWithJobError(decodeRaw(whole.subarray(0, whole.length >> 1), limits()), 'raw.no_image_data');
  });

  it('refuses a sensor over the pixel limit before developing it', async () => {
    const bytes = await readFile(join(corpus, 'canon-eos-kiss-x4-tinydng.dng'));
    await rejectsWithJobError(developNatively(raw, bytes, limits(1_000_000), 32), 'image.too_many_pixels');
  });

  it("fails a development that needs more memory than its sensor's size allows, naming the bound, without trying WebAssembly", async () => {
    const bytes = await readFile(join(corpus, 'derived-pixel-IMG_20180725_163423.dng'));
    const tight = { ...raw, memory: { baseBytes: 8 * 1024 ** 2, bytesPerPixel: 1 } };
    const failure = await rejectsWithJobError(developNatively(tight, bytes, limits(), 32), 'image.decode_failed');
    // The file's 23.5 MB, 8 MB and a byte for each of its 12.2 MP.
    assert.match(failure.message, /more memory than a picture of the size it declares may take \(43 MB\)/);
    assert.ok(await developNatively(raw, bytes, limits(), 32), 'at the default bound it develops');
  });

  it('falls back to WebAssembly where the native libraries do not load', async () => {
    const broken = join(work, 'broken');
    cpSync(dir, broken, { recursive: true });
    writeFileSync(join(broken, 'libraw.so.20'), '');
    assert.equal(await probeNativeRaw(broken), undefined);
    useNativeRaw(broken);
    try {
      const bytes = await readFile(join(corpus, 'canon-eos-6d-photoprism-lossy.dng'));
      const decoded = await outcome(decodeRaw(bytes, limits()));
      const wasm = await outcome(decodeRawWasm(bytes, limits()));
      assert.ok('data' in decoded && 'data' in wasm);
      assert.ok(decoded.data.equals(wasm.data), 'the WebAssembly pixels');
    } finally {
      useNativeRaw(dir);
    }
  });
});
