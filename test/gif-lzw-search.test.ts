import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lzwEncode, type Backdrop, type LossyPalette } from '../workers/image/gif/lzw.ts';

/**
 * The lossy LZW search is exhaustive by definition (gifsicle's `--lossy`): any speed-up of it
 * must choose exactly the strings a plain depth-first search chooses. These tests hold
 * lzwEncode's bytes against such a search written as simply as it can be, over random and
 * structured frames, thresholds, backdrops and both ways of handling a full code table, with
 * long enough frames that the table fills and clears.
 */

/** A dictionary node: its pixel, and its children newest first (the order the search tries them). */
type TrieNode = { px: number; children: TrieNode[]; code: number };

/** One frame to encode. */
type Case = { indices: Uint8Array; minCodeSize: number; palette: LossyPalette; threshold: number; backdrop?: Backdrop; deferClear: boolean };

/** The error a candidate leaves: total so far, and the diffused error carried to the next pixel. */
type Carry = { sum: number; r: number; g: number; b: number };

/** The best string from `pos`: the longest, then the least total error, then the first found. */
function search(c: Case, root: TrieNode, pos: number): { node: TrieNode; end: number } {
  const limit = c.threshold * c.threshold;
  const best = { node: root, end: pos + 1, err: 0 };
  const visit = (node: TrieNode, end: number, carry: Carry): void => {
    if (end > best.end || (end === best.end && carry.sum < best.err)) Object.assign(best, { node, end, err: carry.sum });
    if (end >= c.indices.length) return;
    for (const child of node.children) {
      const next = fit(c, end, child.px, carry, limit);
      if (next) visit(child, end + 1, next);
    }
  };
  visit(root, pos + 1, { sum: 0, r: 0, g: 0, b: 0 });
  return best;
}

/** What standing for pixel `p` with palette index `px` carries on, or undefined when it may not. */
function fit(c: Case, p: number, px: number, carry: Carry, limit: number): Carry | undefined {
  const { indices, palette, backdrop } = c;
  const want = indices[p];
  const o = backdrop ? positionsOf(backdrop)[p] : 0;
  const wanted = backdrop ? [backdrop.target[o], backdrop.target[o + 1], backdrop.target[o + 2]] : [...palette.rgb.subarray(want * 3, want * 3 + 3)];
  const nothing = wanted[0] < 0 || (!backdrop && want === palette.transparent);
  if (px === want) return { sum: carry.sum, r: (carry.r * 3) >> 2, g: (carry.g * 3) >> 2, b: (carry.b * 3) >> 2 };
  let shown = [...palette.rgb.subarray(px * 3, px * 3 + 3)];
  if (px === palette.transparent) {
    if (!backdrop) return undefined;
    if (backdrop.under[o] < 0) return nothing ? { sum: carry.sum, r: 0, g: 0, b: 0 } : undefined;
    shown = [backdrop.under[o], backdrop.under[o + 1], backdrop.under[o + 2]];
  }
  if (nothing) return undefined;
  const dr = wanted[0] + carry.r - shown[0];
  const dg = wanted[1] + carry.g - shown[1];
  const db = wanted[2] + carry.b - shown[2];
  const dist = (dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9;
  if (dist > limit) return undefined;
  return { sum: carry.sum + dist, r: (dr * 3) >> 2, g: (dg * 3) >> 2, b: (db * 3) >> 2 };
}

/** The reference encoder: the search above over a trie of objects, codes written LSB first. */
function referenceEncode(c: Case): Uint8Array {
  const clear = 1 << c.minCodeSize;
  const bytes: number[] = [];
  let acc = 0;
  let bits = 0;
  const write = (code: number, size: number) => {
    acc |= code << bits;
    for (bits += size; bits >= 8; bits -= 8, acc >>>= 8) bytes.push(acc & 0xff);
  };
  const fresh = () => Array.from({ length: clear }, (_, k): TrieNode => ({ px: k, children: [], code: k }));
  let roots = fresh();
  let codeSize = c.minCodeSize + 1;
  let next = clear + 2;
  write(clear, codeSize);
  for (let pos = 0; pos < c.indices.length; ) {
    const { node, end } = search(c, roots[c.indices[pos]], pos);
    write(node.code, codeSize);
    pos = end;
    if (pos >= c.indices.length) break;
    if (next === 4096) {
      if (c.deferClear) continue;
      write(clear, codeSize);
      roots = fresh();
      codeSize = c.minCodeSize + 1;
      next = clear + 2;
      continue;
    }
    if (next >= 1 << codeSize) codeSize++;
    node.children.unshift({ px: c.indices[pos], children: [], code: next++ });
  }
  write(clear + 1, codeSize);
  if (bits > 0) bytes.push(acc & 0xff);
  return Uint8Array.from(bytes);
}

/** Deterministic pseudo-random numbers in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Pixels: uniform noise, runs with rare changes, or a repeating pattern with noise (as dithered screens look). */
function pixels(rnd: () => number, n: number, colours: number, style: number): Uint8Array {
  const out = new Uint8Array(n);
  let v = 0;
  for (let i = 0; i < n; i++) {
    if (style === 0) v = Math.floor(rnd() * colours);
    else if (style === 1) v = rnd() < 0.08 ? Math.floor(rnd() * colours) : v;
    else v = rnd() < 0.15 ? Math.floor(rnd() * colours) : (Math.floor(i / 5) + (i % 11)) % colours;
    out[i] = v;
  }
  return out;
}

/** A palette of near neighbours (many colours within a small threshold of each other) or spread colours. */
function paletteOf(rnd: () => number, colours: number, close: boolean): Uint8Array {
  const rgb = new Uint8Array(colours * 3);
  for (let k = 0; k < rgb.length; k++) rgb[k] = close ? (Math.floor(k / 3) * 3 + Math.floor(rnd() * 6)) & 255 : Math.floor(rnd() * 256);
  return rgb;
}

/**
 * Screens around the frame: what it should show (nothing where transparent, sometimes) and what
 * is under it (near it, or nothing), its pixels in runs of 1-40 with gaps between them, as a
 * frame's rows lie on a wider screen.
 */
function backdropOf(rnd: () => number, indices: Uint8Array, palette: LossyPalette): Backdrop {
  const n = indices.length;
  const runs: number[] = [];
  let screen = 0;
  for (let p = 0; p < n; ) {
    const length = Math.min(n - p, 1 + Math.floor(rnd() * 40));
    screen += Math.floor(rnd() * 4) * 3;
    runs.push(screen, length);
    screen += length * 3;
    p += length;
  }
  const target = new Int16Array(screen).fill(-1);
  const under = new Int16Array(screen).fill(-1);
  const backdrop = { target, under, runs: Int32Array.from(runs) };
  const at = positionsOf(backdrop);
  for (let p = 0; p < n; p++) {
    const k = indices[p];
    const blank = k === palette.transparent && rnd() < 0.5;
    const bare = rnd() < 0.15;
    for (let ch = 0; ch < 3; ch++) {
      target[at[p] + ch] = blank ? -1 : palette.rgb[k * 3 + ch];
      under[at[p] + ch] = bare ? -1 : palette.rgb[k * 3 + ch] + Math.floor(rnd() * 17) - 8;
    }
  }
  return backdrop;
}

const positions = new WeakMap<Backdrop, Int32Array>();

/** Where each pixel of the frame, in stream order, has its red in the backdrop's screens. */
function positionsOf(backdrop: Backdrop): Int32Array {
  let at = positions.get(backdrop);
  if (!at) {
    const { runs } = backdrop;
    const all: number[] = [];
    for (let r = 0; r < runs.length; r += 2) for (let k = 0; k < runs[r + 1]; k++) all.push(runs[r] + k * 3);
    at = Int32Array.from(all);
    positions.set(backdrop, at);
  }
  return at;
}

/** Every combination for one frame: thresholds (0 only with a backdrop), with and without a backdrop, both clears. */
function casesOf(seed: number, n: number, colours: number): Case[] {
  const rnd = random(seed);
  const minCodeSize = Math.max(2, Math.ceil(Math.log2(colours)));
  const indices = pixels(rnd, n, colours, seed % 3);
  const palette = { rgb: paletteOf(rnd, colours, seed % 2 === 0), transparent: seed % 4 === 3 ? -1 : Math.floor(rnd() * colours) };
  const backdrop = backdropOf(rnd, indices, palette);
  const out: Case[] = [];
  for (const threshold of [0, 3, 12, 45]) {
    for (const deferClear of [false, true]) {
      if (threshold > 0) out.push({ indices, minCodeSize, palette, threshold, deferClear });
      out.push({ indices, minCodeSize, palette, threshold, backdrop, deferClear });
    }
  }
  return out;
}

function assertSameAsReference(c: Case): void {
  const ours = lzwEncode(c.indices, c.minCodeSize, c.palette, { threshold: c.threshold, backdrop: c.backdrop, deferClear: c.deferClear });
  const what = `n=${c.indices.length} threshold=${c.threshold} backdrop=${!!c.backdrop} deferClear=${c.deferClear} transparent=${c.palette.transparent}`;
  assert.deepEqual(Buffer.from(ours), Buffer.from(referenceEncode(c)), what);
}

describe('gif lossy LZW search', () => {
  it('writes the codes a plain exhaustive search chooses, on short frames of many kinds', () => {
    for (let seed = 1; seed <= 24; seed++) for (const c of casesOf(seed, 300 + seed * 37, [2, 4, 16, 64, 256][seed % 5])) assertSameAsReference(c);
  });

  it('stays with it across full code tables, cleared or kept', () => {
    const full = [
      { seed: 105, n: 30_000, colours: 4 },
      { seed: 102, n: 20_000, colours: 16 },
      { seed: 108, n: 9_000, colours: 256 },
      { seed: 104, n: 25_000, colours: 8 },
    ];
    for (const { seed, n, colours } of full) {
      let filled = 0;
      for (const c of casesOf(seed, n, colours)) {
        if (lzwEncode(c.indices, c.minCodeSize, c.palette, { threshold: c.threshold, backdrop: c.backdrop }).filled) filled++;
        assertSameAsReference(c);
      }
      assert.ok(filled >= 4, `seed ${seed}: only ${filled} encodes fill their table`);
    }
  });

  it('gives the same codes after a frame large enough that the encoder lets its memory go', () => {
    const small = casesOf(7, 2_000, 16);
    const before = small.map((c) => Buffer.from(lzwEncode(c.indices, c.minCodeSize, c.palette, { threshold: c.threshold, backdrop: c.backdrop, deferClear: c.deferClear })));
    const [large] = casesOf(9, 6_000_000, 4).filter((c) => c.backdrop && c.threshold > 0);
    const data = lzwEncode(large.indices, large.minCodeSize, large.palette, { threshold: large.threshold, backdrop: large.backdrop });
    assert.ok(data.length > 0 && data.length < large.indices.length);
    small.forEach((c, i) => assert.deepEqual(Buffer.from(lzwEncode(c.indices, c.minCodeSize, c.palette, { threshold: c.threshold, backdrop: c.backdrop, deferClear: c.deferClear })), before[i]));
  });
});
