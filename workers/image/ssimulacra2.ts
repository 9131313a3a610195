import { THREAD_IDLE_MS } from '../../src/catalog/contract.ts';
import { KERNELS_WASM_BASE64 } from './metric/kernels.ts';
import type { Pixels } from './ssim.ts';
import { phaseSync } from '../shared/profile.ts';
import { compileWasm, instantiateWasm, WASM_PAGE, type WasmMemory } from '../shared/wasm.ts';

/**
 * SSIMULACRA2 (Cloudinary, 2022; the version shipped with libjxl's tools), written from its
 * published description: both pictures in linear sRGB; at six scales (each a 2×2 box downsample
 * of the last), the XYB colour space of JPEG XL made positive; per channel an SSIM map without
 * the luminance denominator, and an edge-difference map split into artefacts (edges the
 * original lacks: ringing, blocking, banding) and detail lost (blur, smearing); the mean and
 * the L4 norm of each map, weighted, and the published polynomial and power law to a 0-100
 * score. 100: identical; about 90: hard to tell apart side by side at 1:1; 70: high quality;
 * 50: medium. Validated against the reference implementation on 64 pairs (test/ssimulacra2.test.ts:
 * within 0.25 of it on every one).
 *
 * The per-pixel work runs in WebAssembly with SIMD (metric/ssimulacra2.c); this module decides
 * what to compute. A reference is prepared once (`Ssimulacra2Reference`) and scores many
 * distorted versions: a quality search pays only the distorted side. Of the 108 weighted
 * figures, the 78 whose weight is under WEIGHT_FLOOR are not computed: at full resolution that
 * leaves the luma channel alone (X and B weigh nothing there), and nothing at the sixth scale,
 * so a probe costs about a quarter of the whole metric; on the reference pairs the score moves
 * by under 0.05.
 */

const SCALES = 6;
const SIGMA = 1.5;
/** Weights below this are taken as zero (see above). */
const WEIGHT_FLOOR = 0.01;

/**
 * The published weights: per channel (X, Y, B), per scale, per norm (mean, L4), the SSIM map,
 * the artefact map and the detail-lost map, in that order.
 */
const WEIGHTS = [
  0.0, 0.0007376606707406586, 0.0, 0.0, 0.0007793481682867309, 0.0, 0.0, 0.0004371155730107379, 0.0, 1.1041726426657346, 0.00066284834129271,
  0.00015231632783718752, 0.0, 0.0016406437456599754, 0.0, 1.8422455520539298, 11.441172603757666, 0.0, 0.0007989109436015163, 0.000176816438078653, 0.0,
  1.8787594979546387, 10.94906990605142, 0.0, 0.0007289346991508072, 0.9677937080626833, 0.0, 0.00014003424285435884, 0.9981766977854967,
  0.00031949755934435053, 0.0004550992113792063, 0.0, 0.0, 0.0013648766163243398, 0.0, 0.0, 0.0, 0.0, 0.0, 7.466890328078848, 0.0, 17.445833984131262,
  0.0006235601634041466, 0.0, 0.0, 6.683678146179332, 0.00037724407979611296, 1.027889937768264, 225.20515300849274, 0.0, 0.0, 19.213238186143016,
  0.0011401524586618361, 0.001237755635509985, 176.39317598450694, 0.0, 0.0, 24.43300999870476, 0.28520802612117757, 0.0004485436923833408, 0.0, 0.0, 0.0,
  34.77906344483772, 44.835625328877896, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0008680556573291698, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0005313191874358747,
  0.0, 0.00016533719920498076, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0004179171803251336, 0.0017290828234722833, 0.0, 0.0020827005846636437, 0.0, 0.0,
  8.826982764996862, 23.19243343998926, 0.0, 95.1080498811086, 0.9863978034400682, 0.9834382792465353, 0.0012286405048278493, 171.2667255897307,
  0.9807858872435379, 0.0, 0.0, 0.0, 0.0005130064588990679, 0.0, 0.00010854057858411537,
];

/**
 * What one scale needs of each channel (X, Y, B): nothing, the edge maps, or the SSIM map too. A grey
 * pair needs the same: its X and B planes are constants, but the float32 noise of their variances
 * (differences of nearly equal blurred values) is part of the reference implementation's scores, and
 * leaving them out moved grey JPEG probes' scores by 0.01-0.18 (measured).
 */
type Need = 0 | 1 | 2;
const NEEDS: Need[][] = Array.from({ length: SCALES }, (_, s) =>
  [0, 1, 2].map((c): Need => {
    const w = (k: number) => Math.max(WEIGHTS[c * 36 + s * 6 + k], WEIGHTS[c * 36 + s * 6 + 3 + k]) >= WEIGHT_FLOOR;
    return w(0) ? 2 : w(1) || w(2) ? 1 : 0;
  }),
);

/** The weighted figures to the 0-100 score. */
function scoreOf(figures: Float64Array): number {
  let sum = 0;
  for (let c = 0; c < 3; c++) {
    for (let s = 0; s < SCALES; s++) {
      const at = s * 18 + c * 6;
      for (let n = 0; n < 2; n++) {
        const i = c * 36 + s * 6 + n * 3;
        sum += WEIGHTS[i] * Math.abs(figures[at + n]);
        sum += WEIGHTS[i + 1] * Math.abs(figures[at + 2 + n]);
        sum += WEIGHTS[i + 2] * Math.abs(figures[at + 4 + n]);
      }
    }
  }
  let v = sum * 0.9562382616834844;
  v = 2.326765642916932 * v - 0.020884521182843837 * v * v + 6.248496625763138e-5 * v * v * v;
  return v > 0 ? 100 - 10 * v ** 0.6276336467831387 : 100;
}

/**
 * The recursive Gaussian (Charalampidis 2016, three truncated-cosine terms) that the reference
 * blurs with: constant work per sample whatever sigma, zeros outside the picture. Its float32
 * arithmetic is part of the reference's scores: the variances are differences of nearly equal
 * blurred values, and on grainy pictures at high quality computing them exactly moves a score by
 * up to 1.9 points. The kernels compute in float32 with the reference's fused multiply-add.
 */
function recursiveGaussian(sigma: number): { radius: number; n2: number[]; d1: number[] } {
  const radius = Math.round(3.2795 * sigma + 0.2546);
  const w = Math.PI / (2 * radius);
  const omega = [w, 3 * w, 5 * w];
  const p1 = 1 / Math.tan(0.5 * omega[0]);
  const p3 = -1 / Math.tan(0.5 * omega[1]);
  const p5 = 1 / Math.tan(0.5 * omega[2]);
  const r1 = (p1 * p1) / Math.sin(omega[0]);
  const r3 = -(p3 * p3) / Math.sin(omega[1]);
  const r5 = (p5 * p5) / Math.sin(omega[2]);
  const rho = omega.map((o) => Math.exp(-0.5 * sigma * sigma * o * o) / radius);
  const d13 = p1 * r3 - r1 * p3;
  const d35 = p3 * r5 - r3 * p5;
  const d51 = p5 * r1 - r5 * p1;
  const zeta15 = d35 / d13;
  const zeta35 = d51 / d13;
  const beta = solve3([p1, p3, p5, r1, r3, r5, zeta15, zeta35, 1], [1, radius * radius - sigma * sigma, zeta15 * rho[0] + zeta35 * rho[1] + rho[2]]);
  return { radius, n2: omega.map((o, i) => -beta[i] * Math.cos(o * (radius + 1))), d1: omega.map((o) => -2 * Math.cos(o)) };
}

/** x of the 3×3 system a·x = b (Cramer's rule). */
function solve3(a: number[], b: number[]): number[] {
  const det = (m: number[]) => m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
  const d = det(a);
  return [0, 1, 2].map((col) => {
    const m = [...a];
    for (let row = 0; row < 3; row++) m[row * 3 + col] = b[row];
    return det(m) / d;
  });
}

interface Kernels {
  linear_table(): number;
  to_linear(px: number, n: number, c: number, bg: number, r: number, g: number, b: number): void;
  downsample(src: number, w: number, h: number, dst: number): void;
  to_xyb(r: number, g: number, b: number, n: number, x: number, y: number, bb: number, want: number): void;
  set_gaussian(radius: number, n1: number, n3: number, n5: number, d1: number, d3: number, d5: number): void;
  blur(src: number, by: number, w: number, h: number, dst: number, tmp: number, strip: number, line: number, state: number): void;
  blur_block(): number;
  maps(x1: number, m1: number, s11: number, x2: number, m2: number, s22: number, s12: number, n: number, out: number): void;
  heap_base(): number;
}
let compiled: object | undefined;
/** The pages of a 32-bit module's memory at most (4 GiB). */
const MAX_PAGES = 65536;
const GAUSSIAN = recursiveGaussian(SIGMA);

/**
 * One instance of the kernels with its own memory, and a bump allocator over it: a reference's
 * planes stay below `mark`, each score's scratch above it. When its reference is gone it serves
 * the next one (see `takeArena`).
 */
class Arena {
  readonly k: Kernels;
  private readonly memory: WasmMemory;
  private top: number;
  private readonly base: number;
  private mark = 0;

  constructor() {
    compiled ??= compileWasm(KERNELS_WASM_BASE64);
    ({ exports: this.k, memory: this.memory } = instantiateWasm<Kernels>(compiled, 2));
    this.top = this.k.heap_base();
    this.base = this.top;
    const table = this.f32(this.k.linear_table(), 256);
    for (let i = 0; i < 256; i++) {
      const v = i / 255;
      table[i] = v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    }
    const { radius, n2, d1 } = GAUSSIAN;
    this.k.set_gaussian(radius, n2[0], n2[1], n2[2], d1[0], d1[1], d1[2]);
  }

  alloc(bytes: number): number {
    // Arithmetic, not bitwise: offsets pass 2 GiB for pictures of 20 MP and more.
    const at = Math.ceil(this.top / 16) * 16;
    this.top = at + bytes;
    this.room(0);
    return at;
  }

  /** Bytes allocated since the arena began. */
  used(): number {
    return this.top - this.base;
  }

  f32(at: number, n: number): Float32Array {
    return new Float32Array(this.memory.buffer, at, n);
  }

  f64(at: number, n: number): Float64Array {
    return new Float64Array(this.memory.buffer, at, n);
  }

  bytes(at: number, n: number): Uint8Array {
    return new Uint8Array(this.memory.buffer, at, n);
  }

  /**
   * Everything allocated so far stays; later allocations are freed by `release`. Room for `scratch`
   * more bytes is made now, in one step: growing the memory allocation by allocation during every
   * first score cost more than the score.
   */
  keep(scratch: number): void {
    this.mark = this.top;
    this.room(scratch);
  }

  /**
   * Room for `bytes` more, exactly: a reference that knows what it will take grows its arena once,
   * to that, instead of by halves (which left a 1.4 MP picture's arena 176 MB for 124 used, and two
   * such, a transparent picture's backgrounds, over what a thread keeps idle).
   */
  reserve(bytes: number): void {
    this.room(bytes, true);
  }

  /**
   * Room for `bytes` more past the top. Unless `exact`, at least half the memory's size more while
   * under the 4 GiB a module can address: a fresh arena grown allocation by allocation, each growth
   * a call into the engine, cost its first score tens of milliseconds.
   */
  private room(bytes: number, exact = false): void {
    const pages = this.memory.buffer.byteLength / WASM_PAGE;
    const short = Math.ceil((this.top + bytes) / WASM_PAGE) - pages;
    if (short <= 0) return;
    this.memory.grow(exact ? Math.min(short, MAX_PAGES - pages) : Math.max(short, Math.min(pages >> 1, MAX_PAGES - pages)));
  }

  release(): void {
    this.top = this.mark;
  }

  /** Everything freed, the memory kept at its size. */
  reset(): this {
    this.top = this.base;
    this.mark = 0;
    return this;
  }

  size(): number {
    return this.memory.buffer.byteLength;
  }
}

/**
 * Arenas whose reference is gone, kept for the next reference of this thread: a fresh memory's
 * growth and first touch of its pages cost the first score of every reference about as much as
 * the score itself. Idle arenas hold at most IDLE_BYTES (a 1 MP reference's arena is about 90 MB);
 * a bigger one is let go. They are kept as long as the pool keeps the idle thread itself: let go
 * after 5 s, they cost the next job fresh pages again (jobs 6 s apart through the server: a 3 MP
 * JPG 1.7 -> 1.1 s, an animated GIF 2.0 -> 1.2 s, a transparent logo 3.2 -> 2.0 s) and gave no
 * memory back, since V8 frees a dropped memory only when it collects it, which an idle thread
 * seldom does (the server's RSS 1-45 s after a job was the same either way; docs/operating.md, "Memory").
 */
const IDLE_BYTES = 320 * 1024 * 1024;
/** What a reference and one score's scratch take of an arena, per pixel of the picture (measured: 87-90 at 0.25-1.4 MP, grey to RGBA). */
const ARENA_BYTES_PER_PIXEL = 92;
const idle: Arena[] = [];
const returned = new FinalizationRegistry<Arena>((arena) => giveBack(arena));
let forget: ReturnType<typeof setTimeout> | undefined;

function giveBack(arena: Arena): void {
  const held = idle.reduce((sum, a) => sum + a.size(), 0);
  if (held + arena.size() > IDLE_BYTES) return;
  idle.push(arena.reset());
  clearTimeout(forget);
  forget = setTimeout(() => (idle.length = 0), THREAD_IDLE_MS);
  forget.unref?.();
}

/** The memory idle arenas hold now (for tests). */
export function idleArenaBytes(): number {
  return idle.reduce((sum, a) => sum + a.size(), 0);
}

/**
 * The smallest idle arena that holds `bytes`, else the largest (it grows the least), or a new one.
 * Taking the largest whatever the need gave a search's quarter-size reference the arena of the
 * last job's 1 MP one, and its 1 MP reference the small one to grow: fresh pages, a fault each, on
 * every second job of a thread (a 12 MP phone JPG's scoring 0.5 s on its second run, 0.25 s after).
 */
function takeArena(bytes: number): Arena {
  if (idle.length === 0) return new Arena();
  let best = 0;
  for (let i = 1; i < idle.length; i++) {
    const [size, bestSize] = [idle[i].size(), idle[best].size()];
    const better = bestSize >= bytes ? size >= bytes && size < bestSize : size > bestSize;
    if (better) best = i;
  }
  return idle.splice(best, 1)[0];
}

/** Offsets of three planes. */
type Three = [number, number, number];

interface Scale {
  w: number;
  h: number;
  /** The reference's XYB planes, their blur and the blur of their squares (0 where not needed). */
  xyb: Three;
  mu: Three;
  sigma: Three;
}

/** One background's reference, prepared in its own arena. */
class Prepared {
  private readonly arena: Arena;
  private readonly scales: Scale[] = [];
  private readonly blurScratch: { tmp: number; strip: number; line: number; state: number };

  constructor(private readonly bg: number, px: Pixels) {
    const { width: w0, height: h0 } = px;
    const a = (this.arena = takeArena(w0 * h0 * ARENA_BYTES_PER_PIXEL));
    a.reserve(w0 * h0 * ARENA_BYTES_PER_PIXEL);
    const pw = (w0 + 3) & ~3;
    const block = a.k.blur_block();
    this.blurScratch = { tmp: a.alloc(4 * pw * h0), strip: a.alloc(4 * block * w0), line: a.alloc(4 * block * w0), state: a.alloc(6 * 4 * Math.max(pw, block)) };
    let lin = this.linear(px);
    let w = w0;
    let h = h0;
    for (let s = 0; s < SCALES; s++) {
      if (w < 8 || h < 8) break;
      if (s > 0) [lin, w, h] = this.down(lin, w, h);
      const need = NEEDS[s];
      if (need.every((n) => n === 0)) break;
      const xyb = this.xyb(lin, w, h, need);
      const mu = xyb.map((p, c) => (need[c] ? this.blur(p, w, h) : 0)) as Three;
      const sigma = xyb.map((p, c) => (need[c] === 2 ? this.blur(p, w, h, p) : 0)) as Three;
      this.scales.push({ w, h, xyb, mu, sigma });
    }
    // A score allocates about what the reference holds (its own planes at every scale, its blurs).
    a.keep(a.used());
    returned.register(this, a, this);
  }

  /** Its arena to the idle ones now, for a caller that is done with it. */
  dispose(): void {
    if (returned.unregister(this)) giveBack(this.arena);
  }

  private linear(px: Pixels): Three {
    const a = this.arena;
    const n = px.width * px.height;
    const src = a.alloc(n * px.channels);
    a.bytes(src, n * px.channels).set(px.data.subarray(0, n * px.channels));
    const planes: Three = [a.alloc(4 * n), a.alloc(4 * n), a.alloc(4 * n)];
    a.k.to_linear(src, n, px.channels, this.bg, ...planes);
    return planes;
  }

  private down(lin: Three, w: number, h: number): [Three, number, number] {
    const a = this.arena;
    const [dw, dh] = [(w + 1) >> 1, (h + 1) >> 1];
    const out = lin.map((p) => {
      const d = a.alloc(4 * dw * dh);
      a.k.downsample(p, w, h, d);
      return d;
    }) as Three;
    return [out, dw, dh];
  }

  private xyb(lin: Three, w: number, h: number, need: Need[]): Three {
    const a = this.arena;
    const n = w * h;
    const out = need.map((k) => (k ? a.alloc(4 * n) : 0)) as Three;
    // The kernel writes Y whatever it is asked (B is made from it), so it always gets a plane.
    const y = out[1] || a.alloc(4 * n);
    a.k.to_xyb(lin[0], lin[1], lin[2], n, out[0], y, out[2], (need[0] ? 1 : 0) | 2 | (need[2] ? 4 : 0));
    out[1] = y;
    return out;
  }

  /** The blur of p, or with q of the product p·q. */
  private blur(p: number, w: number, h: number, q = 0): number {
    const out = this.arena.alloc(4 * w * h);
    const { tmp, strip, line, state } = this.blurScratch;
    this.arena.k.blur(p, q, w, h, out, tmp, strip, line, state);
    return out;
  }

  score(px: Pixels): number {
    const a = this.arena;
    const figures = new Float64Array(SCALES * 18);
    const sums = a.alloc(6 * 8);
    try {
      let lin = this.linear(px);
      this.scales.forEach((ref, s) => {
        const { w, h } = ref;
        if (s > 0) [lin] = this.down(lin, this.scales[s - 1].w, this.scales[s - 1].h);
        const need = NEEDS[s];
        const xyb = this.xyb(lin, w, h, need);
        for (let c = 0; c < 3; c++) {
          if (!need[c]) continue;
          const mu = this.blur(xyb[c], w, h);
          const ssim = need[c] === 2;
          const s22 = ssim ? this.blur(xyb[c], w, h, xyb[c]) : 0;
          const s12 = ssim ? this.blur(ref.xyb[c], w, h, xyb[c]) : 0;
          a.k.maps(ref.xyb[c], ref.mu[c], ref.sigma[c], xyb[c], mu, s22, s12, w * h, sums);
          const n = w * h;
          const [ssim1, ssim4, art1, art4, lost1, lost4] = a.f64(sums, 6);
          const at = s * 18 + c * 6;
          figures.set([ssim1 / n, Math.sqrt(Math.sqrt(ssim4 / n)), art1 / n, Math.sqrt(Math.sqrt(art4 / n)), lost1 / n, Math.sqrt(Math.sqrt(lost4 / n))], at);
        }
      });
    } finally {
      a.release();
    }
    return scoreOf(figures);
  }
}

/** A picture prepared once as the original that distorted versions of it are scored against. */
export class Ssimulacra2Reference {
  /** One per background (with alpha: dark, then light, the second prepared when first needed). */
  private readonly prepared: (Prepared | undefined)[];
  private readonly backgrounds: number[];
  /** The backgrounds' indices in the order they are scored (see worstOver). */
  private readonly order: number[];
  /** The original has an alpha channel but every pixel is opaque. */
  private readonly opaque: boolean;
  readonly width: number;
  readonly height: number;

  constructor(private readonly original: Pixels) {
    this.width = original.width;
    this.height = original.height;
    const alpha = hasAlpha(original);
    // With transparency the score is the worse of a dark and a light background, as the reference's.
    this.backgrounds = alpha ? [0.1, 0.9] : [0];
    this.opaque = alpha && fullyOpaque(original);
    this.prepared = this.backgrounds.map(() => undefined);
    this.order = this.backgrounds.map((_, i) => i);
  }

  /**
   * SSIMULACRA2 of a distorted version of the same size (grey taken as R = G = B; alpha as the
   * reference's). Two opaque pictures blend the same over any background: one is scored. With
   * `below`, a score under it is returned as soon as one background gives it (the worse of the two
   * is lower still): what a search that only asks "does it pass?" needs, at half the cost.
   */
  score(distorted: Pixels, below = -Infinity): number {
    return phaseSync('score', () => this.worstOver(distorted, below));
  }

  /**
   * Prepares the reference now (its first background; a second one stays on demand) instead of
   * at the first score: a search starts a probe's encode, which libvips runs on its own threads,
   * then prepares the reference while it waits for it. Counted as scoring, which it is part of.
   */
  prepare(): void {
    phaseSync('score', () => (this.prepared[0] ??= new Prepared(this.backgrounds[0], this.original)));
  }

  /** Its memory to the next reference now rather than when it is collected; not to be used after. */
  dispose(): void {
    for (const p of this.prepared) p?.dispose();
  }

  private worstOver(distorted: Pixels, below: number): number {
    if (distorted.width !== this.width || distorted.height !== this.height) {
      throw new RangeError(`ssimulacra2: sizes differ (${this.width}×${this.height} vs ${distorted.width}×${distorted.height})`);
    }
    const count = this.opaque && fullyOpaque(distorted) ? 1 : this.backgrounds.length;
    let worst = Infinity;
    let worstAt = 0;
    for (const i of count === 1 ? [this.order[0]] : this.order) {
      this.prepared[i] ??= new Prepared(this.backgrounds[i], this.original);
      const score = this.prepared[i]!.score(distorted);
      if (score < worst) [worst, worstAt] = [score, i];
      if (worst < below) break;
    }
    // The background that scored worse is tried first next time: a failing candidate of a search
    // (score under `below`) then usually costs one score, not two.
    if (count > 1 && this.order[0] !== worstAt) this.order.reverse();
    return worst;
  }
}

function hasAlpha(p: Pixels): boolean {
  return p.channels === 2 || p.channels === 4;
}

/** No alpha channel, or one at 255 everywhere. */
function fullyOpaque(p: Pixels): boolean {
  if (!hasAlpha(p)) return true;
  const { data, channels: c } = p;
  for (let i = c - 1; i < p.width * p.height * c; i += c) if (data[i] !== 255) return false;
  return true;
}

/** SSIMULACRA2 of `distorted` against `original` (same size). */
export function ssimulacra2(original: Pixels, distorted: Pixels): number {
  const reference = new Ssimulacra2Reference(original);
  try {
    return reference.score(distorted);
  } finally {
    reference.dispose();
  }
}
