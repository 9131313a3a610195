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
  const prefix = new Int16Array(MAX_CODES);
  const suffix = new Uint8Array(MAX_CODES);
  const stack = new Uint8Array(MAX_CODES + 1);
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
    let c = code === next ? prev : code;
    let sp = 0;
    while (c > eoi) {
      stack[sp++] = suffix[c];
      c = prefix[c];
    }
    stack[sp++] = c;
    const first = c;
    while (sp > 0 && o < pixelCount) out[o++] = stack[--sp];
    if (code === next && o < pixelCount) out[o++] = first;
    if (next < MAX_CODES) {
      prefix[next] = prev;
      suffix[next] = first;
      next++;
      if (next === 1 << codeSize && codeSize < 12) codeSize++;
    }
    prev = code;
  }
  return out;
}

/**
 * What the screen shows around a frame of an animation, per pixel in stream order (RGB triples,
 * red -1 where nothing is shown). With it the lossy encoder compares what each candidate index
 * would show, the transparent index showing `under`, against `target`.
 */
export interface Backdrop {
  /** What the input shows once this frame is drawn. */
  target: Int16Array;
  /** What the encoded animation shows before this frame is drawn. */
  under: Int16Array;
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
 */
export function lzwEncode(indices: Uint8Array, minCodeSize: number, palette: LossyPalette, threshold = 0, backdrop?: Backdrop): Uint8Array {
  const clear = 1 << minCodeSize;
  const eoi = clear + 1;
  // Trie of the dictionary: child lists through firstChild/nextSibling, plus an exact lookup table.
  const firstChild = new Int16Array(MAX_CODES).fill(-1);
  const nextSibling = new Int16Array(MAX_CODES).fill(-1);
  const symbol = new Uint8Array(MAX_CODES);
  const exact = new Int16Array(MAX_CODES * 256).fill(-1);
  const used: number[] = [];
  const writer = new BitWriter(indices.length);
  let codeSize = minCodeSize + 1;
  let next = eoi + 1;
  const limit = threshold * threshold;
  const n = indices.length;
  const rgb = new Int32Array(768);
  for (let k = 0; k < 768 && k < palette.rgb.length; k++) rgb[k] = palette.rgb[k];
  const tr = palette.transparent;
  const target = backdrop?.target;
  const under = backdrop?.under;

  // Best string found by the current search: its code, end position and summed error.
  let bestCode = 0;
  let bestEnd = 0;
  let bestErr = 0;
  const search = (code: number, pos: number, err: number, er: number, eg: number, eb: number): void => {
    if (pos > bestEnd || (pos === bestEnd && err < bestErr)) {
      bestCode = code;
      bestEnd = pos;
      bestErr = err;
    }
    if (pos >= n) return;
    const want = indices[pos];
    let wr: number;
    let wg: number;
    let wb: number;
    if (target) {
      wr = target[pos * 3];
      wg = target[pos * 3 + 1];
      wb = target[pos * 3 + 2];
    } else {
      wr = rgb[want * 3];
      wg = rgb[want * 3 + 1];
      wb = rgb[want * 3 + 2];
    }
    // Nothing shown here: only what shows nothing (the exact index, or transparent over nothing) fits.
    const nothing = wr < 0 || (!target && want === tr);
    wr += er;
    wg += eg;
    wb += eb;
    for (let c = firstChild[code]; c >= 0; c = nextSibling[c]) {
      const s = symbol[c];
      if (s === want) {
        search(c, pos + 1, err, (er * 3) >> 2, (eg * 3) >> 2, (eb * 3) >> 2);
        continue;
      }
      let sr: number;
      let sg: number;
      let sb: number;
      if (s === tr) {
        if (!under) continue;
        sr = under[pos * 3];
        if (sr < 0) {
          if (nothing) search(c, pos + 1, err, 0, 0, 0);
          continue;
        }
        sg = under[pos * 3 + 1];
        sb = under[pos * 3 + 2];
      } else {
        sr = rgb[s * 3];
        sg = rgb[s * 3 + 1];
        sb = rgb[s * 3 + 2];
      }
      if (nothing) continue;
      const dr = wr - sr;
      const dg = wg - sg;
      const db = wb - sb;
      const d = (dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9;
      if (d > limit) continue;
      search(c, pos + 1, err + d, (dr * 3) >> 2, (dg * 3) >> 2, (db * 3) >> 2);
    }
  };

  const reset = (): void => {
    for (const k of used) exact[k] = -1;
    used.length = 0;
    firstChild.fill(-1);
    codeSize = minCodeSize + 1;
    next = eoi + 1;
  };
  writer.write(clear, codeSize);
  let pos = 0;
  while (pos < n) {
    let code = indices[pos];
    let len = 1;
    if (limit === 0 && !backdrop) {
      while (pos + len < n) {
        const child = exact[code * 256 + indices[pos + len]];
        if (child < 0) break;
        code = child;
        len++;
      }
    } else {
      bestCode = code;
      bestEnd = pos + 1;
      bestErr = 0;
      search(code, pos + 1, 0, 0, 0, 0);
      code = bestCode;
      len = bestEnd - pos;
    }
    writer.write(code, codeSize);
    pos += len;
    if (pos >= n) break;
    if (next === MAX_CODES) {
      writer.write(clear, codeSize);
      reset();
    } else {
      if (next >= 1 << codeSize) codeSize++;
      const px = indices[pos];
      const key = code * 256 + px;
      exact[key] = next;
      used.push(key);
      symbol[next] = px;
      nextSibling[next] = firstChild[code];
      firstChild[code] = next;
      firstChild[next] = -1;
      next++;
    }
  }
  writer.write(eoi, codeSize);
  return writer.bytes();
}

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
