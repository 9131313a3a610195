import { ssim } from '../ssim.ts';
import { lzwDecode, lzwEncode } from './lzw.ts';

export interface Recompressed {
  data: Buffer;
  /**
   * Mean luma SSIM of the frames' own pixels before and after, weighted by frame area. Transparent
   * pixels are never changed by the lossy encoder, so this is the change as displayed.
   */
  ssim: number;
}

/**
 * Re-encodes the image data of every frame of a GIF with (lossy) LZW and copies everything else
 * byte for byte: screen descriptor, palettes, loop count, per-frame delays and disposal,
 * comments. Frame count and timing therefore cannot change. Throws on malformed structure.
 */
export function recompressGif(gif: Uint8Array, threshold: number): Recompressed {
  const parts: Uint8Array[] = [];
  let p = 0;
  const need = (n: number): void => {
    if (p + n > gif.length) throw new Error('GIF: unexpected end of file');
  };
  need(13);
  const signature = Buffer.from(gif.subarray(0, 6)).toString('latin1');
  if (signature !== 'GIF87a' && signature !== 'GIF89a') throw new Error('GIF: bad signature');
  const screenFlags = gif[10];
  let globalPalette: Uint8Array | undefined;
  p = 13;
  if (screenFlags & 0x80) {
    const size = 3 << ((screenFlags & 7) + 1);
    need(size);
    globalPalette = gif.subarray(13, 13 + size);
    p += size;
  }
  parts.push(gif.subarray(0, p));
  let transparent = -1;
  let weighted = 0;
  let area = 0;
  for (;;) {
    need(1);
    const block = gif[p];
    if (block === 0x3b) {
      parts.push(gif.subarray(p, p + 1));
      break;
    }
    if (block === 0x21) {
      const start = p;
      need(2);
      const label = gif[p + 1];
      p += 2;
      if (label === 0xf9 && p + 5 <= gif.length && gif[p] === 4) transparent = gif[p + 1] & 1 ? gif[p + 4] : -1;
      p = skipSubBlocks(gif, p);
      parts.push(gif.subarray(start, p));
      continue;
    }
    if (block !== 0x2c) throw new Error(`GIF: unknown block 0x${block.toString(16)}`);
    const start = p;
    need(11);
    const width = gif[p + 5] | (gif[p + 6] << 8);
    const height = gif[p + 7] | (gif[p + 8] << 8);
    const flags = gif[p + 9];
    p += 10;
    let palette = globalPalette;
    if (flags & 0x80) {
      const size = 3 << ((flags & 7) + 1);
      need(size);
      palette = gif.subarray(p, p + size);
      p += size;
    }
    need(1);
    const minCodeSize = gif[p];
    if (minCodeSize < 2 || minCodeSize > 11) throw new Error('GIF: bad LZW code size');
    const dataStart = p + 1;
    const dataEnd = skipSubBlocks(gif, dataStart);
    parts.push(gif.subarray(start, dataStart));
    const indices = lzwDecode(joinSubBlocks(gif, dataStart, dataEnd), minCodeSize, width * height);
    const lossy = palette && width * height > 0 ? threshold : 0;
    const rgb = palette ?? new Uint8Array(768);
    const encoded = lzwEncode(indices, minCodeSize, { rgb, transparent }, lossy);
    parts.push(toSubBlocks(encoded));
    if (lossy > 0) {
      const after = lzwDecode(encoded, minCodeSize, width * height);
      const a = { data: rgbaOf(indices, rgb, transparent), width, height, channels: 4 };
      const b = { data: rgbaOf(after, rgb, transparent), width, height, channels: 4 };
      weighted += ssim(a, b) * width * height;
    } else {
      weighted += width * height;
    }
    area += width * height;
    p = dataEnd;
    transparent = -1;
  }
  return { data: Buffer.concat(parts), ssim: area > 0 ? weighted / area : 1 };
}

function rgbaOf(indices: Uint8Array, palette: Uint8Array, transparent: number): Uint8Array {
  const out = new Uint8Array(indices.length * 4);
  for (let i = 0, o = 0; i < indices.length; i++, o += 4) {
    const k = indices[i];
    if (k === transparent) continue;
    out[o] = palette[k * 3] ?? 0;
    out[o + 1] = palette[k * 3 + 1] ?? 0;
    out[o + 2] = palette[k * 3 + 2] ?? 0;
    out[o + 3] = 255;
  }
  return out;
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
