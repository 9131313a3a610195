import { Canvas } from './compose.ts';
import { lzwDecode, lzwEncode } from './lzw.ts';
import { parseGif, writeGif, type EncodedFrame, type GifFile, type GifFrame } from './parse.ts';
import { ssimOfLuma } from '../ssim.ts';

export interface Recompressed {
  data: Buffer;
  /** Mean luma SSIM of the displayed frames (whole screen, see compose.ts) against the input's. */
  ssim: number;
}

/**
 * A GIF prepared for recompression: parsed once, with the luma of its displayed frames kept
 * as the reference every lossy level is measured against.
 */
export class GifRecompressor {
  private readonly file: GifFile;
  private readonly reference: Float32Array[] = [];

  /** Throws on malformed structure. */
  constructor(gif: Uint8Array) {
    this.file = parseGif(gif);
    const screen = new Canvas(this.file.width, this.file.height);
    for (const f of this.file.frames) {
      screen.draw(f, f.indices);
      this.reference.push(screen.luma.slice());
      screen.dispose(f);
    }
  }

  /** Screen pixels over all frames: what one recompression composites and scores. */
  get screenPixels(): number {
    return this.file.width * this.file.height * this.file.frames.length;
  }

  /**
   * Re-encodes every frame against what the screen shows (see lzwEncode's backdrop) and copies
   * everything else byte for byte: screen descriptor, palettes, loop count, per-frame delays
   * and disposal, comments. Frame count and timing therefore cannot change. Inter-frame
   * optimisation comes with it: a frame after the first gets a transparent index when it has
   * none and its palette has a free entry, is cropped to the pixels that differ (by more than
   * `threshold`) from what is already shown, and inside that, a transparent pixel may take a
   * colour close to what is under it and an opaque one may turn transparent where the screen
   * already shows nearly its colour, whenever that makes longer strings. Threshold 0 changes
   * nothing that is shown. The SSIM is that of the displayed frames, so errors that stay on
   * screen under later frames count every time.
   */
  recompress(threshold: number): Recompressed {
    const { frames, width, height } = this.file;
    const wanted = new Canvas(width, height);
    const shown = new Canvas(width, height);
    const encoded: EncodedFrame[] = [];
    let total = 0;
    frames.forEach((f, i) => {
      wanted.draw(f, f.indices);
      const transparent = f.transparent >= 0 || i === 0 ? f.transparent : freeIndex(f);
      let frame: GifFrame = f;
      let backdrop;
      if (transparent >= 0) {
        backdrop = { target: wanted.pick(f), under: shown.pick(f) };
        if (f.disposal !== 2 && !f.interlaced) ({ frame, backdrop } = cropped(f, transparent, backdrop, threshold * threshold));
      }
      const data = lzwEncode(frame.indices, f.minCodeSize, { rgb: f.palette, transparent }, threshold, backdrop);
      encoded.push({ left: frame.left, top: frame.top, width: frame.width, height: frame.height, transparent, data });
      shown.draw({ ...frame, transparent }, lzwDecode(data, f.minCodeSize, frame.width * frame.height));
      total += ssimOfLuma(this.reference[i], shown.luma, width, height);
      wanted.dispose(f);
      shown.dispose(frame);
    });
    return { data: writeGif(this.file, encoded), ssim: frames.length > 0 ? total / frames.length : 1 };
  }
}

/** A palette entry no pixel of the frame uses and LZW can write, or -1. */
function freeIndex(f: GifFrame): number {
  const used = new Uint8Array(256);
  for (const k of f.indices) used[k] = 1;
  const n = Math.min(f.palette.length / 3, 1 << f.minCodeSize, 256);
  for (let k = n - 1; k >= 0; k--) if (!used[k]) return k;
  return -1;
}

type Backdrop = { target: Int16Array; under: Int16Array };

/**
 * The frame cut to the smallest rectangle holding every pixel that must be drawn: shown
 * nothing where the input shows something or the reverse, or a colour farther than `limit`
 * (squared weighted RGB distance, as in lzwEncode) from the input's. At least one pixel stays.
 */
function cropped(f: GifFrame, transparent: number, backdrop: Backdrop, limit: number): { frame: GifFrame; backdrop: Backdrop } {
  const { target, under } = backdrop;
  let x0 = f.width;
  let y0 = f.height;
  let x1 = -1;
  let y1 = -1;
  for (let y = 0, pos = 0; y < f.height; y++) {
    for (let x = 0; x < f.width; x++, pos++) {
      const o = pos * 3;
      const t = target[o];
      const u = under[o];
      let fits: boolean;
      if (t < 0 || u < 0) fits = t < 0 && u < 0;
      else {
        const dr = t - u;
        const dg = target[o + 1] - under[o + 1];
        const db = target[o + 2] - under[o + 2];
        fits = (dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9 <= limit;
      }
      if (fits) continue;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      y1 = y;
    }
  }
  // A frame that changes nothing keeps one pixel, transparent: frames cannot be dropped.
  const nothing = x1 < 0;
  if (nothing) {
    x0 = x1 = 0;
    y0 = y1 = 0;
  }
  const w = x1 - x0 + 1;
  const h = y1 - y0 + 1;
  if (w === f.width && h === f.height) return { frame: f, backdrop };
  const indices = new Uint8Array(w * h);
  const t2 = new Int16Array(w * h * 3);
  const u2 = new Int16Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    const from = (y0 + y) * f.width + x0;
    indices.set(f.indices.subarray(from, from + w), y * w);
    t2.set(target.subarray(from * 3, (from + w) * 3), y * w * 3);
    u2.set(under.subarray(from * 3, (from + w) * 3), y * w * 3);
  }
  if (nothing) indices[0] = transparent;
  return { frame: { ...f, left: f.left + x0, top: f.top + y0, width: w, height: h, indices }, backdrop: { target: t2, under: u2 } };
}
