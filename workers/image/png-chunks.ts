import { crc32 } from 'node:zlib';

/**
 * Colour and density chunks of a PNG, copied verbatim (with their CRCs) from the input to the
 * output: the re-encoded pixels are the input's pixels, so the input's description of them
 * (ICC profile, gamma, chromaticities, sRGB intent, physical size) still applies.
 */
const CARRIED = new Set(['iCCP', 'sRGB', 'gAMA', 'cHRM', 'pHYs', 'cICP']);

interface Chunk {
  type: string;
  bytes: Buffer;
}

function chunks(png: Buffer): Chunk[] {
  const out: Chunk[] = [];
  let i = 8;
  while (i + 12 <= png.length) {
    const len = png.readUInt32BE(i);
    const end = i + 12 + len;
    if (end > png.length) break;
    out.push({ type: png.toString('latin1', i + 4, i + 8), bytes: png.subarray(i, end) });
    i = end;
  }
  return out;
}

export function carryColourChunks(input: Buffer, output: Buffer): Buffer {
  const carried = chunks(input).filter((c) => CARRIED.has(c.type));
  const own = chunks(output);
  if (own[0]?.type !== 'IHDR') return output;
  const kept = own.slice(1).filter((c) => !CARRIED.has(c.type));
  return Buffer.concat([output.subarray(0, 8), own[0].bytes, ...carried.map((c) => c.bytes), ...kept.map((c) => c.bytes)]);
}

/** Chunks that make up the pixels: header, palette, transparency, data, end. */
const PIXELS = new Set(['IHDR', 'PLTE', 'tRNS', 'IDAT', 'IEND']);

/**
 * The PNG with only its pixel chunks and its colour chunks: text, time, EXIF, APNG frame
 * chunks (viewers without APNG support show the default image, as sharp decodes it) and
 * private chunks are dropped, as the re-encoded output drops them. Undefined when the bytes
 * are not a well-formed chunk sequence starting with IHDR and ending with IEND.
 */
export function pixelAndColourChunks(png: Buffer): Buffer | undefined {
  const all = chunks(png);
  if (all[0]?.type !== 'IHDR' || all.at(-1)?.type !== 'IEND') return undefined;
  const kept = all.filter((c) => PIXELS.has(c.type) || CARRIED.has(c.type));
  return Buffer.concat([png.subarray(0, 8), ...kept.map((c) => c.bytes)]);
}

/** Entries of a PNG's palette (PLTE), or 0 without one. */
export function paletteEntries(png: Buffer): number {
  const plte = chunks(png).find((c) => c.type === 'PLTE');
  return plte ? (plte.bytes.length - 12) / 3 : 0;
}

/** One PNG chunk: its length, type, data and CRC. */
export function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}
