// GIF LZW encoding, plain and lossy (lzw.ts describes the choice of strings). Compiled to
// WebAssembly by scripts/build-wasm.mjs: the lossy search visits every dictionary string that
// may stand for the next pixels, for every code of every frame of every threshold tried, and was
// most of an animated GIF's job in JavaScript. No libc; every table is static, sized for the 4096
// codes GIF allows, and the caller places the per-frame arrays in this module's memory.
#include <stdint.h>

#define MAX_CODES 4096

static int16_t first_child[MAX_CODES];
static int16_t next_sibling[MAX_CODES];
static int16_t parent[MAX_CODES];
static uint8_t symbol[MAX_CODES];
// (string code, next pixel) -> code for the plain encoder; all -1 between calls.
static int16_t exact[MAX_CODES * 256];
static int exact_ready;
static int32_t exact_used[MAX_CODES];
static int exact_count;

// The lossy search's frame per string length: a string is at most MAX_CODES pixels long.
static int32_t node[MAX_CODES + 1];
static int32_t child[MAX_CODES + 1];
static double err_sum[MAX_CODES + 1];
static int32_t er[MAX_CODES + 1], eg[MAX_CODES + 1], eb[MAX_CODES + 1];
static int32_t wr[MAX_CODES + 1], wg[MAX_CODES + 1], wb[MAX_CODES + 1];
static int32_t want_index[MAX_CODES + 1];
static uint8_t nothing[MAX_CODES + 1];

static int32_t palette_rgb[768];

// What one call encodes (set by lzw_encode).
static const uint8_t *pixels;
static int count;
static int transparent;
static double limit;
static const int16_t *target;
static const int16_t *under;

__attribute__((export_name("palette"))) int32_t *palette(void) { return palette_rgb; }

static void forget_exact(void) {
  for (int i = 0; i < exact_count; i++) exact[exact_used[i]] = -1;
  exact_count = 0;
}

static int exact_longest(int pos, int *code_out) {
  int code = pixels[pos];
  int len = 1;
  while (pos + len < count) {
    int c = exact[code * 256 + pixels[pos + len]];
    if (c < 0) break;
    code = c;
    len++;
  }
  *code_out = code;
  return pos + len;
}

static void enter(int d, int p) {
  int first = first_child[node[d]];
  if (p >= count || first < 0) {
    child[d] = -1;
    return;
  }
  int want = pixels[p];
  int r, g, b;
  if (target) {
    int o = p * 3;
    r = target[o];
    g = target[o + 1];
    b = target[o + 2];
  } else {
    r = palette_rgb[want * 3];
    g = palette_rgb[want * 3 + 1];
    b = palette_rgb[want * 3 + 2];
  }
  nothing[d] = r < 0 || (!target && want == transparent);
  want_index[d] = want;
  wr[d] = r + er[d];
  wg[d] = g + eg[d];
  wb[d] = b + eb[d];
  child[d] = first;
}

static int traded(int d, int r, int g, int b) {
  int dr = wr[d] - r;
  int dg = wg[d] - g;
  int db = wb[d] - b;
  double dist = (double)(dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9.0;
  if (dist > limit) return 0;
  err_sum[d + 1] = err_sum[d] + dist;
  er[d + 1] = (dr * 3) >> 2;
  eg[d + 1] = (dg * 3) >> 2;
  eb[d + 1] = (db * 3) >> 2;
  return 1;
}

static int transparent_fits(int d, int pos) {
  if (!under) return 0;
  int o = (pos + 1 + d) * 3;
  if (under[o] < 0) {
    if (!nothing[d]) return 0;
    err_sum[d + 1] = err_sum[d];
    er[d + 1] = eg[d + 1] = eb[d + 1] = 0;
    return 1;
  }
  return !nothing[d] && traded(d, under[o], under[o + 1], under[o + 2]);
}

static int descend(int d, int pos) {
  for (int c = child[d]; c >= 0; c = next_sibling[c]) {
    int s = symbol[c];
    if (s == want_index[d]) {
      err_sum[d + 1] = err_sum[d];
      er[d + 1] = (er[d] * 3) >> 2;
      eg[d + 1] = (eg[d] * 3) >> 2;
      eb[d + 1] = (eb[d] * 3) >> 2;
    } else if (s == transparent) {
      if (!transparent_fits(d, pos)) continue;
    } else if (nothing[d] || !traded(d, palette_rgb[s * 3], palette_rgb[s * 3 + 1], palette_rgb[s * 3 + 2])) {
      continue;
    }
    child[d] = next_sibling[c];
    node[d + 1] = c;
    return 1;
  }
  return 0;
}

static int lossy_longest(int pos, int *code_out) {
  int best_code = pixels[pos];
  int best_end = pos + 1;
  double best_err = 0;
  int d = 0;
  node[0] = best_code;
  err_sum[0] = 0;
  er[0] = eg[0] = eb[0] = 0;
  for (;;) {
    int p = pos + 1 + d;
    double e = err_sum[d];
    if (p > best_end || (p == best_end && e < best_err)) {
      best_code = node[d];
      best_end = p;
      best_err = e;
    }
    enter(d, p);
    while (d >= 0 && !descend(d, pos)) d--;
    if (d < 0) break;
    d++;
  }
  *code_out = best_code;
  return best_end;
}

static uint8_t *out;
static int out_len;
static uint32_t acc;
static int bits;

static void write_code(int code, int size) {
  acc |= (uint32_t)code << bits;
  bits += size;
  while (bits >= 8) {
    out[out_len++] = (uint8_t)acc;
    acc >>= 8;
    bits -= 8;
  }
}

// Encodes `n` palette indices; returns the bytes written to `dst` (room for 1.5n + n/2048 + 64), the top
// bit set when the code table filled. `threshold_squared` 0 without `tgt` is the exact encoder.
// `tgt` and `und`, when not null, are the backdrop's colours (RGB, -1 red for nothing) of each
// pixel in stream order; `shows`, when not null, receives the indices the result decodes to.
__attribute__((export_name("lzw_encode")))
int32_t lzw_encode(const uint8_t *indices, int n, int min_code_size, int tr, double threshold_squared,
                   const int16_t *tgt, const int16_t *und, uint8_t *shows, int defer_clear,
                   uint8_t *dst) {
  if (!exact_ready) {
    for (int i = 0; i < MAX_CODES * 256; i++) exact[i] = -1;
    exact_ready = 1;
  }
  pixels = indices;
  count = n;
  transparent = tr;
  limit = threshold_squared;
  target = tgt;
  under = und;
  out = dst;
  out_len = 0;
  acc = 0;
  bits = 0;
  int is_exact = threshold_squared == 0 && !tgt;
  int clear = 1 << min_code_size;
  int eoi = clear + 1;
  int code_size = min_code_size + 1;
  int next = eoi + 1;
  int filled = 0;
  for (int i = 0; i < MAX_CODES; i++) first_child[i] = -1;
  write_code(clear, code_size);
  int pos = 0;
  while (pos < n) {
    int code;
    int end = is_exact ? exact_longest(pos, &code) : lossy_longest(pos, &code);
    write_code(code, code_size);
    if (shows) {
      int c = code;
      for (int k = end - 1; k >= pos; k--, c = parent[c]) shows[k] = c < clear ? (uint8_t)c : symbol[c];
    }
    pos = end;
    if (pos >= n) break;
    if (next == MAX_CODES) {
      filled = 1;
      if (!defer_clear) {
        write_code(clear, code_size);
        if (is_exact) forget_exact();
        for (int i = 0; i < MAX_CODES; i++) first_child[i] = -1;
        code_size = min_code_size + 1;
        next = eoi + 1;
      }
    } else {
      if (next >= 1 << code_size) code_size++;
      int px = indices[pos];
      if (is_exact) {
        int key = code * 256 + px;
        exact[key] = (int16_t)next;
        exact_used[exact_count++] = key;
      }
      symbol[next] = (uint8_t)px;
      parent[next] = (int16_t)code;
      next_sibling[next] = first_child[code];
      first_child[code] = (int16_t)next;
      first_child[next] = -1;
      next++;
    }
  }
  if (is_exact) forget_exact();
  write_code(eoi, code_size);
  if (bits > 0) out[out_len++] = (uint8_t)acc;
  return out_len | (filled ? (int32_t)0x80000000 : 0);
}

extern unsigned char __heap_base;
__attribute__((export_name("heap_base"))) uintptr_t heap_base(void) { return (uintptr_t)&__heap_base; }
