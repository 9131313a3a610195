import { JobError } from '../contract.ts';
import { admitPixels } from '../image/decode-policy.ts';
import { sharpFromPixels } from './pixels.ts';
import type { Decoded, DecodeLimits } from './types.ts';

/**
 * BMP, written here because sharp's prebuilt libvips has no BMP loader and the npm decoders
 * miss RLE or alpha: 1/4/8-bit palettes, RLE8 and RLE4 (with deltas), 16/24/32-bit with
 * BI_BITFIELDS masks, OS/2 core headers, top-down and bottom-up rows. Alpha: from the alpha mask
 * (V4/V5 headers, BI_ALPHABITFIELDS); a 32-bit BI_RGB file's fourth byte counts as alpha only
 * when it is not zero everywhere (the format calls it reserved; many writers store alpha there).
 */
export async function decodeBmp(b: Buffer, limits: DecodeLimits): Promise<Decoded> {
  const header = readHeader(b);
  const { width, height, compression } = header;
  await admitPixels(width, height, limits.maxPixels);
  const h: BmpLayout = { ...header, masks: masksOf(b, header) };
  const palette = readPalette(b, h);
  const out = new Uint8Array(width * height * 4).fill(255);
  const row = (y: number) => (h.topDown ? y : height - 1 - y) * width * 4;
  const put = (y: number, x: number, index: number) => {
    const o = row(y) + x * 4;
    out[o] = palette[index * 3];
    out[o + 1] = palette[index * 3 + 1];
    out[o + 2] = palette[index * 3 + 2];
  };
  if (compression === 1 || compression === 2) {
    if (h.topDown) throw new JobError('image.decode_failed', 'A top-down BMP cannot be RLE-compressed.');
    rle(b, h, compression === 1 ? 8 : 4, put);
  } else if (compression === 0 || compression === 3 || compression === 6) {
    readRows(b, h, { out, row, put });
  } else {
    throw new JobError('image.unsupported_variant', `BMP compression ${compression} (embedded JPEG/PNG) is not supported.`);
  }
  return { image: sharpFromPixels({ data: out, width, height, channels: 4 }), width, height, orientation: 1, via: 'bmp' };
}

/** What the file and info headers say of the pixels. */
interface BmpHeader {
  dataOffset: number;
  headerSize: number;
  /** An OS/2 core header (12 bytes). */
  core: boolean;
  width: number;
  height: number;
  topDown: boolean;
  bpp: number;
  compression: number;
}

interface BmpLayout extends BmpHeader {
  /** Red, green, blue and alpha masks (alpha 0: none), when the header gives them. */
  masks: number[] | null;
}

function readHeader(b: Buffer): BmpHeader {
  if (b.length < 26 || b[0] !== 0x42 || b[1] !== 0x4d) throw new JobError('image.decode_failed', 'The BMP header is missing or damaged.');
  const dataOffset = b.readUInt32LE(10);
  const headerSize = b.readUInt32LE(14);
  const core = headerSize === 12;
  if (!core && (headerSize < 40 || b.length < 14 + headerSize)) throw new JobError('image.decode_failed', 'The BMP header is damaged.');
  const width = core ? b.readUInt16LE(18) : b.readInt32LE(18);
  const rawHeight = core ? b.readInt16LE(20) : b.readInt32LE(22);
  const bpp = core ? b.readUInt16LE(24) : b.readUInt16LE(28);
  const compression = core ? 0 : b.readUInt32LE(30);
  return { dataOffset, headerSize, core, width, height: Math.abs(rawHeight), topDown: rawHeight < 0, bpp, compression };
}

/** The bit masks of a BI_BITFIELDS/BI_ALPHABITFIELDS file, or a V4/V5 32-bit BI_RGB file's alpha mask. */
function masksOf(b: Buffer, { headerSize, compression, bpp }: BmpHeader): number[] | null {
  if (compression === 3 || compression === 6) {
    const at = 14 + 40;
    const count = compression === 6 || headerSize >= 56 ? 4 : 3;
    if (b.length < at + count * 4) throw new JobError('image.truncated', 'The BMP file is cut short.');
    const masks = Array.from({ length: count }, (_, i) => b.readUInt32LE(at + i * 4));
    if (count === 3) masks.push(0);
    return masks;
  }
  if (headerSize >= 108 && compression === 0 && bpp === 32) return [0x00ff0000, 0x0000ff00, 0x000000ff, b.readUInt32LE(14 + 52)];
  return null;
}

/** RGB triples of the colour table (256 entries, unused ones black). */
function readPalette(b: Buffer, { core, headerSize, compression, bpp, dataOffset }: BmpHeader): Uint8Array {
  const paletteAt = 14 + headerSize + (headerSize === 40 && (compression === 3 || compression === 6) ? (compression === 6 ? 16 : 12) : 0);
  const entry = core ? 3 : 4;
  const declared = core ? 0 : b.readUInt32LE(46);
  const paletteSize = bpp <= 8 ? Math.min(declared || 1 << bpp, 1 << bpp, Math.max(0, Math.floor((dataOffset - paletteAt) / entry))) : 0;
  const palette = new Uint8Array(256 * 3);
  for (let i = 0; i < paletteSize; i++) {
    const o = paletteAt + i * entry;
    palette[i * 3] = b[o + 2];
    palette[i * 3 + 1] = b[o + 1];
    palette[i * 3 + 2] = b[o];
  }
  return palette;
}

/** Where decoded pixels go: RGBA `out`, the offset of screen row y in it, and a palette index's colour put at (y, x). */
interface Target {
  out: Uint8Array;
  row: (y: number) => number;
  put: (y: number, x: number, index: number) => void;
}

/** Uncompressed rows: palette indices, 24-bit BGR, or 16/32-bit values under bit masks. */
function readRows(b: Buffer, h: BmpLayout, { out, row, put }: Target): void {
  const { width, height, bpp, dataOffset, compression, headerSize, masks } = h;
  const stride = Math.floor((width * bpp + 31) / 32) * 4;
  if (dataOffset + stride * (height - 1) + Math.ceil((width * bpp) / 8) > b.length) throw new JobError('image.truncated', 'The BMP pixel data is cut short.');
  const fields = masks ?? (bpp === 16 ? [0x7c00, 0x03e0, 0x001f, 0] : bpp === 32 ? [0x00ff0000, 0x0000ff00, 0x000000ff, 0xff000000] : null);
  const ext = fields?.map(maskReader);
  let alphaSeen = false;
  for (let y = 0; y < height; y++) {
    const line = dataOffset + y * stride;
    const o0 = row(y);
    for (let x = 0; x < width; x++) {
      if (bpp <= 8) {
        const bit = x * bpp;
        const index = (b[line + (bit >> 3)] >> (8 - bpp - (bit & 7))) & ((1 << bpp) - 1);
        put(y, x, index);
      } else if (bpp === 24) {
        const p = line + x * 3;
        const o = o0 + x * 4;
        out[o] = b[p + 2];
        out[o + 1] = b[p + 1];
        out[o + 2] = b[p];
      } else if ((bpp === 16 || bpp === 32) && ext) {
        const v = bpp === 16 ? b.readUInt16LE(line + x * 2) : b.readUInt32LE(line + x * 4);
        const o = o0 + x * 4;
        out[o] = ext[0](v);
        out[o + 1] = ext[1](v);
        out[o + 2] = ext[2](v);
        if (fields![3]) {
          out[o + 3] = ext[3](v);
          if (ext[3](v) !== 0) alphaSeen = true;
        }
      } else {
        throw new JobError('image.unsupported_variant', `${bpp}-bit BMP is not supported.`);
      }
    }
  }
  // A reserved byte that is zero everywhere is padding, not a fully transparent picture.
  if (fields?.[3] && !alphaSeen && !(masks && (compression === 6 || headerSize >= 108))) {
    for (let i = 3; i < out.length; i += 4) out[i] = 255;
  }
}

/** Extracts a channel under a bit mask and scales it to 8 bits. */
function maskReader(mask: number): (v: number) => number {
  if (!mask) return () => 255;
  let shift = 0;
  while (!((mask >>> shift) & 1)) shift++;
  let bits = 0;
  while ((mask >>> (shift + bits)) & 1) bits++;
  const max = 2 ** bits - 1;
  return (v) => Math.round((((v & mask) >>> shift) * 255) / max);
}

/** RLE8/RLE4: runs, absolute runs padded to 16 bits, end-of-line, delta and end-of-bitmap escapes. */
function rle(b: Buffer, { dataOffset, width, height }: BmpHeader, bits: 4 | 8, put: Target['put']): void {
  let x = 0;
  let y = 0;
  let p = dataOffset;
  const set = (i: number) => {
    if (x < width && y < height) put(y, x, i);
    x++;
  };
  while (y < height) {
    if (p + 1 >= b.length) throw new JobError('image.truncated', 'The BMP RLE data is cut short.');
    const n = b[p++];
    const v = b[p++];
    if (n > 0) {
      for (let k = 0; k < n; k++) set(bits === 8 ? v : k & 1 ? v & 15 : v >> 4);
    } else if (v === 0) {
      x = 0;
      y++;
    } else if (v === 1) {
      return;
    } else if (v === 2) {
      if (p + 1 >= b.length) throw new JobError('image.truncated', 'The BMP RLE data is cut short.');
      x += b[p++];
      y += b[p++];
    } else {
      const bytes = bits === 8 ? v : Math.ceil(v / 2);
      if (p + bytes > b.length) throw new JobError('image.truncated', 'The BMP RLE data is cut short.');
      for (let k = 0; k < v; k++) set(bits === 8 ? b[p + k] : k & 1 ? b[p + (k >> 1)] & 15 : b[p + (k >> 1)] >> 4);
      p += bytes + (bytes & 1);
    }
  }
}
