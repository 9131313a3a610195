// The per-pixel kernels of SSIMULACRA2 (workers/image/ssimulacra2.ts orchestrates them), compiled
// to WebAssembly with 128-bit SIMD by scripts/build-wasm.mjs. Freestanding: no libc; the caller
// places every plane in this module's memory and passes offsets.
#include <stdint.h>
#include <wasm_simd128.h>

typedef float f32;

// Linear light of each sRGB code value, filled by the caller.
static f32 LINEAR[256];

__attribute__((export_name("linear_table"))) f32 *linear_table(void) { return LINEAR; }

// 8-bit interleaved pixels (1-4 channels; 2 and 4 carry alpha) to linear planes, transparent
// pixels over a grey of linear level bg.
__attribute__((export_name("to_linear")))
void to_linear(const uint8_t *px, int n, int c, f32 bg, f32 *r, f32 *g, f32 *b) {
  int alpha = c == 2 || c == 4;
  for (int i = 0; i < n; i++, px += c) {
    f32 vr = LINEAR[px[0]];
    f32 vg = c >= 3 ? LINEAR[px[1]] : vr;
    f32 vb = c >= 3 ? LINEAR[px[2]] : vr;
    if (alpha) {
      f32 a = px[c - 1] * (1.0f / 255.0f);
      vr = vr * a + bg * (1 - a);
      vg = vg * a + bg * (1 - a);
      vb = vb * a + bg * (1 - a);
    }
    r[i] = vr;
    g[i] = vg;
    b[i] = vb;
  }
}

// 2×2 box average; an odd last row or column is replicated.
__attribute__((export_name("downsample")))
void downsample(const f32 *s, int sw, int sh, f32 *d) {
  int w = (sw + 1) >> 1, h = (sh + 1) >> 1;
  for (int y = 0; y < h; y++) {
    const f32 *r0 = s + 2 * y * sw;
    const f32 *r1 = s + (2 * y + 1 < sh ? 2 * y + 1 : sh - 1) * sw;
    int x = 0;
    // Four at a time while the eight source columns lie in the row, in the same order of additions.
    for (; 2 * x + 8 <= sw; x += 4) {
      v128_t a0 = wasm_v128_load(r0 + 2 * x), b0 = wasm_v128_load(r0 + 2 * x + 4);
      v128_t a1 = wasm_v128_load(r1 + 2 * x), b1 = wasm_v128_load(r1 + 2 * x + 4);
      v128_t sum = wasm_f32x4_add(wasm_i32x4_shuffle(a0, b0, 0, 2, 4, 6), wasm_i32x4_shuffle(a0, b0, 1, 3, 5, 7));
      sum = wasm_f32x4_add(wasm_f32x4_add(sum, wasm_i32x4_shuffle(a1, b1, 0, 2, 4, 6)), wasm_i32x4_shuffle(a1, b1, 1, 3, 5, 7));
      wasm_v128_store(d + y * w + x, wasm_f32x4_mul(wasm_f32x4_splat(0.25f), sum));
    }
    for (; x < w; x++) {
      int x0 = 2 * x, x1 = x0 + 1 < sw ? x0 + 1 : sw - 1;
      d[y * w + x] = 0.25f * (r0[x0] + r0[x1] + r1[x0] + r1[x1]);
    }
  }
}


// Cube roots of four positive values: a first guess from the exponent bits (a third of them,
// through float: the integer's low bits do not matter to a guess), then three Newton steps: float precision (two leave errors that move scores by up to 0.2).
static inline v128_t cbrt4(v128_t v) {
  v128_t bits = wasm_u32x4_trunc_sat_f32x4(wasm_f32x4_mul(wasm_f32x4_convert_u32x4(v), wasm_f32x4_splat(1.0f / 3)));
  v128_t y = wasm_i32x4_add(bits, wasm_i32x4_splat(709921077));
  const v128_t third = wasm_f32x4_splat(1.0f / 3), two = wasm_f32x4_splat(2);
  for (int i = 0; i < 3; i++) y = wasm_f32x4_mul(third, wasm_f32x4_add(wasm_f32x4_mul(two, y), wasm_f32x4_div(v, wasm_f32x4_mul(y, y))));
  return y;
}

static const f32 BIAS = 0.0037930732552754493f;

// Linear RGB to the metric's positive XYB; `want` is a bit set of the planes needed (1 X, 2 Y,
// 4 B; Y is always written). n is rounded up to four: planes are allocated with room for it.
__attribute__((export_name("to_xyb")))
void to_xyb(const f32 *r, const f32 *g, const f32 *b, int n, f32 *ox, f32 *oy, f32 *ob, int want) {
  const f32 cb = wasm_f32x4_extract_lane(cbrt4(wasm_f32x4_splat(BIAS)), 0);
  const v128_t bias = wasm_f32x4_splat(BIAS), cbias = wasm_f32x4_splat(cb), zero = wasm_f32x4_splat(0), half = wasm_f32x4_splat(0.5f);
#define MIX(a, b, c) wasm_f32x4_max(zero, wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_splat(a), R), wasm_f32x4_mul(wasm_f32x4_splat(b), G)), wasm_f32x4_mul(wasm_f32x4_splat(c), B)), bias))
  for (int i = 0; i < n; i += 4) {
    v128_t R = wasm_v128_load(r + i), G = wasm_v128_load(g + i), B = wasm_v128_load(b + i);
    v128_t l = wasm_f32x4_sub(cbrt4(MIX(0.3f, 0.622f, 0.078f)), cbias);
    v128_t m = wasm_f32x4_sub(cbrt4(MIX(0.23f, 0.692f, 0.078f)), cbias);
    v128_t y = wasm_f32x4_mul(half, wasm_f32x4_add(l, m));
    if (want & 1) wasm_v128_store(ox + i, wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(half, wasm_f32x4_sub(l, m)), wasm_f32x4_splat(14.0f)), wasm_f32x4_splat(0.42f)));
    wasm_v128_store(oy + i, wasm_f32x4_add(y, wasm_f32x4_splat(0.01f)));
    if (want & 4) {
      v128_t sc = wasm_f32x4_sub(cbrt4(MIX(0.24342268924547819f, 0.20476744424496821f, 0.5518098665095536f)), cbias);
      wasm_v128_store(ob + i, wasm_f32x4_add(wasm_f32x4_sub(sc, y), wasm_f32x4_splat(0.55f)));
    }
  }
#undef MIX
}

// The recursive Gaussian's coefficients (three terms), set by the caller.
static f32 N2[3], D1[3];
static int RADIUS;

__attribute__((export_name("set_gaussian")))
void set_gaussian(int radius, f32 n1, f32 n3, f32 n5, f32 d1, f32 d3, f32 d5) {
  RADIUS = radius;
  N2[0] = n1; N2[1] = n3; N2[2] = n5;
  D1[0] = d1; D1[1] = d3; D1[2] = d5;
}

// One term's step on four columns: x·n2 − prev2, then + (−d1)·prev with one rounding (the
// reference's fused multiply-add), done in double precision.
static inline v128_t step(v128_t sum, v128_t n2, v128_t prev2, v128_t negd1_lo, v128_t prev) {
  v128_t t = wasm_f32x4_sub(wasm_f32x4_mul(sum, n2), prev2);
  v128_t lo = wasm_f64x2_add(wasm_f64x2_promote_low_f32x4(t), wasm_f64x2_mul(negd1_lo, wasm_f64x2_promote_low_f32x4(prev)));
  v128_t th = wasm_i32x4_shuffle(t, t, 2, 3, 0, 1);
  v128_t ph = wasm_i32x4_shuffle(prev, prev, 2, 3, 0, 1);
  v128_t hi = wasm_f64x2_add(wasm_f64x2_promote_low_f32x4(th), wasm_f64x2_mul(negd1_lo, wasm_f64x2_promote_low_f32x4(ph)));
  return wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(lo), wasm_f32x4_demote_f64x2_zero(hi), 0, 1, 4, 5);
}

static inline int pad4(int v) { return (v + 3) & ~3; }

// The vertical pass over pw columns (a multiple of 4; src's row stride, its padding columns
// zeroed), zeros outside the picture; the first w columns to dst (row stride w). `state` holds
// 6·pw floats: each term's last two rows, the older overwritten by the new one, then the two swapped.
static void vertical(const f32 *src, int pw, int w, int h, f32 *dst, f32 *state) {
  const int N = RADIUS, w4 = w & ~3;
  f32 *p1 = state, *q1 = state + pw, *p3 = state + 2 * pw, *q3 = state + 3 * pw, *p5 = state + 4 * pw, *q5 = state + 5 * pw;
  for (int i = 0; i < 6 * pw; i++) state[i] = 0;
  const v128_t a1 = wasm_f32x4_splat(N2[0]), a3 = wasm_f32x4_splat(N2[1]), a5 = wasm_f32x4_splat(N2[2]);
  const v128_t b1 = wasm_f64x2_splat(-(double)D1[0]), b3 = wasm_f64x2_splat(-(double)D1[1]), b5 = wasm_f64x2_splat(-(double)D1[2]);
  const v128_t zero = wasm_f32x4_splat(0);
  for (int n = -N + 1; n < h; n++) {
    int top = n - N - 1, bottom = n + N - 1;
    const f32 *tr = top >= 0 ? src + top * pw : 0;
    const f32 *br = bottom < h ? src + bottom * pw : 0;
    f32 *out = n >= 0 ? dst + n * w : 0;
    for (int x = 0; x < pw; x += 4) {
      v128_t sum = wasm_f32x4_add(tr ? wasm_v128_load(tr + x) : zero, br ? wasm_v128_load(br + x) : zero);
      v128_t o1 = step(sum, a1, wasm_v128_load(q1 + x), b1, wasm_v128_load(p1 + x));
      v128_t o3 = step(sum, a3, wasm_v128_load(q3 + x), b3, wasm_v128_load(p3 + x));
      v128_t o5 = step(sum, a5, wasm_v128_load(q5 + x), b5, wasm_v128_load(p5 + x));
      wasm_v128_store(q1 + x, o1);
      wasm_v128_store(q3 + x, o3);
      wasm_v128_store(q5 + x, o5);
      if (!out) continue;
      v128_t o = wasm_f32x4_add(wasm_f32x4_add(o1, o3), o5);
      if (x < w4) {
        wasm_v128_store(out + x, o);
      } else {
        f32 lanes[4];
        wasm_v128_store(lanes, o);
        for (int k = 0; k < w - x; k++) out[x + k] = lanes[k];
      }
    }
    f32 *t;
    t = p1; p1 = q1; q1 = t;
    t = p3; p3 = q3; q3 = t;
    t = p5; p5 = q5; q5 = t;
  }
}

// Four rows' values at columns x..x+3 (rows r0..r3) to four vectors, each one column's four rows.
#define TRANSPOSE4(r0, r1, r2, r3, c0, c1, c2, c3) do { \
    v128_t t0_ = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1_ = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5); \
    v128_t t2_ = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7), t3_ = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7); \
    c0 = wasm_i32x4_shuffle(t0_, t1_, 0, 1, 4, 5); c1 = wasm_i32x4_shuffle(t0_, t1_, 2, 3, 6, 7); \
    c2 = wasm_i32x4_shuffle(t2_, t3_, 0, 1, 4, 5); c3 = wasm_i32x4_shuffle(t2_, t3_, 2, 3, 6, 7); \
  } while (0)

// Rows (each of w values), or with m their products with m's rows, interleaved: column x's four
// rows at out + stride·x.
static void interleave(const f32 *const r[4], const f32 *const m[4], int w, f32 *out, int stride) {
  int w4 = w & ~3;
  for (int x = 0; x < w4; x += 4) {
    v128_t c0, c1, c2, c3, v[4];
    for (int k = 0; k < 4; k++) v[k] = m ? wasm_f32x4_mul(wasm_v128_load(r[k] + x), wasm_v128_load(m[k] + x)) : wasm_v128_load(r[k] + x);
    TRANSPOSE4(v[0], v[1], v[2], v[3], c0, c1, c2, c3);
    wasm_v128_store(out + stride * x, c0);
    wasm_v128_store(out + stride * (x + 1), c1);
    wasm_v128_store(out + stride * (x + 2), c2);
    wasm_v128_store(out + stride * (x + 3), c3);
  }
  for (int x = w4; x < w; x++)
    for (int k = 0; k < 4; k++) out[stride * x + k] = m ? r[k][x] * m[k][x] : r[k][x];
}

// The reverse: interleaved columns back to rows; rows past `rows` are not written.
static void deinterleave(const f32 *in, int stride, int w, f32 *const r[4], int rows) {
  int w4 = w & ~3;
  for (int x = 0; x < w4; x += 4) {
    v128_t c0, c1, c2, c3;
    TRANSPOSE4(wasm_v128_load(in + stride * x), wasm_v128_load(in + stride * (x + 1)), wasm_v128_load(in + stride * (x + 2)), wasm_v128_load(in + stride * (x + 3)), c0, c1, c2, c3);
    wasm_v128_store(r[0] + x, c0);
    if (rows > 1) wasm_v128_store(r[1] + x, c1);
    if (rows > 2) wasm_v128_store(r[2] + x, c2);
    if (rows > 3) wasm_v128_store(r[3] + x, c3);
  }
  for (int x = w4; x < w; x++)
    for (int k = 0; k < rows; k++) r[k][x] = in[stride * x + k];
}

// Rows the horizontal pass takes at once.
#define BLOCK 32

__attribute__((export_name("blur_block"))) int blur_block(void) { return BLOCK; }

// The horizontal pass, BLOCK rows at a time: the rows interleaved (column x of the block a row
// of `strip`, 4·ceil(rows/4) floats), the vertical pass down that, and back. Each row's arithmetic
// is the vertical pass's, and the transposes stay in cache. dst has row stride pw, its padding
// columns zeroed. `strip` and `line` hold BLOCK·w floats, `state` 6·BLOCK.
static void horizontal(const f32 *src, const f32 *by, int w, int h, f32 *dst, int pw, f32 *strip, f32 *line, f32 *state) {
  for (int y = 0; y < h; y += BLOCK) {
    int height = h - y < BLOCK ? h - y : BLOCK, stride = pad4(height);
    for (int g = 0; g < height; g += 4) {
      int rows = height - g < 4 ? height - g : 4;
      const f32 *in[4], *in2[4];
      for (int k = 0; k < 4; k++) {
        int at = (y + g + (k < rows ? k : rows - 1)) * w;
        in[k] = src + at;
        in2[k] = by + at;
      }
      interleave(in, by ? in2 : 0, w, strip + g, stride);
    }
    vertical(strip, stride, stride, w, line, state);
    for (int g = 0; g < height; g += 4) {
      int rows = height - g < 4 ? height - g : 4;
      f32 *out[4];
      for (int k = 0; k < 4; k++) out[k] = dst + (y + g + k) * pw;
      deinterleave(line + g, stride, w, out, rows);
      for (int k = 0; k < rows; k++)
        for (int x = w; x < pw; x++) out[k][x] = 0;
    }
  }
}


// The blur of a w×h plane, or with `by` of its product with that plane (the products in float,
// made as the rows are read): rows, then columns. `tmp` holds pad4(w)·h floats, `strip` and `line`
// BLOCK·w each, `state` 6·max(pad4(w), BLOCK).
__attribute__((export_name("blur")))
void blur(const f32 *src, const f32 *by, int w, int h, f32 *dst, f32 *tmp, f32 *strip, f32 *line, f32 *state) {
  int pw = pad4(w);
  horizontal(src, by, w, h, tmp, pw, strip, line, state);
  vertical(tmp, pw, w, h, dst, state);
}

// The SSIM map's sum and sum of fourth powers (out[0], out[1]) and the edge maps' artefact and
// detail-lost sums and sums of fourth powers (out[2..5]); without s22 (0) the SSIM map is skipped.
// Four pixels at a time in float, as the reference computes them; the sums in double.
__attribute__((export_name("maps")))
void maps(const f32 *x1, const f32 *m1, const f32 *s11, const f32 *x2, const f32 *m2, const f32 *s22, const f32 *s12, int n, double *out) {
  const v128_t C2 = wasm_f32x4_splat(0.0009f), one = wasm_f32x4_splat(1), zero = wasm_f32x4_splat(0), two = wasm_f32x4_splat(2);
  v128_t ssim1 = wasm_f64x2_splat(0), ssim4 = ssim1, art1 = ssim1, art4 = ssim1, lost1 = ssim1, lost4 = ssim1;
  int n4 = n & ~3;
#define ACC(sum1, sum4, v) do { \
    v128_t lo = wasm_f64x2_promote_low_f32x4(v), hi = wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(v, v, 2, 3, 0, 1)); \
    sum1 = wasm_f64x2_add(sum1, wasm_f64x2_add(lo, hi)); \
    lo = wasm_f64x2_mul(lo, lo); hi = wasm_f64x2_mul(hi, hi); \
    sum4 = wasm_f64x2_add(sum4, wasm_f64x2_add(wasm_f64x2_mul(lo, lo), wasm_f64x2_mul(hi, hi))); \
  } while (0)
  for (int i = 0; i < n4; i += 4) {
    v128_t mu1 = wasm_v128_load(m1 + i), mu2 = wasm_v128_load(m2 + i);
    if (s22) {
      v128_t diff = wasm_f32x4_sub(mu1, mu2);
      v128_t numM = wasm_f32x4_sub(one, wasm_f32x4_mul(diff, diff));
      v128_t numS = wasm_f32x4_add(wasm_f32x4_mul(two, wasm_f32x4_sub(wasm_v128_load(s12 + i), wasm_f32x4_mul(mu1, mu2))), C2);
      v128_t denS = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_sub(wasm_v128_load(s11 + i), wasm_f32x4_mul(mu1, mu1)), wasm_f32x4_sub(wasm_v128_load(s22 + i), wasm_f32x4_mul(mu2, mu2))), C2);
      v128_t d = wasm_f32x4_max(zero, wasm_f32x4_sub(one, wasm_f32x4_div(wasm_f32x4_mul(numM, numS), denS)));
      ACC(ssim1, ssim4, d);
    }
    v128_t a = wasm_f32x4_abs(wasm_f32x4_sub(wasm_v128_load(x2 + i), mu2));
    v128_t b = wasm_f32x4_abs(wasm_f32x4_sub(wasm_v128_load(x1 + i), mu1));
    v128_t e = wasm_f32x4_sub(wasm_f32x4_div(wasm_f32x4_add(one, a), wasm_f32x4_add(one, b)), one);
    v128_t art = wasm_f32x4_max(zero, e), lost = wasm_f32x4_max(zero, wasm_f32x4_neg(e));
    ACC(art1, art4, art);
    ACC(lost1, lost4, lost);
  }
#undef ACC
  double r[6] = {
      wasm_f64x2_extract_lane(ssim1, 0) + wasm_f64x2_extract_lane(ssim1, 1), wasm_f64x2_extract_lane(ssim4, 0) + wasm_f64x2_extract_lane(ssim4, 1),
      wasm_f64x2_extract_lane(art1, 0) + wasm_f64x2_extract_lane(art1, 1),   wasm_f64x2_extract_lane(art4, 0) + wasm_f64x2_extract_lane(art4, 1),
      wasm_f64x2_extract_lane(lost1, 0) + wasm_f64x2_extract_lane(lost1, 1), wasm_f64x2_extract_lane(lost4, 0) + wasm_f64x2_extract_lane(lost4, 1),
  };
  for (int i = n4; i < n; i++) {
    f32 mu1 = m1[i], mu2 = m2[i];
    if (s22) {
      f32 numM = 1.0f - (mu1 - mu2) * (mu1 - mu2);
      f32 numS = 2 * (s12[i] - mu1 * mu2) + 0.0009f;
      f32 denS = (s11[i] - mu1 * mu1) + (s22[i] - mu2 * mu2) + 0.0009f;
      f32 d = 1.0f - (numM * numS) / denS;
      if (d < 0) d = 0;
      r[0] += d;
      r[1] += ((double)d * d) * ((double)d * d);
    }
    f32 a = x2[i] - mu2, b = x1[i] - mu1;
    f32 e = (1.0f + (a < 0 ? -a : a)) / (1.0f + (b < 0 ? -b : b)) - 1.0f;
    if (e > 0) {
      r[2] += e;
      r[3] += ((double)e * e) * ((double)e * e);
    } else {
      r[4] -= e;
      r[5] += ((double)e * e) * ((double)e * e);
    }
  }
  for (int k = 0; k < 6; k++) out[k] = r[k];
}

extern unsigned char __heap_base;
__attribute__((export_name("heap_base"))) uintptr_t heap_base(void) { return (uintptr_t)&__heap_base; }
