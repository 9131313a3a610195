import { availableParallelism } from 'node:os';
import { JobError } from '../contract.ts';
import { checkPixelBudget, imageError } from '../image/decode-policy.ts';
import { spareCore } from '../shared/spare-core.ts';
import { memoryArgs, nativeDecoder, pastMemoryBound, readPamHeader, readPamPixels, runToPicture, type NativeProgram } from './native-program.ts';
import type { RawPixels } from './pixels.ts';
import type { DecodeLimits } from './types.ts';

/**
 * HEIF through Debian's libheif, natively, with libde265 for HEIC (HEVC) and dav1d for AVIF (AV1): a
 * small program (heif/decode.c, built with its libraries by scripts/heif-decoder.mjs) run once per
 * picture, as native-program.ts runs each native decoder (lib/heif in the runtime tree).
 */
export type NativeHeif = NativeProgram;

const heif = nativeDecoder('heif', { program: 'compressd-heif-decode', events: 'heic' }, 'HEIC decodes through WebAssembly and AVIF through libvips: the native libheif does not load here');
/** This thread's native decoder, probed on first use: undefined where it does not load (HEIC then decodes through WebAssembly, AVIF through libvips). */
export const nativeHeif = heif.get;
export const useNativeHeif = heif.use;
/** The native decoder in a directory when its program and libraries load on this machine, else undefined (said in the log). */
export const probeNativeHeif = heif.probe;

/**
 * Decodes the primary image to 8-bit RGB(A), in the profile `icc` (the container's). Grid pictures
 * (a phone's 512-pixel tiles) are decoded on every core while no other job runs, on one otherwise.
 * The pixel budget is checked again on libheif's own reading of the header, before it decodes
 * anything. A file cut short fails as `image.truncated` (libheif-js decoded the tiles it had and
 * left the others grey).
 */
export async function decodeHeifNatively(heif: NativeProgram, bytes: Buffer, limits: DecodeLimits, icc?: Buffer): Promise<RawPixels> {
  const threads = spareCore() ? availableParallelism() : 1;
  const got = await runToPicture(heif, [String(limits.maxPixels), String(threads), ...memoryArgs(heif)], { input: bytes, signal: limits.signal }, async (source) =>
    readPamPixels(source, await readPamHeader(source, [3, 4]), icc),
  );
  if ('picture' in got) return got.picture;
  const r = got.ended;
  const refused = /^pixels (\d+) (\d+)$/.exec(r.err);
  if (r.code === 3 && refused) checkPixelBudget(Number(refused[1]), Number(refused[2]), limits.maxPixels);
  const overBound = pastMemoryBound(r);
  if (overBound) throw overBound;
  if (r.code === 1) throw imageError(new Error(`libheif: ${r.err.replace(/^\w+: /, '')}`));
  throw new JobError('image.decode_failed', `libheif failed on this file (${r.signal ? `signal ${r.signal}` : `exit ${r.code}: ${r.err}`}).`);
}
