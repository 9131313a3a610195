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
