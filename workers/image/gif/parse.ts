import { lzwDecode } from './lzw.ts';

/** One image of a GIF with what is needed to re-encode its pixels and to show it. */
export interface GifFrame {
  /** Image descriptor and local palette, copied as they are. */
  descriptor: Uint8Array;
  left: number;
  top: number;
  width: number;
  height: number;
  interlaced: boolean;
  /** RGB triples of the palette in force (local, else global, else all black). */
  palette: Uint8Array;
  /** Transparent index from the graphic control extension, or -1. */
  transparent: number;
  /** Disposal method: 0-1 leave, 2 restore to background, 3 restore previous. */
  disposal: number;
  /** Index in GifFile.parts of the graphic control extension of this frame, or -1. */
  control: number;
  minCodeSize: number;
  /** Palette indices in stream order (row-interlaced when `interlaced`). */
  indices: Uint8Array;
}

/** A GIF as a list of verbatim byte runs (header, extensions, trailer) and frames. */
export interface GifFile {
  width: number;
  height: number;
  parts: (Uint8Array | GifFrame)[];
  frames: GifFrame[];
}

/** What the graphic control extension before an image says of it (GifFrame's fields of the same names). */
type Control = Pick<GifFrame, 'transparent' | 'disposal' | 'control'>;
const NO_CONTROL: Control = { transparent: -1, disposal: 0, control: -1 };

/** Parses a GIF and decodes the LZW data of every frame. Throws on malformed structure. */
export function parseGif(gif: Uint8Array): GifFile {
  need(gif, 0, 13);
  const signature = Buffer.from(gif.subarray(0, 6)).toString('latin1');
  if (signature !== 'GIF87a' && signature !== 'GIF89a') throw new Error('GIF: bad signature');
  const width = gif[6] | (gif[7] << 8);
  const height = gif[8] | (gif[9] << 8);
  const screenFlags = gif[10];
  let globalPalette: Uint8Array | undefined;
  let p = 13;
  if (screenFlags & 0x80) {
    const size = 3 << ((screenFlags & 7) + 1);
    need(gif, p, size);
    globalPalette = gif.subarray(13, 13 + size);
    p += size;
  }
  const parts: (Uint8Array | GifFrame)[] = [gif.subarray(0, p)];
  const frames: GifFrame[] = [];
  let control = NO_CONTROL;
  for (;;) {
    need(gif, p, 1);
    const block = gif[p];
    if (block === 0x3b) {
      parts.push(gif.subarray(p, p + 1));
      break;
    }
    if (block === 0x21) {
      const start = p;
      need(gif, p, 2);
      const label = gif[p + 1];
      p += 2;
      if (label === 0xf9 && p + 5 <= gif.length && gif[p] === 4) {
        control = { transparent: gif[p + 1] & 1 ? gif[p + 4] : -1, disposal: (gif[p + 1] >> 2) & 7, control: parts.length };
      }
      p = skipSubBlocks(gif, p);
      parts.push(gif.subarray(start, p));
      continue;
    }
    if (block !== 0x2c) throw new Error(`GIF: unknown block 0x${block.toString(16)}`);
    const { frame, end } = readImage(gif, p, globalPalette, control);
    parts.push(frame);
    frames.push(frame);
    p = end;
    control = NO_CONTROL;
  }
  return { width, height, parts, frames };
}

function need(gif: Uint8Array, p: number, n: number): void {
  if (p + n > gif.length) throw new Error('GIF: unexpected end of file');
}

/** The image whose descriptor starts at `p`, its pixels decoded, and where its data ends. */
function readImage(gif: Uint8Array, p: number, globalPalette: Uint8Array | undefined, control: Control): { frame: GifFrame; end: number } {
  const start = p;
  need(gif, p, 11);
  const left = gif[p + 1] | (gif[p + 2] << 8);
  const top = gif[p + 3] | (gif[p + 4] << 8);
  const w = gif[p + 5] | (gif[p + 6] << 8);
  const h = gif[p + 7] | (gif[p + 8] << 8);
  const flags = gif[p + 9];
  p += 10;
  let palette = globalPalette;
  if (flags & 0x80) {
    const size = 3 << ((flags & 7) + 1);
    need(gif, p, size);
    palette = gif.subarray(p, p + size);
    p += size;
  }
  need(gif, p, 1);
  const minCodeSize = gif[p];
  if (minCodeSize < 2 || minCodeSize > 11) throw new Error('GIF: bad LZW code size');
  const end = skipSubBlocks(gif, p + 1);
  const frame: GifFrame = {
    descriptor: gif.subarray(start, p),
    left,
    top,
    width: w,
    height: h,
    interlaced: (flags & 0x40) !== 0,
    palette: palette ?? new Uint8Array(768),
    transparent: control.transparent,
    disposal: control.disposal,
    control: control.control,
    minCodeSize,
    indices: lzwDecode(joinSubBlocks(gif, p + 1, end), minCodeSize, w * h),
  };
  return { frame, end };
}

/** A frame as written: possibly cropped, possibly given a transparent index, LZW data not yet in sub-blocks. */
export interface EncodedFrame {
  left: number;
  top: number;
  width: number;
  height: number;
  transparent: number;
  data: Uint8Array;
  /** A local colour table (RGB triples, a power of two of them) and the code size it allows, replacing the frame's own. */
  local?: { palette: Uint8Array; minCodeSize: number };
}

/**
 * The GIF again with each frame's image data replaced. Everything else is copied byte for
 * byte, except where a frame was cropped (its descriptor's position and size), given a smaller
 * local colour table (`local`), or given a
 * transparent index (its graphic control extension, added with no delay and no disposal when
 * it had none, which is what a frame without one means).
 */
export function writeGif(file: GifFile, encoded: EncodedFrame[]): Buffer {
  const parts = file.parts.map((p) => (p instanceof Uint8Array ? p : undefined));
  const out: Uint8Array[] = [];
  let added = false;
  file.frames.forEach((f, i) => {
    const e = encoded[i];
    if (e.transparent !== f.transparent && f.control >= 0) {
      const gce = Uint8Array.from(parts[f.control] ?? []);
      gce[3] = e.transparent >= 0 ? gce[3] | 1 : gce[3] & ~1;
      gce[6] = Math.max(0, e.transparent);
      parts[f.control] = gce;
    }
  });
  let i = 0;
  for (const [k, part] of file.parts.entries()) {
    if (part instanceof Uint8Array) {
      out.push(parts[k] ?? part);
      continue;
    }
    const e = encoded[i++];
    if (e.transparent !== part.transparent && part.control < 0) {
      out.push(Uint8Array.of(0x21, 0xf9, 4, 1, 0, 0, e.transparent, 0));
      added = true;
    }
    // The descriptor proper is 10 bytes; a local colour table, if any, follows it.
    const descriptor = Uint8Array.from(e.local ? part.descriptor.subarray(0, 10) : part.descriptor);
    for (const [at, v] of [[1, e.left], [3, e.top], [5, e.width], [7, e.height]]) {
      descriptor[at] = v & 0xff;
      descriptor[at + 1] = v >> 8;
    }
    if (e.local) {
      // Local table flag, unsorted, 2^(n+1) entries; the interlace flag is kept.
      descriptor[9] = (descriptor[9] & 0x40) | 0x80 | (Math.log2(e.local.palette.length / 3) - 1);
      out.push(descriptor, e.local.palette, Uint8Array.of(e.local.minCodeSize), toSubBlocks(e.data));
    } else {
      out.push(descriptor, Uint8Array.of(part.minCodeSize), toSubBlocks(e.data));
    }
  }
  // A graphic control extension needs the 89a version of the format.
  if (added) out[0] = Uint8Array.from(out[0]).fill(0x39, 4, 5);
  return Buffer.concat(out);
}

function skipSubBlocks(gif: Uint8Array, p: number): number {
  for (;;) {
    if (p >= gif.length) throw new Error('GIF: unexpected end of file');
    const n = gif[p];
    p += 1 + n;
    if (n === 0) return p;
  }
}

function joinSubBlocks(gif: Uint8Array, start: number, end: number): Uint8Array {
  const out = new Uint8Array(end - start);
  let o = 0;
  for (let p = start; p < end; ) {
    const n = gif[p];
    out.set(gif.subarray(p + 1, p + 1 + n), o);
    o += n;
    p += 1 + n;
  }
  return out.subarray(0, o);
}

function toSubBlocks(data: Uint8Array): Uint8Array {
  const blocks = Math.ceil(data.length / 255);
  const out = new Uint8Array(data.length + blocks + 1);
  let o = 0;
  for (let i = 0; i < data.length; i += 255) {
    const n = Math.min(255, data.length - i);
    out[o++] = n;
    out.set(data.subarray(i, i + n), o);
    o += n;
  }
  out[o] = 0;
  return out;
}
