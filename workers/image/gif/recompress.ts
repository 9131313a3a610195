import { Canvas } from './compose.ts';
import { lzwDecode, lzwEncode } from './lzw.ts';
import { parseGif, writeGif, type GifFile } from './parse.ts';
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

  /**
   * Re-encodes every frame's image data with (lossy) LZW and copies everything else byte for
   * byte: screen descriptor, palettes, loop count, per-frame delays and disposal, comments.
   * Frame count and timing therefore cannot change. Lossy frames are encoded against what the
   * screen shows (see lzwEncode's backdrop): a transparent pixel may take a colour close to
   * what is under it and an opaque one may turn transparent where the screen already shows
   * nearly its colour, both whenever that makes longer strings. The SSIM is that of the
   * displayed frames, so errors that stay on screen under later frames count every time.
   */
  recompress(threshold: number): Recompressed {
    const { frames, width, height } = this.file;
    if (threshold === 0) {
      const exact = frames.map((f) => lzwEncode(f.indices, f.minCodeSize, { rgb: f.palette, transparent: f.transparent }));
      return { data: writeGif(this.file, exact), ssim: 1 };
    }
    const wanted = new Canvas(width, height);
    const shown = new Canvas(width, height);
    const encoded: Uint8Array[] = [];
    let total = 0;
    frames.forEach((f, i) => {
      wanted.draw(f, f.indices);
      const backdrop = f.transparent >= 0 ? { target: wanted.pick(f), under: shown.pick(f) } : undefined;
      const data = lzwEncode(f.indices, f.minCodeSize, { rgb: f.palette, transparent: f.transparent }, threshold, backdrop);
      encoded.push(data);
      shown.draw(f, lzwDecode(data, f.minCodeSize, f.width * f.height));
      total += ssimOfLuma(this.reference[i], shown.luma, width, height);
      wanted.dispose(f);
      shown.dispose(f);
    });
    return { data: writeGif(this.file, encoded), ssim: frames.length > 0 ? total / frames.length : 1 };
  }
}
