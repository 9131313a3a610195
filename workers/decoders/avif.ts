import { JobError } from '../contract.ts';
import { admitPixels } from '../image/decode-policy.ts';
import { readHeader } from '../image/probe.ts';
import { withColrRange } from './av1-colour.ts';
import { decodeHeifNatively, nativeHeif, type NativeHeif } from './heic-native.ts';
import { PastMemoryBound } from './native-program.ts';
import { sharpFromPixels } from './pixels.ts';
import { decodeWithSharp, srgbAsStored } from './sharp-native.ts';
import type { Decoded, DecodeLimits } from './types.ts';

/**
 * AVIF, including image sequences (animated AVIF): the first frame, as libavif writes a sequence's
 * still primary image. The colour range is the file's `colr` property's (see av1-colour.ts).
 *
 * Decoded by the native HEIF helper (heic-native.ts: Debian's libheif with dav1d, a process of its
 * own on huge pages) where it loads: a 20 MP 10-bit photo in 0.45 s where sharp's libheif took
 * 4.0 s, a 1.7 MP one in 0.11 s against 0.40 s, and the same pixels within a level (equal on two
 * of the corpus's four AVIFs). Through sharp's libvips otherwise, and where the helper would lose precision: samples
 * deeper than 8 bits with a profile of their own are converted through it at 16 bits by libvips,
 * and the helper gives 8. A file the helper cannot decode is read by libvips as well, whose answer
 * (its pixels, or its error code) is the job's, as it was before the helper; but not one whose decoding
 * needs more memory than its picture's size allows (native-program.ts, pastMemoryBound).
 */
export async function decodeAvif(input: Buffer, limits: DecodeLimits): Promise<Decoded> {
  const bytes = stillImage(withColrRange(input));
  const heif = await nativeHeif();
  return (heif && (await decodeNatively(heif, bytes, limits))) || decodeWithSharp(bytes, limits);
}

/**
 * libvips recognises a HEIF file by its major brand, Debian's libheif by its compatible ones, and
 * neither knows the sequence brand `avis`, although such files also carry a still primary image: a
 * sequence with a primary item is read through a copy whose brands say `avif` where they said
 * `avis`; one without fails as an unsupported variant.
 */
function stillImage(bytes: Buffer): Buffer {
  if (bytes.length <= 16 || bytes.toString('latin1', 8, 12) !== 'avis') return bytes;
  const meta = bytes.indexOf('meta', 0, 'latin1');
  if (meta < 0 || meta > 4096 || bytes.indexOf('pitm', meta, 'latin1') < 0) {
    throw new JobError('image.unsupported_variant', 'This animated AVIF has no still primary image to read the first frame from.');
  }
  const still = Buffer.from(bytes);
  const ftypEnd = Math.min(still.readUInt32BE(0), still.length);
  for (let at = 8; at + 4 <= ftypEnd; at += at === 8 ? 8 : 4) if (still.toString('latin1', at, at + 4) === 'avis') still.write('avif', at, 'latin1');
  return still;
}

/** The picture through the helper, or undefined where libvips reads it (see decodeAvif). */
async function decodeNatively(heif: NativeHeif, bytes: Buffer, limits: DecodeLimits): Promise<Decoded | undefined> {
  const facts = await readHeader(bytes);
  // libheif applies the file's rotation and mirror itself, and libvips reports no orientation
  // for a HEIF file; one it did report would be lost with the raw pixels.
  if ((facts.icc && facts.depth !== 'uchar') || facts.orientation !== 1) return undefined;
  await admitPixels(facts.width, facts.height, limits.maxPixels);
  limits.signal.throwIfAborted();
  const icc = (await srgbAsStored(facts)) ? undefined : facts.icc;
  try {
    const pixels = await decodeHeifNatively(heif, bytes, limits, icc);
    return { image: sharpFromPixels(pixels), width: pixels.width, height: pixels.height, orientation: 1, exif: facts.exif, via: 'libheif' };
  } catch (err) {
    if (err instanceof PastMemoryBound) throw err;
    if (err instanceof JobError && (err.code === 'image.decode_failed' || err.code === 'image.truncated')) return undefined;
    throw err;
  }
}
