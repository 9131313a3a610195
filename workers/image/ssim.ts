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

export function ssimOfLuma(ya: Float32Array, yb: Float32Array, width: number, height: number): number {
  const bw = width >> 2;
  const bh = height >> 2;
  if (bw < 2 || bh < 2) return windowSsim(ya, yb, width, 0, 0, width, height);
  // Five sums per 4×4 block: Σa, Σb, Σa², Σb², Σab; two block rows are kept at a time.
  let prev = new Float64Array(bw * 5);
  let cur = new Float64Array(bw * 5);
  blockRow(ya, yb, width, 0, bw, prev);
  let total = 0;
  let count = 0;
  for (let by = 1; by < bh; by++) {
    blockRow(ya, yb, width, by, bw, cur);
    for (let bx = 0; bx + 1 < bw; bx++) {
      const i = bx * 5;
      const j = i + 5;
      const s1 = prev[i] + prev[j] + cur[i] + cur[j];
      const s2 = prev[i + 1] + prev[j + 1] + cur[i + 1] + cur[j + 1];
      const saa = prev[i + 2] + prev[j + 2] + cur[i + 2] + cur[j + 2];
      const sbb = prev[i + 3] + prev[j + 3] + cur[i + 3] + cur[j + 3];
      const sab = prev[i + 4] + prev[j + 4] + cur[i + 4] + cur[j + 4];
      total += fromSums(s1, s2, saa, sbb, sab, 64);
      count++;
    }
    const t = prev;
    prev = cur;
    cur = t;
  }
  return total / count;
}

function blockRow(ya: Float32Array, yb: Float32Array, width: number, by: number, bw: number, out: Float64Array): void {
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

function fromSums(s1: number, s2: number, saa: number, sbb: number, sab: number, n: number): number {
  const ma = s1 / n;
  const mb = s2 / n;
  const va = Math.max(0, saa / n - ma * ma);
  const vb = Math.max(0, sbb / n - mb * mb);
  const cov = sab / n - ma * mb;
  return ((2 * ma * mb + C1) * (2 * cov + C2)) / ((ma * ma + mb * mb + C1) * (va + vb + C2));
}

function windowSsim(ya: Float32Array, yb: Float32Array, width: number, x0: number, y0: number, w: number, h: number): number {
  let s1 = 0, s2 = 0, saa = 0, sbb = 0, sab = 0;
  for (let y = y0; y < y0 + h; y++) {
    for (let x = x0; x < x0 + w; x++) {
      const p = ya[y * width + x];
      const q = yb[y * width + x];
      s1 += p;
      s2 += q;
      saa += p * p;
      sbb += q * q;
      sab += p * q;
    }
  }
  return fromSums(s1, s2, saa, sbb, sab, w * h);
}
