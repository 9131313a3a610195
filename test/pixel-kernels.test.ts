// The whole-picture pixel loops in WebAssembly (workers/image/pixels) against their plain
// definitions, written here the slow way: a grey picture found and converted, the PDF page
// view's area average and bilinear magnification, and PNG row filters. Equal byte for byte, on
// random and structured pictures, across the bands the kernels are fed in.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { greyOf } from '../workers/image/door.ts';
import { asSeen } from '../workers/pdf/quality.ts';
import { encodeFlateImage } from '../workers/pdf/flate.ts';
import { inflateSync } from 'node:zlib';
import type { Pixels } from '../workers/image/ssim.ts';

let seed = 0x2545f491;
const random = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);

/** Pixels of a kind: noise, a gradient, two levels, or noise a few codes deep. */
function picture(width: number, height: number, channels: number, kind: 'noise' | 'gradient' | 'bilevel' | 'faint'): Pixels {
  const data = new Uint8Array(width * height * channels);
  for (let i = 0; i < data.length; i++) {
    const p = Math.floor(i / channels);
    data[i] = kind === 'noise' ? Math.floor(random() * 256) : kind === 'gradient' ? ((p % width) * 255) / Math.max(1, width - 1) + (i % channels) * 7 : kind === 'bilevel' ? (random() < 0.5 ? 0 : 255) : 100 + Math.floor(random() * 3);
  }
  return { data, width, height, channels };
}

/** A picture whose R, G and B are within `spread` of each other. */
function greyish({ data, width, height, channels }: Pixels, spread: number): Pixels {
  const out = new Uint8Array(data);
  for (let i = 0; i < width * height; i++) {
    const v = out[i * channels];
    out[i * channels + 1] = Math.min(255, v + Math.floor(random() * (spread + 1)));
    out[i * channels + 2] = Math.max(0, v - Math.floor(random() * (spread + 1)));
  }
  return { data: out, width, height, channels };
}

const seen = (v: number): number => Math.round(Math.fround(v));

function greyDefined({ data, width, height, channels: c }: Pixels, tolerance: number): Uint8Array | undefined {
  const out = new Uint8Array(width * height);
  for (let i = 0; i < width * height; i++) {
    const [r, g, b] = [data[i * c], data[i * c + 1], data[i * c + 2]];
    if (Math.max(Math.abs(r - g), Math.abs(g - b), Math.abs(r - b)) > tolerance) return undefined;
    out[i] = Math.round(0.299 * r + 0.587 * g + 0.114 * b);
  }
  return out;
}

/** The page view reduced: each screen pixel the plain average of the columns ⌊x·w/W⌋ … and rows it covers. */
function boxDefined({ data, width: w, height: h, channels: c }: Pixels, W: number, H: number): Uint8Array {
  const from = (x: number, n: number, N: number) => Math.min(n - 1, Math.floor((x * n) / N));
  const to = (x: number, n: number, N: number) => Math.max(from(x, n, N) + 1, Math.floor(((x + 1) * n) / N));
  const out = new Uint8Array(W * H * c);
  for (let r = 0; r < H; r++)
    for (let x = 0; x < W; x++)
      for (let k = 0; k < c; k++) {
        let sum = 0;
        for (let i = from(r, h, H); i < to(r, h, H); i++) for (let j = from(x, w, W); j < to(x, w, W); j++) sum += data[(i * w + j) * c + k];
        out[(r * W + x) * c + k] = seen(sum / ((to(r, h, H) - from(r, h, H)) * (to(x, w, W) - from(x, w, W))));
      }
  return out;
}

/** The page view magnified: bilinear, pixel centres aligned, the column weight a float32. */
function bilinearDefined({ data, width: w, height: h, channels: c }: Pixels, W: number, H: number): Uint8Array {
  const at = (x: number, n: number, N: number) => Math.min(n - 1, Math.max(0, ((x + 0.5) * n) / N - 0.5));
  const out = new Uint8Array(W * H * c);
  for (let r = 0; r < H; r++) {
    const sy = at(r, h, H);
    const i = Math.min(h - 2, Math.floor(sy));
    for (let x = 0; x < W; x++) {
      const sx = at(x, w, W);
      const j = Math.min(w - 2, Math.floor(sx));
      const fx = Math.fround(sx - j);
      for (let k = 0; k < c; k++) {
        const row = (y: number) => data[(y * w + j) * c + k] + (data[(y * w + j + 1) * c + k] - data[(y * w + j) * c + k]) * fx;
        out[(r * W + x) * c + k] = seen(row(i) + (row(i + 1) - row(i)) * (sy - i));
      }
    }
  }
  return out;
}

/** Each row prefixed with the PNG filter type whose residuals (as signed bytes) sum least, ties to the lower type. */
function filteredDefined({ data, width, height, channels: c }: Pixels): Uint8Array {
  const n = width * c;
  const out = new Uint8Array(height * (n + 1));
  const paeth = (a: number, b: number, d: number) => {
    const p = a + b - d;
    const [pa, pb, pd] = [Math.abs(p - a), Math.abs(p - b), Math.abs(p - d)];
    return pa <= pb && pa <= pd ? a : pb <= pd ? b : d;
  };
  for (let y = 0; y < height; y++) {
    const at = (yy: number, i: number) => (yy < 0 || i < 0 ? 0 : data[yy * n + i]);
    const predict = [() => 0, (i: number) => at(y, i - c), (i: number) => at(y - 1, i), (i: number) => (at(y, i - c) + at(y - 1, i)) >> 1, (i: number) => paeth(at(y, i - c), at(y - 1, i), at(y - 1, i - c))];
    let best = -1;
    let bestSum = Infinity;
    let bestRow = new Uint8Array(0);
    predict.forEach((p, type) => {
      const row = Uint8Array.from({ length: n }, (_, i) => (at(y, i) - p(i)) & 0xff);
      const sum = row.reduce((s, v) => s + (v < 128 ? v : 256 - v), 0);
      if (sum < bestSum) [best, bestSum, bestRow] = [type, sum, row];
    });
    out[y * (n + 1)] = best;
    out.set(bestRow, y * (n + 1) + 1);
  }
  return out;
}

const KINDS = ['noise', 'gradient', 'bilevel', 'faint'] as const;

describe('pixel kernels in WebAssembly', () => {
  it('find a grey picture and give its luma as defined, and no answer for colour', () => {
    for (const [width, height] of [[1, 1], [15, 3], [17, 40], [301, 223]])
      for (const channels of [3, 4])
        for (const spread of [0, 1, 2]) {
          const p = greyish(picture(width, height, channels, KINDS[(width + spread) % 4]), spread);
          for (const tolerance of [0, 1]) {
            const expected = greyDefined(p, tolerance);
            const got = greyOf(p, tolerance);
            assert.equal(got === undefined, expected === undefined, `${width}×${height}×${channels} spread ${spread} tolerance ${tolerance}`);
            if (expected) assert.deepEqual(new Uint8Array(got!.data), expected);
          }
        }
  });

  it('tell a grey picture of several bands from one with a single colour pixel at its end', () => {
    const p = greyish(picture(2000, 1500, 3, 'gradient'), 0);
    assert.deepEqual(new Uint8Array(greyOf(p, 0)!.data), greyDefined(p, 0));
    p.data[p.data.length - 1] ^= 0x10;
    assert.equal(greyOf(p, 1), undefined);
  });

  it('reduce and magnify the page view as defined', () => {
    for (let t = 0; t < 60; t++) {
      const channels = [1, 3][t % 2];
      const width = 2 + Math.floor(random() * 120);
      const height = 2 + Math.floor(random() * 120);
      const p = picture(width, height, channels, KINDS[t % 4]);
      const W = Math.max(1, Math.round(width * (0.05 + random() * 3.9)));
      const H = Math.max(1, Math.round(height * (0.05 + random() * 3.9)));
      const magnified = W > width && H > height && W < 4 * width && H < 4 * height;
      const view = asSeen(p, W, H);
      assert.deepEqual(new Uint8Array(view.data), magnified ? bilinearDefined(p, W, H) : boxDefined(p, W, H), `${width}×${height}×${channels} → ${W}×${H}`);
    }
    // Magnified 4 times or more, and along one axis only, the view repeats samples (the area average's cells of one).
    for (const [width, height, channels, W, H] of [[5, 3, 1, 40, 30], [3, 4, 3, 13, 17], [60, 2, 3, 30, 9]]) {
      const p = picture(width, height, channels, 'noise');
      assert.deepEqual(new Uint8Array(asSeen(p, W, H).data), boxDefined(p, W, H), `${width}×${height}×${channels} → ${W}×${H}`);
    }
  });

  it('reduce a picture larger than a band as defined', () => {
    const p = picture(2400, 1900, 1, 'noise');
    for (const [W, H] of [[800, 633], [1201, 950]]) assert.deepEqual(new Uint8Array(asSeen(p, W, H).data), boxDefined(p, W, H));
  });

  it('choose and apply PNG row filters as defined, across bands', async () => {
    for (const [width, height, channels, kind] of [[1, 1, 1, 'noise'], [7, 5, 3, 'gradient'], [64, 40, 1, 'faint'], [97, 31, 3, 'bilevel'], [1500, 1000, 3, 'gradient']] as const) {
      const p = picture(width, height, channels, kind);
      const flate = await encodeFlateImage(p.data, { width, colors: channels, bitsPerComponent: 8, palette: false });
      assert.deepEqual(new Uint8Array(inflateSync(flate.data)), filteredDefined(p), `${width}×${height}×${channels} ${kind}`);
    }
  });
});
