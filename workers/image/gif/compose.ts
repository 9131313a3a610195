import type { GifFrame } from './parse.ts';

/**
 * The logical screen of a GIF as a viewer shows it while playing: each frame is drawn over what
 * the previous one left after its disposal (2 clears its rectangle, 3 restores what was under
 * it); transparent pixels leave the canvas as it was. Kept as RGB per pixel (red -1 where
 * nothing has been drawn).
 */
export class Canvas {
  readonly rgb: Int16Array;
  private saved: Int16Array | undefined;

  constructor(readonly width: number, readonly height: number) {
    this.rgb = new Int16Array(width * height * 3);
    this.clear();
  }

  /** Back to nothing drawn, as before the first frame. */
  clear(): void {
    this.rgb.fill(-1);
    this.saved = undefined;
  }

  /** Draws a frame whose pixels are `indices` (stream order); call `dispose` after showing it. */
  draw(f: GifFrame, indices: Uint8Array): void {
    this.saved = f.disposal === 3 ? this.rgb.slice() : undefined;
    const { rgb, width } = this;
    const pal = paletteOf(f.palette);
    const { rows, x1 } = this.span(f);
    const { left, transparent } = f;
    for (let r = 0; r < rows.length; r++) {
      const y = rows[r];
      if (y < 0) continue;
      const end = r * f.width + x1 - left;
      for (let pos = r * f.width, o = (y * width + left) * 3; pos < end; pos++, o += 3) {
        const k = indices[pos];
        if (k === transparent) continue;
        const c = k * 3;
        rgb[o] = pal[c];
        rgb[o + 1] = pal[c + 1];
        rgb[o + 2] = pal[c + 2];
      }
    }
  }

  dispose(f: GifFrame): void {
    if (f.disposal === 2) {
      const y1 = Math.min(f.top + f.height, this.height);
      const x1 = Math.min(f.left + f.width, this.width);
      for (let y = f.top; y < y1; y++) {
        const a = y * this.width + f.left;
        const b = y * this.width + x1;
        this.rgb.fill(-1, a * 3, b * 3);
      }
    } else if (this.saved) {
      this.rgb.set(this.saved);
    }
    this.saved = undefined;
  }

  /**
   * The screen as RGBA into `out` at byte `offset`, nothing drawn as transparent black: what
   * libvips shows for a displayed frame (the same pixels on every GIF measured but those whose
   * disposal libvips reads otherwise).
   */
  rgbaInto(out: Uint8Array, offset: number): void {
    const { rgb } = this;
    // One little-endian word a pixel (every platform compressd ships for is little-endian): a
    // third of the time of four byte writes.
    const words = new Uint32Array(out.buffer, out.byteOffset + offset, rgb.length / 3);
    for (let i = 0, w = 0; i < rgb.length; i += 3, w++) {
      const r = rgb[i];
      words[w] = r < 0 ? 0 : (r | (rgb[i + 1] << 8) | (rgb[i + 2] << 16) | 0xff000000) >>> 0;
    }
  }

  /** RGB under the frame's rectangle, in the frame's stream order (red -1: nothing, or off screen). */
  pick(f: GifFrame): Int16Array {
    const out = new Int16Array(f.width * f.height * 3).fill(-1);
    const { rows, x1 } = this.span(f);
    for (let r = 0; r < rows.length; r++) {
      const y = rows[r];
      if (y < 0 || x1 <= f.left) continue;
      const from = (y * this.width + f.left) * 3;
      out.set(this.rgb.subarray(from, from + (x1 - f.left) * 3), r * f.width * 3);
    }
    return out;
  }

  /** Screen row of each stream row of a frame (-1 off screen), and the end of its columns on screen. */
  private span(f: GifFrame): { rows: Int32Array; x1: number } {
    const rows = rowOrder(f.height, f.interlaced);
    for (let r = 0; r < rows.length; r++) rows[r] = f.top + rows[r] < this.height ? f.top + rows[r] : -1;
    return { rows, x1: Math.min(f.left + f.width, this.width) };
  }
}

/** Palette as RGB triples of all 256 entries (entries past the palette's end are black). */
function paletteOf(rgb: Uint8Array): Uint8Array {
  const out = new Uint8Array(768);
  out.set(rgb.subarray(0, Math.min(rgb.length - (rgb.length % 3), 768)));
  return out;
}

/** Row of the image shown by the r-th row of the stream: passes 0/8, 4/8, 2/4, 1/2 when interlaced. */
export function rowOrder(height: number, interlaced: boolean): Int32Array {
  const rows = new Int32Array(height);
  if (!interlaced) {
    for (let r = 0; r < height; r++) rows[r] = r;
    return rows;
  }
  let r = 0;
  for (const [start, step] of [[0, 8], [4, 8], [2, 4], [1, 2]]) for (let y = start; y < height; y += step) rows[r++] = y;
  return rows;
}
