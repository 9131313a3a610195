import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import { pngChunk } from './png-chunks.ts';
import { encodedPipeline, pixelPipeline } from './vips.ts';

/**
 * Whether an embedded RGB profile is sRGB as libvips converts it: a lattice of colours (every grey,
 * every level of each primary, a 16-step cube) read through the profile moves by one code value at
 * most, the rounding of the conversion itself. sharp converts every picture with an embedded
 * profile into its own sRGB as it decodes; for the sRGB IEC61966-2.1 profile that cameras, phones
 * and editors embed, that conversion changes no pixel of a 24 MP photo (it moves 101 of the
 * lattice's 5,120 colours, saturated greens, by one) and costs about 19 ns a pixel (craft-beer.jpg:
 * 0.94-1.04 s decoded through the profile, 0.50-0.53 s without), so such a picture is decoded as
 * stored. A profile that moves any lattice colour further (Display P3 and Adobe RGB by tens of
 * code values, a 6,922-byte "sRGB" profile made by lcms by two) is converted as before.
 */
export function isSrgbProfile(icc: Buffer): Promise<boolean> {
  const key = createHash('sha256').update(icc).digest('hex');
  let known = verdicts.get(key);
  if (known === undefined) {
    known = throughProfile(icc).then(
      (out) => withinRounding(out),
      () => false,
    );
    if (verdicts.size >= MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value as string);
    verdicts.set(key, known);
  }
  return known;
}

/**
 * Profiles seen by this thread and whether they are sRGB (a few distinct profiles in practice). The
 * verdict's promise is kept, not its value, so that a document's pictures opened together with one
 * profile share one check.
 */
const verdicts = new Map<string, Promise<boolean>>();
const MAX_VERDICTS = 64;

const CUBE_STEP = 17;
const LATTICE_WIDTH = 64;

const LATTICE: Buffer = (() => {
  const colours: number[] = [];
  for (let v = 0; v < 256; v++) colours.push(v, v, v, v, 0, 0, 0, v, 0, 0, 0, v);
  for (let r = 0; r < 256; r += CUBE_STEP) for (let g = 0; g < 256; g += CUBE_STEP) for (let b = 0; b < 256; b += CUBE_STEP) colours.push(r, g, b);
  while ((colours.length / 3) % LATTICE_WIDTH !== 0) colours.push(255, 255, 255);
  return Buffer.from(colours);
})();

/** Whether every lattice sample came out within one code value of where it went in. */
function withinRounding(out: Buffer): boolean {
  if (out.length !== LATTICE.length) return false;
  for (let i = 0; i < out.length; i++) if (Math.abs(out[i] - LATTICE[i]) > 1) return false;
  return true;
}

/** The lattice as a PNG carrying the profile (an iCCP chunk after the header), decoded by sharp as any input is. */
async function throughProfile(icc: Buffer): Promise<Buffer> {
  const height = LATTICE.length / 3 / LATTICE_WIDTH;
  const png = await pixelPipeline({ data: LATTICE, width: LATTICE_WIDTH, height, channels: 3 }).png({ compressionLevel: 0 }).toBuffer();
  const headerEnd = 8 + 12 + png.readUInt32BE(8);
  const withProfile = Buffer.concat([png.subarray(0, headerEnd), pngChunk('iCCP', Buffer.concat([Buffer.from('icc\0\0', 'latin1'), deflateSync(icc)])), png.subarray(headerEnd)]);
  return encodedPipeline(withProfile).toColourspace('srgb').raw().toBuffer();
}
