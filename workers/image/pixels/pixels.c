// Whole-picture pixel loops (workers/image/pixels/kernels.ts calls them): finding a grey picture,
// the PDF page view's area average and bilinear magnification, and PNG row filters for PDF Flate
// images. On a scanned page of tens of megapixels each was most of a second in JavaScript.
// Compiled to WebAssembly by scripts/build-wasm.mjs; freestanding (no libc), the caller places
// every array in this module's memory. Each gives the bytes its JavaScript definition gave: the
// arithmetic is the same double-precision arithmetic in the same order, and rounding is
// JavaScript's Math.round (halves up), not WebAssembly's nearest (halves to even).
#include <stddef.h>
#include <stdint.h>
#include <wasm_simd128.h>

typedef uint8_t u8;
typedef int32_t i32;

static double js_round(double x) {
  double f = __builtin_floor(x);
  return x - f >= 0.5 ? f + 1 : f;
}

static int absi(int v) { return v < 0 ? -v : v; }

// n pixels of c >= 3 channels -> one grey channel (BT.601 luma, rounded) while every pixel's R,
// G and B are within tol of each other; returns 0 at the first pixel that is not. An exact grey
// is its own luma. Sixteen RGB pixels at a time where all of them are exact greys.
__attribute__((export_name("grey_of")))
int grey_of(const u8 *px, u8 *out, int n, int c, int tol) {
  int i = 0;
  if (c == 3) {
    for (; i + 16 <= n; i += 16, px += 48) {
      v128_t a = wasm_v128_load(px), b = wasm_v128_load(px + 16), d = wasm_v128_load(px + 32);
      v128_t r = wasm_i8x16_shuffle(wasm_i8x16_shuffle(a, b, 0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 0, 0, 0, 0, 0), d, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 20, 23, 26, 29);
      v128_t g = wasm_i8x16_shuffle(wasm_i8x16_shuffle(a, b, 1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 0, 0, 0, 0, 0), d, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 18, 21, 24, 27, 30);
      v128_t bl = wasm_i8x16_shuffle(wasm_i8x16_shuffle(a, b, 2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 0, 0, 0, 0, 0, 0), d, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19, 22, 25, 28, 31);
      if (!wasm_i8x16_all_true(wasm_v128_and(wasm_i8x16_eq(r, g), wasm_i8x16_eq(g, bl)))) break;
      wasm_v128_store(out + i, r);
    }
  }
  for (; i < n; i++, px += c) {
    int r = px[0], g = px[1], b = px[2];
    if (r == g && g == b) out[i] = (u8)r;
    else if (absi(r - g) > tol || absi(g - b) > tol || absi(r - b) > tol) return 0;
    else out[i] = (u8)js_round(0.299 * r + 0.587 * g + 0.114 * b);
  }
  return 1;
}

// A view value as the page view defined it: computed in float32 planes, rounded at the end.
static u8 seen(double v) { return (u8)js_round((double)(float)v); }

// seen(sum / n) for every sum of n samples, for cells of up to LUT_CELLS samples: one division
// per possible sum instead of one per cell (a view of 3000 x 3000 cells of 2 x 2 samples: 9 M
// cells, 1,021 possible sums). A table depends on n alone, so it stays valid across calls.
#define LUT_CELLS 64
#define LUTS 4
static u8 luts[LUTS][255 * LUT_CELLS + 1];
static int lut_n[LUTS];
static int lut_next;

static const u8 *lut_for(int n) {
  for (int i = 0; i < LUTS; i++)
    if (lut_n[i] == n) return luts[i];
  int i = lut_next;
  lut_next = (lut_next + 1) % LUTS;
  lut_n[i] = n;
  for (int sum = 0; sum <= 255 * n; sum++) luts[i][sum] = seen(sum / (double)n);
  return luts[i];
}

// Area average of interleaved samples (w columns, c channels) into H rows of W cells: cell x of
// row r covers columns [x0[x], x1[x]) and rows [y0[r], y1[r]) of `px` (the caller passes a band
// of rows at a time). Sums down the columns first (one pass over each source row, into
// `columns`, w * c integers), then across. The caller keeps each cell's sum below 2^24, where the
// float32 view's sums were exact integers.
__attribute__((export_name("box_view")))
void box_view(const u8 *px, int w, int c, const i32 *x0, const i32 *x1, int W, const i32 *y0, const i32 *y1, int H, uint32_t *columns, u8 *out) {
  int row = w * c;
  for (int r = 0; r < H; r++) {
    const u8 *s = px + (size_t)y0[r] * row;
    for (int j = 0; j < row; j++) columns[j] = s[j];
    for (int i = y0[r] + 1; i < y1[r]; i++) {
      s = px + (size_t)i * row;
      for (int j = 0; j < row; j++) columns[j] += s[j];
    }
    int rows = y1[r] - y0[r];
    for (int x = 0; x < W; x++) {
      int n = rows * (x1[x] - x0[x]);
      const u8 *lut = n <= LUT_CELLS ? lut_for(n) : 0;
      for (int k = 0; k < c; k++) {
        uint32_t sum = 0;
        for (int j = x0[x] * c + k, e = x1[x] * c; j < e; j += c) sum += columns[j];
        *out++ = lut ? lut[sum] : seen(sum / (double)n);
      }
    }
  }
}

// Source row i interpolated across at columns xi + xf.
static void across(const u8 *px, int w, int c, int i, const i32 *xi, const float *xf, int W, double *into) {
  const u8 *y = px + (size_t)i * w * c;
  for (int x = 0; x < W; x++) {
    double f = xf[x];
    const u8 *at = y + xi[x] * c;
    for (int k = 0; k < c; k++) *into++ = at[k] + (at[k + c] - at[k]) * f;
  }
}

// Bilinear magnification of interleaved samples (w x h, c channels, both at least 2) to W x H,
// pixel centres aligned: column positions xi + xf from the caller, rows here; each source row is
// interpolated across once (magnified rows share source rows), then between rows. `top` and
// `bottom` hold W * c doubles each.
__attribute__((export_name("bilinear_view")))
void bilinear_view(const u8 *px, int w, int h, int c, const i32 *xi, const float *xf, int W, int H, double *top, double *bottom, u8 *out) {
  int top_row = -2;
  int n = W * c;
  for (int r = 0; r < H; r++) {
    double sy = ((r + 0.5) * h) / H - 0.5;
    if (sy < 0) sy = 0;
    if (sy > h - 1) sy = h - 1;
    int i = (int)__builtin_floor(sy);
    if (i > h - 2) i = h - 2;
    double fy = sy - i;
    if (i != top_row) {
      if (i == top_row + 1) {
        double *t = top;
        top = bottom;
        bottom = t;
      } else {
        across(px, w, c, i, xi, xf, W, top);
      }
      across(px, w, c, i + 1, xi, xf, W, bottom);
      top_row = i;
    }
    for (int j = 0; j < n; j++) *out++ = seen(top[j] + (bottom[j] - top[j]) * fy);
  }
}

static int cost(u8 v) { return v < 128 ? v : 256 - v; }

static int paeth(int a, int b, int c) {
  int p = a + b - c;
  int pa = absi(p - a), pb = absi(p - b), pc = absi(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

// One PNG filter type on a row into `into`: the sum of absolute residuals, or any sum at least
// `limit` once it reaches it (the row then partly filtered). The first pixel has no left
// neighbour (zeros).
static int64_t filter(int type, const u8 *row, const u8 *above, int n, int colors, u8 *into, int64_t limit) {
  int64_t score = 0;
  int first = colors < n ? colors : n;
  int i = 0;
  switch (type) {
    case 0:
      for (; i < n && score < limit; i++) score += cost(into[i] = row[i]);
      break;
    case 1:
      for (; i < first; i++) score += cost(into[i] = row[i]);
      for (; i < n && score < limit; i++) score += cost(into[i] = (u8)(row[i] - row[i - colors]));
      break;
    case 2:
      for (; i < n && score < limit; i++) score += cost(into[i] = (u8)(row[i] - above[i]));
      break;
    case 3:
      for (; i < first; i++) score += cost(into[i] = (u8)(row[i] - (above[i] >> 1)));
      for (; i < n && score < limit; i++) score += cost(into[i] = (u8)(row[i] - ((row[i - colors] + above[i]) >> 1)));
      break;
    default:
      // With no left neighbour Paeth predicts from above.
      for (; i < first; i++) score += cost(into[i] = (u8)(row[i] - above[i]));
      for (; i < n && score < limit; i++) score += cost(into[i] = (u8)(row[i] - paeth(row[i - colors], above[i], above[i - colors])));
  }
  return score;
}

// Rows of 8-bit samples, each prefixed with its PNG filter type (0-4), the one of least sum of
// absolute residuals (libpng's heuristic; ties to the lower type). `above` is the row above the
// first (zeros for a picture's first row; the caller passes a band of rows at a time), `trial`
// and `best` are rows of scratch.
__attribute__((export_name("filter_rows")))
void filter_rows(const u8 *samples, int rows, int row_bytes, int colors, const u8 *above, u8 *trial, u8 *best, u8 *out) {
  for (int r = 0; r < rows; r++) {
    const u8 *row = samples + (size_t)r * row_bytes;
    int best_type = 0;
    int64_t best_score = INT64_MAX;
    for (int type = 0; type < 5; type++) {
      int64_t score = filter(type, row, above, row_bytes, colors, trial, best_score);
      if (score < best_score) {
        best_score = score;
        best_type = type;
        u8 *kept = best;
        best = trial;
        trial = kept;
      }
    }
    u8 *o = out + (size_t)r * (row_bytes + 1);
    o[0] = (u8)best_type;
    for (int j = 0; j < row_bytes; j++) o[j + 1] = best[j];
    above = row;
  }
}

extern unsigned char __heap_base;
__attribute__((export_name("heap_base"))) uintptr_t heap_base(void) { return (uintptr_t)&__heap_base; }
