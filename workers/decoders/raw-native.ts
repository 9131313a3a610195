import { availableParallelism } from 'node:os';
import { admitPixels, checkPixelBudget } from '../image/decode-policy.ts';
import { workerLog } from '../shared/log.ts';
import { spareCore } from '../shared/spare-core.ts';
import { memoryArgs, nativeDecoder, pastMemoryBound, readPamHeader, readPamPixels, runToPicture, type NativeProgram } from './native-program.ts';
import type { RawPixels } from './pixels.ts';
import type { DecodeLimits } from './types.ts';

/**
 * Camera RAW through Debian's LibRaw, natively: a small program (raw/decode.c, built with its
 * libraries by scripts/raw-decoder.mjs) run once per file, as native-program.ts runs each native
 * decoder (lib/raw in the runtime tree). It develops as raw.ts asks LibRaw in WebAssembly to, in
 * 0.9–1.4 s for a 12 MP DNG on one core (0.65–0.85 s on two) where the WebAssembly build takes
 * 1.6–2.2 s, and agrees with it on all but a few thousandths of a percent of the samples: where a
 * highlight is clipped, the WebAssembly build writes an occasional 0 for 255 (a black speck), this
 * one the 255.
 *
 * Only a file it develops whole comes from here. A file whose development needs more memory than its
 * sensor's size allows fails (native-program.ts, pastMemoryBound). Whatever else it refuses or reports
 * damaged (cut or corrupt sensor data, a format it does not know, a crash) goes to the WebAssembly path, which
 * decides between the embedded preview and `raw.no_image_data` as it always has: those files are
 * rare and small, and the errors and previews stay the same.
 */
const raw = nativeDecoder('raw', { program: 'compressd-raw-decode', events: 'raw' }, 'camera RAW develops through WebAssembly: the native LibRaw does not load here');
export const nativeRaw = raw.get;
export const useNativeRaw = raw.use;
export const probeNativeRaw = raw.probe;

/** What LibRaw read of the shot, for the output's EXIF (raw.ts exifOf), in libraw-wasm's names. */
export interface ShotFacts {
  camera_make: string;
  camera_model: string;
  artist: string;
  iso_speed: number;
  shutter: number;
  aperture: number;
  focal_len: number;
  timestamp: number;
}

export interface NativeRawPicture {
  pixels: RawPixels;
  facts: ShotFacts;
}

function factsOf(comments: string[]): ShotFacts {
  const said = new Map(comments.map((c) => [c.slice(0, c.indexOf(' ')), c.slice(c.indexOf(' ') + 1)]));
  const text = (k: string) => said.get(k)?.trim() ?? '';
  const num = (k: string) => Number(said.get(k)) || 0;
  return {
    camera_make: text('make'),
    camera_model: text('model'),
    artist: text('artist'),
    iso_speed: num('iso'),
    shutter: num('shutter'),
    aperture: num('aperture'),
    focal_len: num('focal'),
    timestamp: num('timestamp'),
  };
}

/**
 * The developed picture, or undefined when the program did not develop the file whole (the caller
 * then decodes through WebAssembly). The pixel budget, and `pixelsPerByte` (more sensor pixels per
 * byte of file than any RAW codec packs: a stripped file), are checked on LibRaw's reading of the
 * header before anything is unpacked; the node's memory is reserved for the picture before it is read in.
 * LibRaw's demosaicing runs on every core while no other job runs, on one otherwise.
 */
export async function developNatively(program: NativeProgram, bytes: Buffer, limits: DecodeLimits, pixelsPerByte: number): Promise<NativeRawPicture | undefined> {
  const threads = spareCore() ? availableParallelism() : 1;
  const args = [String(limits.maxPixels), String(pixelsPerByte), ...memoryArgs(program)];
  const got = await runToPicture(program, args, { input: bytes, signal: limits.signal, env: { OMP_NUM_THREADS: String(threads) } }, async (source) => {
    const header = await readPamHeader(source, [1, 3]);
    await admitPixels(header.width, header.height, limits.maxPixels);
    return { pixels: await readPamPixels(source, header), facts: factsOf(header.comments) };
  });
  if ('picture' in got) return got.picture;
  const r = got.ended;
  const refused = /^pixels (\d+) (\d+)$/.exec(r.err);
  if (r.code === 3 && refused) checkPixelBudget(Number(refused[1]), Number(refused[2]), limits.maxPixels);
  const overBound = pastMemoryBound(r);
  if (overBound) throw overBound;
  limits.signal.throwIfAborted();
  workerLog.debug({ event: 'raw.native_declined', reason: r.signal ? `signal ${r.signal}` : `exit ${r.code}: ${r.err}` }, 'the native LibRaw did not develop this file; WebAssembly decides');
  return undefined;
}
