// Comparison at equal quality, on either metric the quality benchmark reports: each peer's bytes
// interpolated at the quality our output reaches, and the per-file record bench/results/quality.json
// holds (read back by BENCH_QUALITY_JSON and bench/compare-quality.ts).

export interface Point {
  setting: string;
  bytes: number;
  /** Mean luma SSIM against the reference decode. */
  ssim: number;
  /** SSIMULACRA2 against the same reference (absent where it was left out). */
  score?: number;
  ms: number;
}

export interface Measured {
  kind: string;
  file: string;
  bytesIn: number;
  /**
   * For documents, `score` is the mean over the pictures and `worstScore` the worst picture;
   * `reported`: the perceived quality our compressor reported (its search's prediction, from the
   * proxy: for documents, its lowest lossy picture).
   */
  ours: Point & { worstScore?: number; reported?: number };
  peers: Record<string, Point[]>;
}

/** Which metric "equal quality" means. */
export type Metric = 'ssim' | 'score';

/**
 * Distance from lossless on a log scale, the axis sizes are interpolated along: 1 − SSIM, or
 * 100 − SSIMULACRA2 (floored, so an identical output sits at a finite place).
 */
const loss = (metric: Metric, v: number): number => (metric === 'ssim' ? Math.log(Math.max(1e-5, 1 - v)) : Math.log(Math.max(0.01, 100 - v)));

export interface AtQuality {
  bytes: number;
  /** `beyond`: the peer never reached our quality, its size there is larger; `below`: ours is under every setting of it. */
  bound?: 'beyond' | 'below';
}

/**
 * The peer's bytes at quality `s`: log bytes interpolated against the log distance from lossless
 * between the two settings around it, or its nearest setting when `s` lies outside what it reached.
 */
export function bytesAt(points: Point[], s: number, metric: Metric = 'ssim'): AtQuality | undefined {
  const q = (p: Point): number => (metric === 'ssim' ? p.ssim : (p.score ?? NaN));
  const sorted = points.filter((p) => Number.isFinite(q(p))).sort((a, b) => q(a) - q(b) || a.bytes - b.bytes);
  if (sorted.length === 0) return undefined;
  if (s > q(sorted[sorted.length - 1])) return { bytes: sorted[sorted.length - 1].bytes, bound: 'beyond' };
  if (s < q(sorted[0])) return { bytes: sorted[0].bytes, bound: 'below' };
  const l = (v: number) => loss(metric, v);
  let best = Infinity;
  for (let i = 0; i + 1 < sorted.length; i++) {
    const [a, b] = [sorted[i], sorted[i + 1]];
    if (s < q(a) || s > q(b)) continue;
    const f = l(q(a)) === l(q(b)) ? 0 : (l(s) - l(q(a))) / (l(q(b)) - l(q(a)));
    best = Math.min(best, Math.exp(Math.log(a.bytes) + f * (Math.log(b.bytes) - Math.log(a.bytes))));
  }
  // A setting at or above our quality that is smaller than the interpolation (curves are not monotonic).
  for (const p of sorted) if (q(p) >= s) best = Math.min(best, p.bytes);
  return { bytes: best };
}

export interface Ratio {
  peer: string;
  ratio: number;
  bound?: 'beyond' | 'below';
}

/** Our quality on `metric` (undefined where SSIMULACRA2 was left out). */
export const oursAt = (m: Measured, metric: Metric): number | undefined => (metric === 'ssim' ? m.ours.ssim : m.ours.score);

export function ratios(m: Measured, metric: Metric = 'ssim'): Ratio[] {
  const s = oursAt(m, metric);
  if (s === undefined) return [];
  return Object.entries(m.peers).flatMap(([peer, points]) => {
    const at = bytesAt(points, s, metric);
    return at ? [{ peer, ratio: m.ours.bytes / at.bytes, bound: at.bound }] : [];
  });
}

/**
 * The peer that is smallest at our quality. A peer that never reached it gives no equal-quality
 * comparison; a file where no peer did has none (listed apart).
 */
export function strongest(m: Measured, metric: Metric = 'ssim'): Ratio | undefined {
  const r = ratios(m, metric).filter((x) => x.bound !== 'beyond');
  return r.length ? r.reduce((a, b) => (b.ratio > a.ratio ? b : a)) : undefined;
}

/** One file in bench/results/quality.json: the figures a script compares, then every peer setting. */
export interface FileResult {
  kind: string;
  file: string;
  inBytes: number;
  ourBytes: number;
  /** SSIMULACRA2 (documents: mean over the pictures). */
  ourScore?: number;
  /** Documents: the worst picture's SSIMULACRA2. */
  ourWorstPicture?: number;
  /** What our compressor reported as the perceived quality reached (absent: nothing lossy). */
  ourReported?: number;
  ourLumaSsim: number;
  ourMs: number;
  /** Each peer's bytes interpolated at ourScore. */
  peerBytesAtScore: Record<string, AtQuality>;
  /** Each peer's bytes interpolated at ourLumaSsim. */
  peerBytesAtSsim: Record<string, AtQuality>;
  peers: Record<string, Point[]>;
}

function atEach(m: Measured, metric: Metric): Record<string, AtQuality> {
  const s = oursAt(m, metric);
  if (s === undefined) return {};
  return Object.fromEntries(Object.entries(m.peers).flatMap(([peer, points]) => {
    const at = bytesAt(points, s, metric);
    return at ? [[peer, { bytes: Math.round(at.bytes), ...(at.bound ? { bound: at.bound } : {}) }]] : [];
  }));
}

export function toResult(m: Measured): FileResult {
  return {
    kind: m.kind,
    file: m.file,
    inBytes: m.bytesIn,
    ourBytes: m.ours.bytes,
    ourScore: m.ours.score,
    ourWorstPicture: m.ours.worstScore,
    ourReported: m.ours.reported,
    ourLumaSsim: m.ours.ssim,
    ourMs: m.ours.ms,
    peerBytesAtScore: atEach(m, 'score'),
    peerBytesAtSsim: atEach(m, 'ssim'),
    peers: m.peers,
  };
}

/** Reads a saved record back; files written before SSIMULACRA2 hold the Measured shape itself. */
export function fromResult(r: FileResult | Measured): Measured {
  if ('ours' in r) return r;
  return {
    kind: r.kind,
    file: r.file,
    bytesIn: r.inBytes,
    ours: { setting: 'ours', bytes: r.ourBytes, ssim: r.ourLumaSsim, score: r.ourScore, worstScore: r.ourWorstPicture, reported: r.ourReported, ms: r.ourMs },
    peers: r.peers,
  };
}
