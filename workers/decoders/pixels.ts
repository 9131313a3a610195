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
  /** The same pixels as the end of a TIFF that carries their profile (pixelsInPlace), given to libvips as they are. */
  tiff?: Buffer;
}

/**
 * A sharp pipeline over decoded pixels. sharp's raw input cannot carry an ICC profile, so
 * pixels with a profile go in as a minimal uncompressed TIFF that embeds it; libvips then
 * converts from that profile like it does for any tagged file.
 */
export function sharpFromPixels(p: RawPixels): Sharp {
  const options = { limitInputPixels: false as const };
  if (p.tiff) return sharp(p.tiff, options);
  if (!needsTiff(p)) {
    const data = p.data instanceof Uint16Array ? new Uint16Array(p.data.buffer, p.data.byteOffset, p.data.length) : p.data;
    return sharp(data, { ...options, raw: { width: p.width, height: p.height, channels: p.channels as 1 | 2 | 3 | 4 } });
  }
  return sharp(tiffOf(p), options);
}

const needsTiff = (p: Omit<RawPixels, 'data'>): boolean => Boolean(p.icc || p.cmyk || p.channels > 4);

/**
 * 8-bit pixels a decoder reads straight into place (`fill` gets exactly their bytes): one buffer,
 * behind the TIFF header when the pixels need one, so that the picture is not copied again to
 * carry its profile (36 MB of fresh memory for a 12 MP photo, about 0.1 s on a machine that
 * faults its pages in slowly).
 */
export async function pixelsInPlace(shape: Omit<RawPixels, 'data' | 'tiff'>, fill: (into: Buffer) => Promise<void>): Promise<RawPixels> {
  const size = shape.width * shape.height * shape.channels;
  const head = needsTiff(shape) ? tiffHeader(shape, 8, size) : Buffer.alloc(0);
  const whole = Buffer.allocUnsafeSlow(head.length + size);
  head.copy(whole);
  const data = whole.subarray(head.length);
  await fill(data);
  return head.length ? { ...shape, data, tiff: whole } : { ...shape, data };
}

const SHORT = 3;
const LONG = 4;
const UNDEFINED = 7;

/** Little-endian baseline TIFF: one strip, chunky samples, unassociated alpha, ICC tag 34675 (16-bit samples in host order, little-endian here). */
export function tiffOf(p: RawPixels): Buffer {
  const bits = p.data instanceof Uint16Array ? 16 : 8;
  const pixelBytes = Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength);
  return Buffer.concat([tiffHeader(p, bits, pixelBytes.length), pixelBytes]);
}

/** Everything of tiffOf's file before the pixels, which follow it directly. */
function tiffHeader(p: Omit<RawPixels, 'data'>, bits: 8 | 16, pixelBytes: number): Buffer {
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
    [279, LONG, 1, pixelBytes],
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
  return Buffer.concat([header, ifd, ...blobs]);
}

function shorts(values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 2);
  values.forEach((v, i) => b.writeUInt16LE(v, i * 2));
  return b;
}
