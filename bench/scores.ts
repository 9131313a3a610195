// SSIMULACRA2 as the quality benchmark uses it, beside the luma SSIM it has always reported: the
// pixel preparations both metrics need to see the same thing (opaque alpha dropped, animation
// frames apart, RAW binned 2×2) and a judge that prepares a reference once for many outputs.
import { binnedSsim, ssim, type Pixels } from '../workers/image/ssim.ts';
import { Ssimulacra2Reference, ssimulacra2 } from '../workers/image/ssimulacra2.ts';

/** One output's quality against the reference decode: luma SSIM, and SSIMULACRA2 unless it was left out. */
export interface Scores {
  ssim: number;
  score?: number;
}

/**
 * SSIMULACRA2 holds about 80 bytes per pixel of the reference; past this a single picture would
 * need gigabytes (and WebAssembly's 4 GB), and downscaling would change what is judged, so the score
 * is left out instead (the file still has its luma SSIM).
 */
export const MAX_SCORED_PIXELS = 40e6;

/** The same pixels without an alpha channel that is 255 everywhere (an opaque picture is scored once, not on two backgrounds). */
export function opaque(p: Pixels): Pixels {
  const c = p.channels;
  if (c !== 2 && c !== 4) return p;
  const n = p.width * p.height;
  for (let i = c - 1; i < n * c; i += c) if (p.data[i] !== 255) return p;
  const out = new Uint8Array(n * (c - 1));
  for (let i = 0, o = 0; i < n * c; i += c) for (let k = 0; k < c - 1; k++) out[o++] = p.data[i + k];
  return { data: out, width: p.width, height: p.height, channels: c - 1 };
}

/**
 * Mean of every 2×2 block in every channel (odd last row or column dropped): a camera RAW is scored
 * as the sensor recorded it, as the luma rule bins it, so dcraw's demosaicing guess is not judged.
 */
export function binRgb2x2(p: Pixels): Pixels {
  const { width, height, channels: c, data } = p;
  const [w, h] = [width >> 1, height >> 1];
  const out = new Uint8Array(w * h * c);
  const row = width * c;
  for (let j = 0; j < h; j++) {
    for (let i = 0; i < w; i++) {
      const a = 2 * j * row + 2 * i * c;
      for (let k = 0; k < c; k++) out[(j * w + i) * c + k] = (data[a + k] + data[a + c + k] + data[a + row + k] + data[a + row + c + k] + 2) >> 2;
    }
  }
  return { data: out, width: w, height: h, channels: c };
}

/** Frames stacked top to bottom (sharp's animated decode) as separate pictures, without copying. */
function frames(p: Pixels, frameHeight: number): Pixels[] {
  const count = Math.max(1, Math.round(p.height / frameHeight));
  const size = p.width * frameHeight * p.channels;
  return Array.from({ length: count }, (_, i) => ({ ...p, height: frameHeight, data: p.data.subarray(i * size, (i + 1) * size) }));
}

/**
 * Scores outputs against one reference: luma SSIM as the benchmark always has (over the stacked
 * frames; binned luma for RAW), and SSIMULACRA2 per frame, the mean over the frames (binned RGB for
 * RAW). A still picture's reference is prepared once; an animation's frames are prepared per call,
 * so memory stays one frame's.
 */
export class ScoreJudge {
  private readonly frameHeight: number;
  private prepared?: Ssimulacra2Reference;
  private failed = false;

  constructor(
    private readonly ref: Pixels,
    private readonly options: { frameHeight?: number; binned?: boolean } = {},
  ) {
    this.frameHeight = options.binned ? ref.height >> 1 : Math.min(ref.height, options.frameHeight ?? ref.height);
  }

  /** Undefined when the sizes differ (the output is not the same picture). */
  score(output: Pixels): Scores | undefined {
    if (output.width !== this.ref.width || output.height !== this.ref.height) return undefined;
    const binned = this.options.binned === true;
    return { ssim: (binned ? binnedSsim : ssim)(this.ref, output), score: this.s2(binned ? binRgb2x2(output) : output) };
  }

  private s2(p: Pixels): number | undefined {
    if (p.width * this.frameHeight > MAX_SCORED_PIXELS || this.failed) return undefined;
    try {
      return this.s2Of(p);
    } catch (err) {
      // The file keeps its luma row; its SSIMULACRA2 is reported as left out, not the whole file lost.
      this.failed = true;
      console.warn(`quality: SSIMULACRA2 failed on a ${p.width}×${this.frameHeight} picture: ${(err as Error).message}`);
      return undefined;
    }
  }

  private s2Of(p: Pixels): number {
    if (this.frameHeight >= p.height) {
      this.prepared ??= new Ssimulacra2Reference(opaque(this.options.binned ? binRgb2x2(this.ref) : this.ref));
      return this.prepared.score(opaque(p));
    }
    const [a, b] = [frames(this.ref, this.frameHeight), frames(p, this.frameHeight)];
    return a.reduce((sum, f, i) => sum + ssimulacra2(opaque(f), opaque(b[i])), 0) / a.length;
  }
}
