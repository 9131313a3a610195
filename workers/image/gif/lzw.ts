/**
 * GIF LZW: a decoder, and an encoder that can be lossy in the way of gifsicle's `--lossy`:
 * while extending the current string it may follow a dictionary entry whose next pixel is not
 * the exact one but a colour within `threshold` of it, so longer strings (fewer codes) are emitted.
 * The first pixel of every string stays exact, which keeps the dictionary the decoder rebuilds in
 * step with ours.
 */

const MAX_CODES = 4096;

/**
 * Decodes LZW data (sub-blocks already joined) into `pixelCount` palette indices. Data that ends
 * early leaves the remaining pixels at index 0, as GIF decoders show them.
 */
export function lzwDecode(data: Uint8Array, minCodeSize: number, pixelCount: number): Uint8Array {
  const out = new Uint8Array(pixelCount);
  const clear = 1 << minCodeSize;
  const eoi = clear + 1;
  // Per code: the code of its string minus the last pixel, that pixel, the first pixel and the length.
  const prefix = new Int16Array(MAX_CODES);
  const suffix = new Uint8Array(MAX_CODES);
  const firstOf = new Uint8Array(MAX_CODES);
  const length = new Uint16Array(MAX_CODES);
  for (let k = 0; k < clear; k++) {
    suffix[k] = k;
    firstOf[k] = k;
    length[k] = 1;
  }
  let codeSize = minCodeSize + 1;
  let next = eoi + 1;
  let prev = -1;
  let bits = 0;
  let acc = 0;
  let pos = 0;
  let o = 0;
  while (o < pixelCount) {
    while (bits < codeSize && pos < data.length) {
      acc |= data[pos++] << bits;
      bits += 8;
    }
    if (bits < codeSize) break;
    const code = acc & ((1 << codeSize) - 1);
    acc >>>= codeSize;
    bits -= codeSize;
    if (code === clear) {
      codeSize = minCodeSize + 1;
      next = eoi + 1;
      prev = -1;
      continue;
    }
    if (code === eoi) break;
    if (prev === -1) {
      if (code > clear) throw new Error('LZW: first code after a clear is not a literal');
      out[o++] = code;
      prev = code;
      continue;
    }
    if (code > next) throw new Error('LZW: code out of range');
    // code === next is the KwKwK case: the string of prev followed by its own first pixel.
    const known = code < next;
    const first = firstOf[known ? code : prev];
    const len = known ? length[code] : length[prev] + 1;
    // The string is written back to front, from its last pixel along the prefixes.
    const end = Math.min(o + len, pixelCount);
    let c = known ? code : prev;
    let k = o + len - 1;
    if (!known) {
      if (k < pixelCount) out[k] = first;
      k--;
    }
    for (; k >= o; k--) {
      if (k < end) out[k] = suffix[c];
      c = prefix[c];
    }
    o = end;
    if (next < MAX_CODES) {
      prefix[next] = prev;
      suffix[next] = first;
      firstOf[next] = firstOf[prev];
      length[next] = length[prev] + 1;
      next++;
      if (next === 1 << codeSize && codeSize < 12) codeSize++;
    }
    prev = code;
  }
  return out;
}

/**
 * What the screen shows around a frame of an animation (RGB triples, red -1 where nothing is
 * shown), with where each pixel of the frame is in it. With it the lossy encoder compares what
 * each candidate index would show, the transparent index showing `under`, against `target`.
 */
export interface Backdrop {
  /** What the input shows once this frame is drawn. */
  target: Int16Array;
  /** What the encoded animation shows before this frame is drawn. */
  under: Int16Array;
  /** Per pixel of the frame in stream order: the index of its red in `target` and `under`. */
  at: Int32Array;
}

export interface LossyPalette {
  /** RGB triples. */
  rgb: Uint8Array;
  /** Transparent index, or -1. */
  transparent: number;
}

/** How lzwEncode may trade pixels, and what it reports. */
export interface LzwOptions {
  /** 0 (the default): lossless. Above 0: the largest weighted RGB distance a traded pixel may be off by. */
  threshold?: number;
  /** What the screen shows around the frame (see Backdrop); makes the encode lossy even at threshold 0. */
  backdrop?: Backdrop;
  /** Receives the indices the result decodes to. */
  shows?: Uint8Array;
  /** When the code table fills, keep it as it is to the end instead of clearing it. */
  deferClear?: boolean;
}

/**
 * Encodes palette indices as GIF LZW (not yet split into sub-blocks). With threshold 0 the
 * result decodes to exactly `indices`. Above 0, each code is chosen as gifsicle's `--lossy`
 * does (LossySearch). `shows`, when given, receives the indices the result decodes to. When the
 * code table fills, it is cleared and rebuilt, or with `deferClear` kept as it is to the end.
 */
export function lzwEncode(indices: Uint8Array, minCodeSize: number, palette: LossyPalette, options: LzwOptions = {}): LzwEncoded {
  const { threshold = 0, backdrop, shows, deferClear = false } = options;
  const clear = 1 << minCodeSize;
  const eoi = clear + 1;
  const { firstChild, nextSibling, symbol, parent } = scratch;
  const writer = new BitWriter(indices.length);
  let codeSize = minCodeSize + 1;
  let next = eoi + 1;
  const n = indices.length;
  const limit = threshold * threshold;
  const exact = limit === 0 && !backdrop ? new ExactStrings(indices) : undefined;
  const choice: StringChoice = exact ?? new LossySearch(indices, palette, limit, backdrop);
  firstChild.fill(-1);
  writer.write(clear, codeSize);
  let pos = 0;
  let filled = false;
  while (pos < n) {
    const len = choice.longest(pos) - pos;
    const code = choice.code;
    writer.write(code, codeSize);
    if (shows) for (let c = code, k = pos + len - 1; k >= pos; k--, c = parent[c]) shows[k] = c < clear ? c : symbol[c];
    pos += len;
    if (pos >= n) break;
    if (next === MAX_CODES) {
      filled = true;
      // A deferred clear (which GIF decoders honour) keeps the full table: better where the
      // whole frame repeats the strings it began with (a steady screen, a flat picture).
      if (!deferClear) {
        writer.write(clear, codeSize);
        exact?.forget();
        firstChild.fill(-1);
        codeSize = minCodeSize + 1;
        next = eoi + 1;
      }
    } else {
      if (next >= 1 << codeSize) codeSize++;
      const px = indices[pos];
      exact?.add(code, px, next);
      symbol[next] = px;
      parent[next] = code;
      nextSibling[next] = firstChild[code];
      firstChild[code] = next;
      firstChild[next] = -1;
      next++;
    }
  }
  exact?.forget();
  writer.write(eoi, codeSize);
  return Object.assign(writer.bytes(), { filled });
}

/** How the next string is chosen: `longest` answers where it ends and leaves its code in `code`. */
interface StringChoice {
  code: number;
  longest(pos: number): number;
}

/**
 * The plain encoder's choice: the longest dictionary string that is exactly the next pixels,
 * found through a lookup table of (string code, next pixel) -> code, which `forget` sets back
 * to all -1 (it is shared between calls).
 */
class ExactStrings implements StringChoice {
  /** The code of the string `longest` found. */
  code = 0;
  private readonly used: number[] = [];
  constructor(private readonly indices: Uint8Array) {}

  /** The end of the longest known string starting at `pos`. */
  longest(pos: number): number {
    const { indices } = this;
    const { exact } = scratch;
    const n = indices.length;
    let code = indices[pos];
    let len = 1;
    while (pos + len < n) {
      const c = exact[code * 256 + indices[pos + len]];
      if (c < 0) break;
      code = c;
      len++;
    }
    this.code = code;
    return pos + len;
  }

  /** Records that `code` followed by `px` is the string `next`. */
  add(code: number, px: number, next: number): void {
    const key = code * 256 + px;
    scratch.exact[key] = next;
    this.used.push(key);
  }

  forget(): void {
    for (const k of this.used) scratch.exact[k] = -1;
    this.used.length = 0;
  }
}

/**
 * The lossy encoder's choice, as gifsicle's `--lossy` makes it: a depth-first search through
 * every dictionary string that starts with the exact next pixel and whose later pixels each stay
 * within the threshold (weighted RGB distance) of the wanted ones, the error of each traded
 * pixel diffused (3/4) onto the next; the longest string wins, then the one with the least total
 * error. Without a backdrop transparent pixels are never traded; with one, a pixel is judged by
 * the colour it shows on screen (see Backdrop).
 */
class LossySearch implements StringChoice {
  /** The code of the string `longest` found. */
  code = 0;
  private readonly rgb = new Int32Array(768);
  private readonly tr: number;
  private readonly target: Int16Array | undefined;
  private readonly under: Int16Array | undefined;
  private readonly at: Int32Array | undefined;

  /** `limit`: the threshold squared. */
  constructor(private readonly indices: Uint8Array, palette: LossyPalette, private readonly limit: number, backdrop: Backdrop | undefined) {
    for (let k = 0; k < 768 && k < palette.rgb.length; k++) this.rgb[k] = palette.rgb[k];
    this.tr = palette.transparent;
    this.target = backdrop?.target;
    this.under = backdrop?.under;
    this.at = backdrop?.at;
  }

  /**
   * The end of the best string starting at `pos`. The search keeps one frame per string length
   * (scratch): the node, the next child to try, the error so far and the error diffused onto the
   * next pixel, and the colour wanted there. The string at depth d ends before pixel pos + 1 + d.
   */
  longest(pos: number): number {
    const { node, errSum, er, eg, eb } = scratch;
    let bestCode = this.indices[pos];
    let bestEnd = pos + 1;
    let bestErr = 0;
    let d = 0;
    node[0] = bestCode;
    errSum[0] = 0;
    er[0] = eg[0] = eb[0] = 0;
    for (;;) {
      // Entering depth d: score the string, then prepare the search of its children.
      const p = pos + 1 + d;
      const e = errSum[d];
      if (p > bestEnd || (p === bestEnd && e < bestErr)) {
        bestCode = node[d];
        bestEnd = p;
        bestErr = e;
      }
      this.enter(d, p);
      // Find the next child to descend into, backing up while a depth has none left.
      while (d >= 0 && !this.descend(d, pos)) d--;
      if (d < 0) break;
      d++;
    }
    this.code = bestCode;
    return bestEnd;
  }

  /** Prepares the search of the children of the string at depth `d`, whose next pixel is `p`. */
  private enter(d: number, p: number): void {
    const { node, child, er, eg, eb, wr, wg, wb, wantIndex, nothing, firstChild } = scratch;
    const { indices, target, at, rgb } = this;
    const first = firstChild[node[d]];
    if (p >= indices.length || first < 0) {
      child[d] = -1;
      return;
    }
    const want = indices[p];
    let r, g, b;
    if (target && at) {
      const o = at[p];
      r = target[o];
      g = target[o + 1];
      b = target[o + 2];
    } else {
      r = rgb[want * 3];
      g = rgb[want * 3 + 1];
      b = rgb[want * 3 + 2];
    }
    // Nothing shown here: only what shows nothing (the exact index, or transparent over nothing) fits.
    nothing[d] = r < 0 || (!target && want === this.tr) ? 1 : 0;
    wantIndex[d] = want;
    wr[d] = r + er[d];
    wg[d] = g + eg[d];
    wb[d] = b + eb[d];
    child[d] = first;
  }

  /**
   * Moves to the next child of depth `d` that may stand for the wanted pixel, filling depth
   * d + 1's frame, if any is left.
   */
  private descend(d: number, pos: number): boolean {
    const { child, nextSibling, node, symbol, errSum, er, eg, eb, wantIndex, nothing } = scratch;
    const { tr, rgb } = this;
    for (let c = child[d]; c >= 0; c = nextSibling[c]) {
      const s = symbol[c];
      if (s === wantIndex[d]) {
        errSum[d + 1] = errSum[d];
        er[d + 1] = (er[d] * 3) >> 2;
        eg[d + 1] = (eg[d] * 3) >> 2;
        eb[d + 1] = (eb[d] * 3) >> 2;
      } else if (s === tr) {
        if (!this.transparentFits(d, pos)) continue;
      } else if (nothing[d] || !this.traded(d, rgb[s * 3], rgb[s * 3 + 1], rgb[s * 3 + 2])) {
        continue;
      }
      child[d] = nextSibling[c];
      node[d + 1] = c;
      return true;
    }
    return false;
  }

  /** Whether the transparent index may stand for the wanted pixel at depth `d` (it shows what is under it); if so depth d + 1's errors are set. */
  private transparentFits(d: number, pos: number): boolean {
    const { under, at } = this;
    const { errSum, er, eg, eb, nothing } = scratch;
    if (!under || !at) return false;
    const o = at[pos + 1 + d];
    if (under[o] < 0) {
      // Transparent over nothing: fits only where nothing is wanted either.
      if (!nothing[d]) return false;
      errSum[d + 1] = errSum[d];
      er[d + 1] = eg[d + 1] = eb[d + 1] = 0;
      return true;
    }
    return !nothing[d] && this.traded(d, under[o], under[o + 1], under[o + 2]);
  }

  /** Whether colour (r, g, b) is within the threshold of the wanted one at depth `d`; if so depth d + 1's errors are set. */
  private traded(d: number, r: number, g: number, b: number): boolean {
    const { errSum, er, eg, eb, wr, wg, wb } = scratch;
    const dr = wr[d] - r;
    const dg = wg[d] - g;
    const db = wb[d] - b;
    const dist = (dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9;
    if (dist > this.limit) return false;
    errSum[d + 1] = errSum[d] + dist;
    er[d + 1] = (dr * 3) >> 2;
    eg[d + 1] = (dg * 3) >> 2;
    eb[d + 1] = (db * 3) >> 2;
    return true;
  }
}

/** LZW data, and whether the code table filled up while writing it (so a deferred clear could differ). */
export type LzwEncoded = Uint8Array & { filled: boolean };

/**
 * The encoder's working memory, allocated once: the dictionary trie (child lists, plus an exact
 * lookup table kept all -1 between calls) and the search's per-depth frames (a string is at
 * most MAX_CODES pixels long).
 */
const scratch = {
  firstChild: new Int16Array(MAX_CODES),
  nextSibling: new Int16Array(MAX_CODES),
  symbol: new Uint8Array(MAX_CODES),
  parent: new Int16Array(MAX_CODES),
  exact: new Int16Array(MAX_CODES * 256).fill(-1),
  node: new Int32Array(MAX_CODES + 1),
  child: new Int32Array(MAX_CODES + 1),
  errSum: new Float64Array(MAX_CODES + 1),
  er: new Int32Array(MAX_CODES + 1),
  eg: new Int32Array(MAX_CODES + 1),
  eb: new Int32Array(MAX_CODES + 1),
  wr: new Int32Array(MAX_CODES + 1),
  wg: new Int32Array(MAX_CODES + 1),
  wb: new Int32Array(MAX_CODES + 1),
  wantIndex: new Int32Array(MAX_CODES + 1),
  nothing: new Uint8Array(MAX_CODES + 1),
};

class BitWriter {
  private buf: Uint8Array;
  private len = 0;
  private acc = 0;
  private bits = 0;
  constructor(hint: number) {
    this.buf = new Uint8Array(Math.max(256, hint >> 1));
  }
  write(code: number, size: number): void {
    this.acc |= code << this.bits;
    this.bits += size;
    while (this.bits >= 8) {
      this.push(this.acc & 0xff);
      this.acc >>>= 8;
      this.bits -= 8;
    }
  }
  private push(b: number): void {
    if (this.len === this.buf.length) {
      const bigger = new Uint8Array(this.buf.length * 2);
      bigger.set(this.buf);
      this.buf = bigger;
    }
    this.buf[this.len++] = b;
  }
  bytes(): Uint8Array {
    if (this.bits > 0) {
      this.push(this.acc & 0xff);
      this.acc = 0;
      this.bits = 0;
    }
    return this.buf.subarray(0, this.len);
  }
}
