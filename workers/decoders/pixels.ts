import sharp from 'sharp';
import type { Sharp } from 'sharp';

/** Interleaved 8-bit (or 16-bit, `depth: 16`) pixels from a WASM or pure-JS decoder. */
export interface RawPixels {
  data: Uint8Array | Uint16Array;
  width: number;
  height: number;
  /** Samples per pixel, the last one alpha for 2, 4 (RGB) and 5 (CMYK). */
  channels: 1 | 2 | 3 | 4 | 5;
  /** ICC profile the pixels are in; absent means sRGB (or libvips's standard CMYK profile). */
  icc?: Buffer;
  /** Ink values (0 = no ink) in C, M, Y, K order. */
  cmyk?: boolean;
}

/**
 * A sharp pipeline over decoded pixels. sharp's raw input cannot carry an ICC profile, so
 * pixels with a profile go in as a minimal uncompressed TIFF that embeds it; libvips then
 * converts from that profile like it does for any tagged file.
 */
export function sharpFromPixels(p: RawPixels): Sharp {
  const options = { limitInputPixels: false as const };
  if (!p.icc && !p.cmyk && p.channels <= 4) {
    const data = p.data instanceof Uint16Array ? new Uint16Array(p.data.buffer, p.data.byteOffset, p.data.length) : p.data;
    return sharp(data, { ...options, raw: { width: p.width, height: p.height, channels: p.channels as 1 | 2 | 3 | 4 } });
  }
  return sharp(tiffOf(p), options);
}

const SHORT = 3;
const LONG = 4;
const UNDEFINED = 7;

/** Little-endian baseline TIFF: one strip, chunky samples, unassociated alpha, ICC tag 34675 (16-bit samples in host order, little-endian here). */
export function tiffOf(p: RawPixels): Buffer {
  const bits = p.data instanceof Uint16Array ? 16 : 8;
  const pixelBytes = Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength);
  const icc = p.icc ?? Buffer.alloc(0);
  const photometric = p.cmyk ? 5 : p.channels >= 3 ? 2 : 1;
  const alpha = p.cmyk ? p.channels === 5 : p.channels === 2 || p.channels === 4;
  const entries: [tag: number, type: number, count: number, value: number | Buffer][] = [
    [256, LONG, 1, p.width],
    [257, LONG, 1, p.height],
    [258, SHORT, p.channels, shorts(Array(p.channels).fill(bits))],
    [259, SHORT, 1, 1],
    [262, SHORT, 1, photometric],
    [273, LONG, 1, 0],
    [277, SHORT, 1, p.channels],
    [278, LONG, 1, p.height],
    [279, LONG, 1, pixelBytes.length],
    [284, SHORT, 1, 1],
  ];
  if (alpha) entries.push([338, SHORT, 1, 2]);
  if (icc.length) entries.push([34675, UNDEFINED, icc.length, icc]);
  const ifdSize = 2 + entries.length * 12 + 4;
  let extra = 8 + ifdSize;
  const blobs: Buffer[] = [];
  const ifd = Buffer.alloc(ifdSize);
  ifd.writeUInt16LE(entries.length, 0);
  const stripOffsetAt: number[] = [];
  entries.forEach(([tag, type, count, value], i) => {
    const o = 2 + i * 12;
    ifd.writeUInt16LE(tag, o);
    ifd.writeUInt16LE(type, o + 2);
    ifd.writeUInt32LE(count, o + 4);
    if (typeof value === 'number') {
      if (type === SHORT) ifd.writeUInt16LE(value, o + 8);
      else ifd.writeUInt32LE(value, o + 8);
      if (tag === 273) stripOffsetAt.push(o + 8);
    } else if (value.length <= 4) {
      value.copy(ifd, o + 8);
    } else {
      ifd.writeUInt32LE(extra, o + 8);
      blobs.push(value);
      extra += value.length + (value.length & 1);
      if (value.length & 1) blobs.push(Buffer.alloc(1));
    }
  });
  for (const at of stripOffsetAt) ifd.writeUInt32LE(extra, at);
  const header = Buffer.from([0x49, 0x49, 42, 0, 8, 0, 0, 0]);
  return Buffer.concat([header, ifd, ...blobs, pixelBytes]);
}

function shorts(values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 2);
  values.forEach((v, i) => b.writeUInt16LE(v, i * 2));
  return b;
}
