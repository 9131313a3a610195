/**
 * GIF LZW: a decoder, and an encoder that can be lossy in the way of gifsicle's `--lossy`:
 * while extending the current string it may follow a dictionary entry whose next pixel is not
 * the exact one but a colour within `threshold` of it, so longer strings (fewer codes) are emitted.
 * The first pixel of every string stays exact, which keeps the dictionary the decoder rebuilds in
 * step with ours.
 */

import { WasmArena } from '../../shared/wasm.ts';
import { LZW_WASM_BASE64 } from './lzw-wasm.ts';

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
 * shown), with where the frame's pixels are in it. With it the lossy encoder compares what
 * each candidate index would show, the transparent index showing `under`, against `target`.
 */
export interface Backdrop {
  /** What the input shows once this frame is drawn. */
  target: Int16Array;
  /** What the encoded animation shows before this frame is drawn. */
  under: Int16Array;
  /**
   * The frame's pixels in stream order as runs adjacent in `target` and `under` (a frame's rows
   * on the screen): pairs of where a run starts (the index of its first red) and its pixels.
   */
  runs: Int32Array;
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
 * does: a depth-first search through every dictionary string that starts with the exact next
 * pixel and whose later pixels each stay within the threshold (weighted RGB distance) of the
 * wanted ones, the error of each traded pixel diffused (3/4) onto the next; the longest string
 * wins, then the one with the least total error. Without a backdrop transparent pixels are never
 * traded; with one, a pixel is judged by the colour it shows on screen (see Backdrop). `shows`,
 * when given, receives the indices the result decodes to. When the code table fills, it is
 * cleared and rebuilt, or with `deferClear` kept as it is to the end.
 *
 * The encoder is lzw.c in WebAssembly: the search is most of an animated GIF's job, and there it
 * runs 2-3 times as fast as the same search in JavaScript.
 */
export function lzwEncode(indices: Uint8Array, minCodeSize: number, palette: LossyPalette, options: LzwOptions = {}): LzwEncoded {
  const { threshold = 0, backdrop, shows, deferClear = false } = options;
  const { exports: lzw, memory } = encoder.take();
  const n = indices.length;
  const input = encoder.put(indices);
  const target = backdrop ? encoder.alloc(n * 6) : 0;
  const under = backdrop ? encoder.alloc(n * 6) : 0;
  const shown = shows ? encoder.alloc(n) : 0;
  // 12 bits a code at most, one code a pixel at most plus a clear every 3,838 codes and the end.
  const out = encoder.alloc(Math.ceil(1.5 * n + n / 2048) + 64);
  if (backdrop) gather(backdrop, new Int16Array(memory.buffer, target, n * 3), new Int16Array(memory.buffer, under, n * 3));
  const rgb = new Int32Array(memory.buffer, lzw.palette(), 768);
  rgb.fill(0);
  for (let k = 0; k < 768 && k < palette.rgb.length; k++) rgb[k] = palette.rgb[k];
  const result = lzw.lzw_encode(input, n, minCodeSize, palette.transparent, threshold * threshold, target, under, shown, deferClear ? 1 : 0, out);
  const length = result & 0x7fffffff;
  if (shows) shows.set(new Uint8Array(memory.buffer, shown, n));
  const data = Object.assign(encoder.bytes(out, length), { filled: result < 0 });
  // A thread keeps the encoder between frames and jobs, but not the memory a large frame grew.
  encoder.done();
  return data;
}

/** The backdrop's colours of each pixel in stream order, what the encoder reads: only the frame's pixels, a run at a time. */
function gather({ target, under, runs }: Backdrop, t: Int16Array, u: Int16Array): void {
  for (let r = 0, p = 0; r < runs.length; r += 2) {
    const o = runs[r];
    const len = runs[r + 1] * 3;
    t.set(target.subarray(o, o + len), p);
    u.set(under.subarray(o, o + len), p);
    p += len;
  }
}

/** LZW data, and whether the code table filled up while writing it (so a deferred clear could differ). */
export type LzwEncoded = Uint8Array & { filled: boolean };

interface LzwExports {
  palette(): number;
  lzw_encode(indices: number, n: number, minCodeSize: number, transparent: number, limit: number, target: number, under: number, shows: number, deferClear: number, out: number): number;
  heap_base(): number;
}
/** An encoder whose memory grew past this (about 15 bytes a pixel of its largest frame: a frame of 4 MP) is let go after its call. */
const KEEP_BYTES = 64 * 1024 ** 2;
/** lzw.c's static tables (the plain encoder's lookup table of 2 MB, the search's frames) fit in these pages. */
const STATIC_PAGES = 48;

/** The thread's encoder. */
const encoder = new WasmArena<LzwExports>(LZW_WASM_BASE64, STATIC_PAGES, KEEP_BYTES);
