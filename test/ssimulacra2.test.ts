import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { describe, it, mock } from 'node:test';
import sharp from 'sharp';
import { THREAD_IDLE_MS } from '../src/catalog/contract.ts';
import type { Pixels } from '../workers/image/ssim.ts';
import { idleArenaBytes, Ssimulacra2Reference, ssimulacra2 } from '../workers/image/ssimulacra2.ts';

const quality = new URL('../../shared/quality/ssimulacra2/', import.meta.url).pathname;

async function decode(path: string | Buffer): Promise<Pixels> {
  const { data, info } = await sharp(path).toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

function gradient(width: number, height: number, channels: 3 | 4): Pixels {
  const data = new Uint8Array(width * height * channels);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * channels;
      data[o] = (x * 255) / width;
      data[o + 1] = (y * 255) / height;
      data[o + 2] = 128 + 100 * Math.sin(x / 9);
      if (channels === 4) data[o + 3] = 255;
    }
  }
  return { data, width, height, channels };
}

describe('SSIMULACRA2 against the reference implementation', async () => {
  const rows = (await readFile(`${quality}reference.tsv`, 'utf8')).trim().split('\n').slice(1).map((l) => l.split('\t'));

  it('has the 64 reference pairs', () => assert.equal(rows.length, 64));

  for (const [original, distorted, score, how] of rows) {
    it(`${distorted} (${how}) within 0.5 of ${score}`, async () => {
      const ours = ssimulacra2(await decode(`${quality}${original}`), await decode(`${quality}${distorted}`));
      assert.ok(Math.abs(ours - Number(score)) <= 0.5, `ours ${ours.toFixed(3)}, reference ${score}`);
    });
  }
});

describe('SSIMULACRA2 in use', () => {
  it('scores a picture against itself 100, and a prepared reference scores like a fresh one', async () => {
    const original = await decode(`${quality}denali.png`);
    assert.equal(ssimulacra2(original, original), 100);
    const reference = new Ssimulacra2Reference(original);
    const distorted = [await decode(`${quality}denali.q30-420.jpg`), await decode(`${quality}denali.q85-420.jpg`)];
    const again = distorted.map((d) => reference.score(d));
    assert.deepEqual(again, distorted.map((d) => ssimulacra2(original, d)));
    assert.deepEqual(distorted.map((d) => reference.score(d)), again, 'a reference scores the same every time');
    const early = new Ssimulacra2Reference(original);
    early.prepare();
    assert.deepEqual(distorted.map((d) => early.score(d)), again, 'a reference prepared ahead scores like one prepared at its first score');
    assert.ok(again[0] < again[1]);
  });

  it('keeps a finished reference\'s memory for the next one as long as the pool keeps the idle thread, then lets it go', async () => {
    const original = await decode(`${quality}denali.png`);
    const distorted = await decode(`${quality}denali.q85-420.jpg`);
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const reference = new Ssimulacra2Reference(original);
      const first = reference.score(distorted);
      reference.dispose();
      const held = idleArenaBytes();
      assert.ok(held > 0, 'a disposed reference\'s arena waits for the next reference');
      mock.timers.tick(THREAD_IDLE_MS - 1_000);
      assert.equal(idleArenaBytes(), held, 'still there for a job that comes within the thread\'s idle time');
      const next = new Ssimulacra2Reference(original);
      assert.equal(next.score(distorted), first, 'a reused arena scores the same');
      assert.ok(idleArenaBytes() < held, 'the next reference took an idle arena');
      next.dispose();
      mock.timers.tick(THREAD_IDLE_MS);
      assert.equal(idleArenaBytes(), 0, 'idle arenas are let go when the pool would let the idle thread go');
    } finally {
      mock.timers.reset();
    }
  });

  it('gives a reference the smallest idle arena that holds it, so that a larger one is there for a larger reference', () => {
    const [big, small] = [gradient(512, 512, 3), gradient(128, 128, 3)];
    const noisy = (p: Pixels) => ({ ...p, data: p.data.map((v) => v ^ 4) });
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      mock.timers.tick(THREAD_IDLE_MS);
      assert.equal(idleArenaBytes(), 0);
      // A search's two references, a quarter-size proxy's and a full one's, given back at its end.
      const [first, second] = [new Ssimulacra2Reference(small), new Ssimulacra2Reference(big)];
      const scores = [first.score(noisy(small)), second.score(noisy(big))];
      first.dispose();
      second.dispose();
      const both = idleArenaBytes();
      // The next search's, in the same order.
      const [again, againBig] = [new Ssimulacra2Reference(small), new Ssimulacra2Reference(big)];
      assert.equal(again.score(noisy(small)), scores[0]);
      assert.ok(idleArenaBytes() > both / 2, `the small reference took the small arena (${idleArenaBytes()} of ${both} bytes still idle)`);
      assert.equal(againBig.score(noisy(big)), scores[1]);
      assert.equal(idleArenaBytes(), 0, 'and the large one the large arena, without a new one');
      again.dispose();
      againBig.dispose();
      assert.equal(idleArenaBytes(), both, 'neither had to grow');
    } finally {
      mock.timers.tick(THREAD_IDLE_MS);
      mock.timers.reset();
    }
  });

  it('keeps both backgrounds\' arenas of a transparent picture as large as a search\'s own proxy', () => {
    // 1,616 × 855, the size of a transparent logo that is its own proxy: its palette search scores it over a dark and a light background.
    const original = gradient(1616, 855, 4);
    for (let o = 3; o < original.data.length; o += 4) original.data[o] = (o >> 2) % 1616 < 400 ? 0 : 255;
    const distorted = { ...original, data: original.data.map((v, i) => (i % 4 === 3 ? v : v ^ 4)) };
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      ssimulacra2(gradient(16, 16, 3), gradient(16, 16, 3));
      mock.timers.tick(THREAD_IDLE_MS);
      assert.equal(idleArenaBytes(), 0);
      const reference = new Ssimulacra2Reference(original);
      reference.score(distorted);
      reference.dispose();
      // Each arena holds this picture's reference and a score's scratch: about 90 bytes a pixel.
      const pixels = original.width * original.height;
      assert.ok(idleArenaBytes() >= 2 * 85 * pixels, `both arenas kept for the next search (idle: ${idleArenaBytes()} bytes)`);
    } finally {
      mock.timers.tick(THREAD_IDLE_MS);
      mock.timers.reset();
    }
  });

  it('sees colour: a hue shift luma SSIM cannot see costs points', async () => {
    const original = gradient(256, 192, 3);
    const shifted = { ...original, data: Uint8Array.from(original.data) };
    // Red and blue traded at equal luma weight: each pixel's BT.601 luma moves by under one level.
    for (let o = 0; o < shifted.data.length; o += 3) {
      const [r, b] = [shifted.data[o], shifted.data[o + 2]];
      const luma = 0.299 * r + 0.114 * b;
      const r2 = Math.min(255, Math.round(r * 0.8 + 20));
      shifted.data[o] = r2;
      shifted.data[o + 2] = Math.max(0, Math.min(255, Math.round((luma - 0.299 * r2) / 0.114)));
    }
    assert.ok(ssimulacra2(original, shifted) < 90);
  });

  it('takes grey, RGBA and small pictures; refuses pictures of different sizes', () => {
    const rgba = gradient(64, 48, 4);
    assert.equal(ssimulacra2(rgba, rgba), 100);
    const grey: Pixels = { data: new Uint8Array(64 * 48).fill(90), width: 64, height: 48, channels: 1 };
    assert.ok(ssimulacra2(grey, { ...grey, data: new Uint8Array(64 * 48).fill(100) }) < 100);
    const tiny: Pixels = { data: new Uint8Array(5 * 5 * 3).fill(7), width: 5, height: 5, channels: 3 };
    assert.equal(ssimulacra2(tiny, tiny), 100);
    assert.throws(() => ssimulacra2(rgba, gradient(64, 47, 4)), RangeError);
  });

  it('scores transparency: a picture made transparent is not the same picture', () => {
    const opaque = gradient(96, 64, 4);
    const clear = { ...opaque, data: Uint8Array.from(opaque.data) };
    for (let o = 3; o < clear.data.length; o += 4) clear.data[o] = 0;
    assert.ok(ssimulacra2(opaque, clear) < 50);
    // Prepared ahead, only the first background is made; the second still is when scored.
    const early = new Ssimulacra2Reference(clear);
    early.prepare();
    assert.equal(early.score(opaque), ssimulacra2(clear, opaque));
  });

  it('answers "under it?" as the full score does whichever background a reference tries first, and passing scores exactly', () => {
    // A translucent picture, and versions that fail on the light background only, on the dark one only, or pass.
    const original = gradient(96, 64, 4);
    for (let o = 3; o < original.data.length; o += 4) original.data[o] = 96 + (o % 128);
    const changed = (step: (o: number, d: Uint8Array) => void): Pixels => {
      const data = Uint8Array.from(original.data);
      for (let o = 0; o < data.length; o += 4) step(o, data);
      return { ...original, data };
    };
    const darker = changed((o, d) => d.fill(0, o, o + 3));
    const lighter = changed((o, d) => d.fill(255, o, o + 3));
    const close = changed((o, d) => (d[o] = Math.min(255, d[o]! + 1)));
    const versions = [darker, lighter, darker, close, lighter, close, darker];
    const full = versions.map((v) => ssimulacra2(original, v));
    const bar = 90;
    assert.ok(full.some((f) => f < bar) && full.some((f) => f >= bar), full.join(' '));
    const reference = new Ssimulacra2Reference(original);
    try {
      versions.forEach((v, i) => {
        const quick = reference.score(v, bar);
        if (full[i]! >= bar) assert.equal(quick, full[i], `version ${i} passes: its exact score`);
        else assert.ok(quick < bar && quick >= full[i]!, `version ${i}: ${quick} under ${bar}, not under its full ${full[i]}`);
      });
    } finally {
      reference.dispose();
    }
  });

  it('scores bit for bit as recorded: odd sizes, grey, alpha, in memory an earlier reference used', () => {
    // A grey ramp, and with a seed the same plus a little hashed noise; alpha (2 or 4 channels) varies.
    const pattern = (width: number, height: number, channels: number, seed: number): Pixels => {
      const data = new Uint8Array(width * height * channels);
      for (let i = 0; i < data.length; i++) {
        const p = Math.floor(i / channels);
        const [x, y, c] = [p % width, Math.floor(p / width), i % channels];
        const noise = (Math.imul(p + seed, 2654435761) >>> 27) & (seed ? 3 : 0);
        data[i] = channels % 2 === 0 && c === channels - 1 ? 255 - ((x * 7 + y * 3) % 64) : (x * 3 + y * 5 + c * 40 + noise) & 255;
      }
      return { data, width, height, channels };
    };
    // Recorded with the kernels before arenas were reused and the blur lost its transposes: the
    // float32 arithmetic is the reference's, so any change to a score is a change to the metric.
    const recorded: [number, number, number, number][] = [
      [1001, 333, 3, 59.4210913641933],
      [333, 1001, 4, 60.87324826864152],
      [13, 517, 1, 73.24545678411059],
      [517, 13, 2, 76.05291449182292],
      [7, 9, 3, 100],
    ];
    for (const [width, height, channels, score] of recorded) {
      assert.equal(ssimulacra2(pattern(width, height, channels, 0), pattern(width, height, channels, 1)), score, `${width}×${height}×${channels}`);
    }
  });

  it('scores a 24 MP picture whole (its planes lie past 2 GiB of the module\'s memory)', () => {
    const big = gradient(6000, 4000, 3);
    const shifted = { ...big, data: Uint8Array.from(big.data, (v, i) => (i % 3 === 1 ? Math.min(255, v + 3) : v)) };
    const score = ssimulacra2(big, shifted);
    assert.ok(Number.isFinite(score) && score < 100 && score > 50, `${score}`);
  });

  it('the committed WebAssembly modules (the metric, GIF\'s LZW encoder) are the builds of their C sources', () => {
    execFileSync(process.execPath, ['scripts/build-wasm.mjs', '--check'], { stdio: 'pipe' });
  });
});
