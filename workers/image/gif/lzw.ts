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

export interface LossyPalette {
  /** RGB triples. */
  rgb: Uint8Array;
  /** Transparent index, or -1. */
  transparent: number;
}

/**
 * Encodes palette indices as GIF LZW (not yet split into sub-blocks). With threshold 0 the
 * result decodes to exactly `indices`; above 0 a pixel may be replaced by a colour whose
 * weighted RGB distance is at most `threshold` (transparent pixels are never traded).
 */
export function lzwEncode(indices: Uint8Array, minCodeSize: number, palette: LossyPalette, threshold = 0): Uint8Array {
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
  const rgb = palette.rgb;
  const tr = palette.transparent;
  const dist = (a: number, b: number): number => {
    if (a === b) return 0;
    if (a === tr || b === tr) return Infinity;
    const dr = rgb[a * 3] - rgb[b * 3];
    const dg = rgb[a * 3 + 1] - rgb[b * 3 + 1];
    const db = rgb[a * 3 + 2] - rgb[b * 3 + 2];
    return (dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9;
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
  const n = indices.length;
  while (pos < n) {
    let code = indices[pos];
    let len = 1;
    // Error carried along the string, so a run of small shifts cannot drift far from the original.
    let carried = 0;
    while (pos + len < n) {
      const px = indices[pos + len];
      const child = exact[code * 256 + px];
      if (child >= 0) {
        code = child;
        len++;
        continue;
      }
      if (limit === 0) break;
      let best = -1;
      let bestErr = Infinity;
      for (let c = firstChild[code]; c >= 0; c = nextSibling[c]) {
        const d = dist(symbol[c], px);
        if (d < bestErr) {
          bestErr = d;
          best = c;
        }
      }
      if (best < 0 || bestErr > limit || carried + bestErr > limit * 2) break;
      carried = (carried + bestErr) / 2;
      code = best;
      len++;
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
