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

/**
 * Encodes palette indices as GIF LZW (not yet split into sub-blocks). With threshold 0 the
 * result decodes to exactly `indices`. Above 0, each code is chosen as gifsicle's `--lossy`
 * does: a depth-first search through every dictionary string that starts with the exact next
 * pixel and whose later pixels each stay within `threshold` (weighted RGB distance) of the
 * wanted ones, the error of each traded pixel diffused (3/4) onto the next; the longest string
 * wins, then the one with the least total error. Without a backdrop transparent pixels are
 * never traded; with one, a pixel is judged by the colour it shows on screen (see Backdrop).
 * `shows`, when given, receives the indices the result decodes to. When the code table fills,
 * it is cleared and rebuilt, or with `deferClear` kept as it is to the end.
 */
export function lzwEncode(indices: Uint8Array, minCodeSize: number, palette: LossyPalette, threshold = 0, backdrop?: Backdrop, shows?: Uint8Array, deferClear = false): LzwEncoded {
  const clear = 1 << minCodeSize;
  const eoi = clear + 1;
  const { firstChild, nextSibling, symbol, parent, exact } = scratch;
  const writer = new BitWriter(indices.length);
  let codeSize = minCodeSize + 1;
  let next = eoi + 1;
  const limit = threshold * threshold;
  const lossless = limit === 0 && !backdrop;
  const n = indices.length;
  const rgb = new Int32Array(768);
  for (let k = 0; k < 768 && k < palette.rgb.length; k++) rgb[k] = palette.rgb[k];
  const tr = palette.transparent;
  const target = backdrop?.target;
  const under = backdrop?.under;
  const at = backdrop?.at;
  // The depth-first search keeps one frame per string length: the node, the next child to try,
  // the error so far and the error diffused onto the next pixel, and the colour wanted there.
  const { node, child, errSum, er, eg, eb, wr, wg, wb, wantIndex, nothing } = scratch;

  const used: number[] = [];
  const reset = (): void => {
    for (const k of used) exact[k] = -1;
    used.length = 0;
    firstChild.fill(-1);
    codeSize = minCodeSize + 1;
    next = eoi + 1;
  };
  firstChild.fill(-1);
  writer.write(clear, codeSize);
  let pos = 0;
  let filled = false;
  while (pos < n) {
    let code = indices[pos];
    let len = 1;
    if (lossless) {
      while (pos + len < n) {
        const c = exact[code * 256 + indices[pos + len]];
        if (c < 0) break;
        code = c;
        len++;
      }
    } else {
      // Strings starting at `pos`: the one at depth d ends before pixel pos + 1 + d.
      let bestCode = code;
      let bestEnd = pos + 1;
      let bestErr = 0;
      let d = 0;
      node[0] = code;
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
        const first = firstChild[node[d]];
        if (p < n && first >= 0) {
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
          nothing[d] = r < 0 || (!target && want === tr) ? 1 : 0;
          wantIndex[d] = want;
          wr[d] = r + er[d];
          wg[d] = g + eg[d];
          wb[d] = b + eb[d];
          child[d] = first;
        } else {
          child[d] = -1;
        }
        // Find the next child to descend into, backing up while a depth has none left.
        let descended = false;
        while (d >= 0) {
          let c = child[d];
          for (; c >= 0; c = nextSibling[c]) {
            const s = symbol[c];
            let fer, feg, feb, fe;
            if (s === wantIndex[d]) {
              fe = errSum[d];
              fer = (er[d] * 3) >> 2;
              feg = (eg[d] * 3) >> 2;
              feb = (eb[d] * 3) >> 2;
            } else if (s === tr && under && at && under[at[pos + 1 + d]] < 0) {
              // Transparent over nothing: fits only where nothing is wanted either.
              if (!nothing[d]) continue;
              fe = errSum[d];
              fer = feg = feb = 0;
            } else {
              let sr, sg, sb;
              if (s === tr) {
                if (!under || !at) continue;
                const p2 = at[pos + 1 + d];
                sr = under[p2];
                sg = under[p2 + 1];
                sb = under[p2 + 2];
              } else {
                sr = rgb[s * 3];
                sg = rgb[s * 3 + 1];
                sb = rgb[s * 3 + 2];
              }
              if (nothing[d]) continue;
              const dr = wr[d] - sr;
              const dg = wg[d] - sg;
              const db = wb[d] - sb;
              const dist = (dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9;
              if (dist > limit) continue;
              fe = errSum[d] + dist;
              fer = (dr * 3) >> 2;
              feg = (dg * 3) >> 2;
              feb = (db * 3) >> 2;
            }
            child[d] = nextSibling[c];
            node[d + 1] = c;
            errSum[d + 1] = fe;
            er[d + 1] = fer;
            eg[d + 1] = feg;
            eb[d + 1] = feb;
            descended = true;
            break;
          }
          if (descended) break;
          d--;
        }
        if (!descended) break;
        d++;
      }
      code = bestCode;
      len = bestEnd - pos;
    }
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
        reset();
      }
    } else {
      if (next >= 1 << codeSize) codeSize++;
      const px = indices[pos];
      if (lossless) {
        const key = code * 256 + px;
        exact[key] = next;
        used.push(key);
      }
      symbol[next] = px;
      parent[next] = code;
      nextSibling[next] = firstChild[code];
      firstChild[code] = next;
      firstChild[next] = -1;
      next++;
    }
  }
  for (const k of used) exact[k] = -1;
  writer.write(eoi, codeSize);
  return Object.assign(writer.bytes(), { filled });
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
