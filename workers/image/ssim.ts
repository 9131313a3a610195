/** Interleaved 8-bit pixels: 1 (grey), 2 (grey+alpha), 3 (RGB) or 4 (RGBA) channels. */
export interface Pixels {
  data: Uint8Array;
  width: number;
  height: number;
  channels: number;
}

const C1 = (0.01 * 255) ** 2;
const C2 = (0.03 * 255) ** 2;

/**
 * Luma of every pixel (BT.601 weights). Transparent pixels are composited over white, so the
 * colour hidden under alpha 0 does not count but a change of opacity does.
 */
export function luma(p: Pixels): Float32Array {
  const { data, width, height, channels: c } = p;
  const n = width * height;
  if (data.length < n * c) throw new RangeError(`pixel buffer too short for ${width}×${height}×${c}`);
  const y = new Float32Array(n);
  const alpha = c === 2 || c === 4;
  for (let i = 0, o = 0; i < n; i++, o += c) {
    let v = c >= 3 ? 0.299 * data[o] + 0.587 * data[o + 1] + 0.114 * data[o + 2] : data[o];
    if (alpha) {
      const a = data[o + c - 1] / 255;
      v = v * a + 255 * (1 - a);
    }
    y[i] = v;
  }
  return y;
}

/**
 * Mean structural similarity of two images of the same size, on luma, at full resolution.
 * Windows are 8×8 pixels on a 4-pixel stride (the x264/ffmpeg layout): each window is the sum
 * of four 4×4 block statistics, so the whole image is read once and the cost is linear
 * (about 30 ms per megapixel). 1 means identical.
 */
export function ssim(a: Pixels, b: Pixels): number {
  if (a.width !== b.width || a.height !== b.height) throw new RangeError(`ssim: sizes differ (${a.width}×${a.height} vs ${b.width}×${b.height})`);
  return ssimOfLuma(luma(a), luma(b), a.width, a.height);
}

/**
 * ssim on luma binned 2×2: what a Bayer sensor recorded of a developed camera RAW, without the
 * demosaicing's guess of the rest (see JudgedAt in encode.ts). Two developers of one RAW file
 * differ at full resolution by more than any JPEG quality; binned, they agree.
 */
export function binnedSsim(a: Pixels, b: Pixels): number {
  if (a.width !== b.width || a.height !== b.height) throw new RangeError(`binnedSsim: sizes differ (${a.width}×${a.height} vs ${b.width}×${b.height})`);
  return ssimOfLuma(bin2x2(luma(a), a.width, a.height), bin2x2(luma(b), b.width, b.height), a.width >> 1, a.height >> 1);
}

/** Mean of every 2×2 block (odd last row or column dropped). */
export function bin2x2(y: Float32Array, width: number, height: number): Float32Array {
  const w = width >> 1;
  const h = height >> 1;
  const out = new Float32Array(w * h);
  for (let j = 0; j < h; j++) {
    const top = 2 * j * width;
    for (let i = 0; i < w; i++) {
      const a = top + 2 * i;
      out[j * w + i] = (y[a] + y[a + 1] + y[a + width] + y[a + width + 1]) / 4;
    }
  }
  return out;
}

export function ssimOfLuma(ya: Float32Array, yb: Float32Array, width: number, height: number): number {
  const pair: LumaPair = { ya, yb, width };
  const bw = width >> 2;
  const bh = height >> 2;
  if (bw < 2 || bh < 2) return wholeSsim(pair, height);
  // Five sums per 4×4 block: Σa, Σb, Σa², Σb², Σab; two block rows are kept at a time.
  let prev = new Float64Array(bw * 5);
  let cur = new Float64Array(bw * 5);
  blockRow(pair, 0, prev);
  let total = 0;
  let count = 0;
  for (let by = 1; by < bh; by++) {
    blockRow(pair, by, cur);
    for (let bx = 0; bx + 1 < bw; bx++) {
      total += windowOfBlocks(prev, cur, bx * 5);
      count++;
    }
    const t = prev;
    prev = cur;
    cur = t;
  }
  return total / count;
}

/** Two luma planes of the same size and their row length. */
interface LumaPair {
  ya: Float32Array;
  yb: Float32Array;
  width: number;
}

/** The five sums of the blocks of block row `by`, as many as `out` holds. */
function blockRow({ ya, yb, width }: LumaPair, by: number, out: Float64Array): void {
  const bw = (out.length / 5) | 0;
  out.fill(0);
  for (let dy = 0; dy < 4; dy++) {
    const row = (by * 4 + dy) * width;
    for (let bx = 0; bx < bw; bx++) {
      let s1 = 0, s2 = 0, saa = 0, sbb = 0, sab = 0;
      for (let k = row + bx * 4, e = k + 4; k < e; k++) {
        const p = ya[k];
        const q = yb[k];
        s1 += p;
        s2 += q;
        saa += p * p;
        sbb += q * q;
        sab += p * q;
      }
      const o = bx * 5;
      out[o] += s1;
      out[o + 1] += s2;
      out[o + 2] += saa;
      out[o + 3] += sbb;
      out[o + 4] += sab;
    }
  }
}

/**
 * SSIM of the window made of blocks `i` and `i` + 1 (offsets into blockRow's sums) of two block
 * rows, `n` pixels in all: the four blocks' sums added, then the SSIM of the means, variances
 * and covariance.
 */
function windowOfBlocks(prev: Float64Array, cur: Float64Array, i: number, n = 64): number {
  const j = i + 5;
  const ma = (prev[i] + prev[j] + cur[i] + cur[j]) / n;
  const mb = (prev[i + 1] + prev[j + 1] + cur[i + 1] + cur[j + 1]) / n;
  const va = Math.max(0, (prev[i + 2] + prev[j + 2] + cur[i + 2] + cur[j + 2]) / n - ma * ma);
  const vb = Math.max(0, (prev[i + 3] + prev[j + 3] + cur[i + 3] + cur[j + 3]) / n - mb * mb);
  const cov = (prev[i + 4] + prev[j + 4] + cur[i + 4] + cur[j + 4]) / n - ma * mb;
  return ((2 * ma * mb + C1) * (2 * cov + C2)) / ((ma * ma + mb * mb + C1) * (va + vb + C2));
}

/** SSIM of the whole image as one window: for images under two blocks either way. */
function wholeSsim({ ya, yb, width }: LumaPair, height: number): number {
  let s1 = 0, s2 = 0, saa = 0, sbb = 0, sab = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const p = ya[y * width + x];
      const q = yb[y * width + x];
      s1 += p;
      s2 += q;
      saa += p * p;
      sbb += q * q;
      sab += p * q;
    }
  }
  // The image is one block, the other three of the window empty (adding zeros leaves each sum exact).
  const sums = Float64Array.of(s1, s2, saa, sbb, sab, 0, 0, 0, 0, 0);
  return windowOfBlocks(sums, new Float64Array(10), 0, width * height);
}
