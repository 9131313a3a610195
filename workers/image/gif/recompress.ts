import { Canvas } from './compose.ts';
import { lzwEncode, type Backdrop, type LzwOptions } from './lzw.ts';
import { parseGif, writeGif, type EncodedFrame, type GifFile, type GifFrame } from './parse.ts';
import type { Pixels } from '../ssim.ts';

export interface Recompressed {
  data: Buffer;
  /** The watched displayed frames (see GifRecompressor.watch), stacked top to bottom as RGBA. */
  frames?: Pixels;
}

/** A recompression begun (GifRecompressor.begin): its watched frames as displayed, and the rest of it. */
export interface Pending {
  frames?: Pixels;
  finish(): Recompressed;
}

/** Where a recompression stands: its frames encoded so far, its watched frames shown so far, the next frame. */
interface Pass {
  threshold: number;
  encoded: EncodedFrame[];
  displayed: Pixels | undefined;
  next: number;
}

/** The screen as the input shows it once a frame is drawn, and as the recompression showed it before. */
type Screens = { wanted: Canvas; shown: Canvas };

/**
 * A GIF prepared for recompression: parsed once. Each recompression composites the input's
 * displayed frames alongside its own: what a frame is encoded against, and what the watched
 * frames show.
 */
export class GifRecompressor {
  private readonly file: GifFile;
  /** Per frame: the transparent index its re-encode uses. */
  private readonly transparent: number[];
  /** Pixels of all frames' rectangles: what one recompression encodes. */
  readonly framePixels: number;
  /** Scratch for a backdrop's runs and for the indices a frame decodes to, grown to the largest frame. */
  private runs = new Int32Array(0);
  private shows = [new Uint8Array(0), new Uint8Array(0)];
  /** Per frame, once known: whether its own smaller colour table, and a deferred clear, encoded it smaller. */
  private readonly choice: ({ local: boolean; defer: boolean } | undefined)[] = [];
  /** The screens as the input and the recompression show them: kept across recompressions. */
  private readonly wanted: Canvas;
  private readonly shown: Canvas;
  /**
   * The exact re-encode once made: the search starts from it and may fall back to it, and a
   * second encode would give the same bytes (by then every frame's choice is known).
   */
  private exact: Recompressed | undefined;
  /** Frame index -> its place among the watched frames. */
  private watched = new Map<number, number>();
  /** The recompression the screens belong to, until it is finished. */
  private pass: Pass | undefined;

  /** Throws on malformed structure. */
  constructor(gif: Uint8Array) {
    this.file = parseGif(gif);
    const { frames, width, height } = this.file;
    this.transparent = frames.map((f, i) => (f.transparent >= 0 || i === 0 ? f.transparent : freeIndex(f)));
    this.framePixels = frames.reduce((n, f) => n + f.width * f.height, 0);
    this.wanted = new Canvas(width, height);
    this.shown = new Canvas(width, height);
  }

  /** The screen's size and the number of frames. */
  get screen(): { width: number; height: number; frames: number } {
    return { width: this.file.width, height: this.file.height, frames: this.file.frames.length };
  }

  /**
   * From now on every recompression also returns these displayed frames (by index, in this
   * order), composited as it draws them: what a perceived score needs, without decoding the file.
   */
  watch(frames: number[]): void {
    this.watched = new Map(frames.map((f, k) => [f, k]));
  }

  /** The input's watched frames as displayed (see watch). */
  inputFrames(): Pixels {
    const { frames, width, height } = this.file;
    const screen = new Canvas(width, height);
    const out = this.watchedPixels();
    for (let i = 0; i < frames.length; i++) {
      screen.draw(frames[i], frames[i].indices);
      const k = this.watched.get(i);
      if (k !== undefined) screen.rgbaInto(out.data, k * width * height * 4);
      screen.dispose(frames[i]);
    }
    return out;
  }

  private watchedPixels(): Pixels {
    const { width, height } = this.file;
    return { data: new Uint8Array(width * height * 4 * this.watched.size), width, height: height * this.watched.size, channels: 4 };
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
   * nothing that is shown.
   */
  recompress(threshold: number): Recompressed {
    return this.begin(threshold).finish();
  }

  /**
   * A recompression encoded as far as its last watched frame: enough for their perceived score
   * (`frames`), which a search may find failing and leave there, before `finish` encodes the
   * rest. Its bytes are recompress's. It holds the screens: another recompression begun before
   * it is finished ends it (its finish then throws); finished, it gives the same file again.
   */
  begin(threshold: number): Pending {
    const done = threshold === 0 ? this.exact : undefined;
    if (done) return { frames: done.frames, finish: () => done };
    const { frames } = this.file;
    const pass = { threshold, encoded: [] as EncodedFrame[], displayed: this.watched.size > 0 ? this.watchedPixels() : undefined, next: 0 };
    this.wanted.clear();
    this.shown.clear();
    this.pass = pass;
    this.encodeFrames(pass, Math.max(-1, ...this.watched.keys()) + 1);
    let result: Recompressed | undefined;
    return {
      frames: pass.displayed,
      finish: () => {
        if (result) return result;
        if (this.pass !== pass) throw new Error('another recompression was begun before this one was finished');
        this.encodeFrames(pass, frames.length);
        this.pass = undefined;
        result = { data: writeGif(this.file, pass.encoded), frames: pass.displayed };
        if (threshold === 0) this.exact = result;
        return result;
      },
    };
  }

  /** Encodes the pass's frames from where it stands up to (not including) frame `end`. */
  private encodeFrames(pass: Pass, end: number): void {
    const { frames } = this.file;
    const { wanted, shown } = this;
    const { threshold, encoded, displayed } = pass;
    for (; pass.next < end; pass.next++) {
      const i = pass.next;
      const f = frames[i];
      wanted.draw(f, f.indices);
      const transparent = this.transparent[i];
      let frame: GifFrame = f;
      if (transparent >= 0 && f.disposal !== 2 && !f.interlaced) frame = cropped(f, transparent, { wanted, shown }, threshold * threshold);
      const backdrop = transparent >= 0 ? this.backdrop(frame, wanted, shown) : undefined;
      // The lossy encoder only ever writes indices the frame uses (its strings are made of them)
      // or the transparent one, so a table of just those loses nothing and may code the pixels
      // in fewer bits; and a frame whose LZW table fills may code better keeping the full table
      // than clearing it. Whether either pays depends on how the frame compresses: the first
      // time a frame has the choice every variant is encoded, and later recompressions (other
      // thresholds, which change a frame's bytes far less than its colours) keep the winner.
      const known = this.choice[i];
      const local = known && !known.local ? undefined : smallerPalette(frame, transparent);
      const variants: { local: boolean; defer: boolean }[] = known
        ? [{ local: local !== undefined, defer: known.defer }]
        : [{ local: false, defer: false }, ...(local ? [{ local: true, defer: false }] : [])];
      let best: ReturnType<GifRecompressor['encodeFrame']> | undefined;
      let bestSize = Infinity;
      let bestSlot = 0;
      let winner = variants[0];
      for (let v = 0; v < variants.length; v++) {
        const { local: useLocal, defer } = variants[v];
        const input = useLocal && local ? { ...frame, indices: local.indices, palette: local.palette, minCodeSize: local.minCodeSize } : frame;
        const encodedFrame = this.encodeFrame(input, bestSize === Infinity ? 0 : 1 - bestSlot, { transparent: useLocal && local ? local.transparent : transparent, threshold, backdrop, deferClear: defer });
        const size = encodedFrame.data.length + (useLocal && local ? local.palette.length : 0);
        if (size < bestSize) {
          best = useLocal && local ? { ...encodedFrame, local: { palette: local.palette, minCodeSize: local.minCodeSize } } : encodedFrame;
          bestSize = size;
          winner = variants[v];
          bestSlot = encodedFrame.slot;
        }
        // A table that filled up: also try keeping it full.
        if (!known && !defer && encodedFrame.data.filled) variants.push({ local: useLocal, defer: true });
      }
      this.choice[i] ??= winner;
      best = best!;
      encoded.push({ left: frame.left, top: frame.top, width: frame.width, height: frame.height, transparent: best.transparent, data: best.data, local: best.local });
      shown.draw({ ...best.frame, transparent: best.transparent }, best.indices);
      const watched = this.watched.get(i);
      if (displayed && watched !== undefined) shown.rgbaInto(displayed.data, watched * shown.width * shown.height * 4);
      wanted.dispose(f);
      shown.dispose(frame);
    }
  }

  /** One frame's LZW data, and the indices it decodes to (in scratch buffer `slot`, 0 or 1). */
  private encodeFrame(frame: GifFrame, slot: number, how: { transparent: number } & Omit<LzwOptions, 'shows'>) {
    if (this.shows[slot].length < frame.indices.length) this.shows[slot] = new Uint8Array(frame.indices.length);
    const indices = this.shows[slot].subarray(0, frame.indices.length);
    const { transparent, ...lossy } = how;
    const data = lzwEncode(frame.indices, frame.minCodeSize, { rgb: frame.palette, transparent }, { ...lossy, shows: indices });
    return { frame, transparent, data, indices, slot, local: undefined as EncodedFrame['local'] };
  }

  /**
   * The screens around a frame for lzwEncode: read in place, a row a run, when the frame lies
   * on the screen row by row, else picked out (interlaced, or partly off the screen).
   */
  private backdrop(f: GifFrame, wanted: Canvas, shown: Canvas): Backdrop {
    if (f.interlaced || f.left + f.width > wanted.width || f.top + f.height > wanted.height) {
      return { target: wanted.pick(f), under: shown.pick(f), runs: Int32Array.of(0, f.width * f.height) };
    }
    if (this.runs.length < f.height * 2) this.runs = new Int32Array(f.height * 2);
    const runs = this.runs.subarray(0, f.height * 2);
    for (let y = 0; y < f.height; y++) {
      runs[2 * y] = ((f.top + y) * wanted.width + f.left) * 3;
      runs[2 * y + 1] = f.width;
    }
    return { target: wanted.rgb, under: shown.rgb, runs };
  }
}

/**
 * A local colour table of only the colours a frame uses (and its transparent index), when it
 * allows a smaller code size: a screen recording's frames draw a few colours of a 256-colour
 * palette (8 in the median frame), so its codes start at 4 bits instead of 9.
 */
function smallerPalette(f: GifFrame, transparent: number): { indices: Uint8Array; palette: Uint8Array; minCodeSize: number; transparent: number } | undefined {
  const used = usedIndices(f.indices);
  if (transparent >= 0) used[transparent] = 1;
  let count = 0;
  for (let k = 0; k < 256; k++) count += used[k];
  const bits = Math.max(1, Math.ceil(Math.log2(Math.max(2, count))));
  const minCodeSize = Math.max(2, bits);
  const entries = 1 << bits;
  if (minCodeSize >= f.minCodeSize) return undefined;
  const map = new Uint8Array(256);
  const palette = new Uint8Array(entries * 3);
  for (let k = 0, n = 0; k < 256; k++) {
    if (!used[k]) continue;
    map[k] = n;
    for (let c = 0; c < 3; c++) palette[n * 3 + c] = f.palette[k * 3 + c] ?? 0;
    n++;
  }
  const from = f.indices;
  const indices = new Uint8Array(from.length);
  for (let i = 0; i < from.length; i++) indices[i] = map[from[i]];
  return { indices, palette, minCodeSize, transparent: transparent >= 0 ? map[transparent] : -1 };
}

/** 1 for each palette index the pixels use. (An indexed loop: `for…of` over the pixels was 4 % of a GIF job.) */
function usedIndices(indices: Uint8Array): Uint8Array {
  const used = new Uint8Array(256);
  for (let i = 0; i < indices.length; i++) used[indices[i]] = 1;
  return used;
}

/** A palette entry no pixel of the frame uses and LZW can write, or -1. */
function freeIndex(f: GifFrame): number {
  const used = usedIndices(f.indices);
  const n = Math.min(f.palette.length / 3, 1 << f.minCodeSize, 256);
  for (let k = n - 1; k >= 0; k--) if (!used[k]) return k;
  return -1;
}

/**
 * The frame cut to the smallest rectangle holding every pixel that must be drawn: where the
 * screen the input shows (`wanted`, this frame drawn) and the one the encoded animation shows
 * (`shown`, before this frame) differ in showing nothing or something, or by a colour farther
 * than `limit` (squared weighted RGB distance, as in lzwEncode). At least one pixel stays.
 */
function cropped(f: GifFrame, transparent: number, { wanted, shown }: Screens, limit: number): GifFrame {
  const target = wanted.rgb;
  const under = shown.rgb;
  const screenWidth = wanted.width;
  const { left, top } = f;
  // Off the screen both show nothing: only the part on it can differ.
  const w0 = Math.max(0, Math.min(f.width, screenWidth - left));
  const h0 = Math.max(0, Math.min(f.height, wanted.height - top));
  /** First x in [from, to) (stepping by `step`) of row y where the screens differ, or `to`. */
  const scan = (y: number, from: number, to: number, step: number): number => {
    let o = ((top + y) * screenWidth + left + from) * 3;
    for (let x = from; x !== to; x += step, o += step * 3) {
      const t = target[o];
      const u = under[o];
      if (t < 0 || u < 0) {
        if (t >= 0 || u >= 0) return x;
        continue;
      }
      const dr = t - u;
      const dg = target[o + 1] - under[o + 1];
      const db = target[o + 2] - under[o + 2];
      if ((dr * dr * 3 + dg * dg * 4 + db * db * 2) / 9 > limit) return x;
    }
    return to;
  };
  // Rows from the top and the bottom, then within the rows between, columns from either side:
  // each pixel is read at most about once, and most not at all when the change is small.
  let y0 = 0;
  while (y0 < h0 && scan(y0, 0, w0, 1) === w0) y0++;
  let y1 = h0 - 1;
  while (y1 > y0 && scan(y1, 0, w0, 1) === w0) y1--;
  let x0 = w0;
  let x1 = -1;
  for (let y = y0; y <= y1 && y < h0; y++) {
    if (x0 > 0) x0 = Math.min(x0, scan(y, 0, x0, 1));
    if (x1 < w0 - 1) x1 = Math.max(x1, scan(y, w0 - 1, x1, -1));
  }
  // A frame that changes nothing keeps one pixel, transparent: frames cannot be dropped.
  const nothing = x1 < 0;
  if (nothing) {
    x0 = x1 = 0;
    y0 = y1 = 0;
  }
  const w = x1 - x0 + 1;
  const h = y1 - y0 + 1;
  if (w === f.width && h === f.height) return f;
  const indices = new Uint8Array(w * h);
  for (let y = 0; y < h; y++) {
    const from = (y0 + y) * f.width + x0;
    indices.set(f.indices.subarray(from, from + w), y * w);
  }
  if (nothing) indices[0] = transparent;
  return { ...f, left: f.left + x0, top: f.top + y0, width: w, height: h, indices };
}
