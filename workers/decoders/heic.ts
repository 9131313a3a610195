import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import type { Metadata } from 'sharp';
import { JobError } from '../contract.ts';
import { admitPixels, checkPixelBudget } from '../image/decode-policy.ts';
import { decodeHeifNatively, nativeHeif } from './heic-native.ts';
import { sharpFromPixels, type RawPixels } from './pixels.ts';
import type { Decoded, DecodeLimits } from './types.ts';

/**
 * HEIC/HEIF (HEVC): sharp's prebuilt libheif reads the container but has no HEVC decoder. The
 * container facts — dimensions, ICC profile, EXIF — come from sharp's header read (no pixels
 * decoded), the pixels from libheif, which applies the file's rotation/mirror/crop properties
 * itself (the EXIF Orientation of a HEIC is informational and is not applied again). Colour: an
 * embedded ICC profile is honoured; files that describe their colour only by an nclx box are taken
 * as sRGB primaries (libheif already applies the nclx matrix to get RGB).
 *
 * libheif runs natively (heic-native.ts: Debian's libheif and libde265: 5-20 % less CPU, and grids
 * on both cores when idle) where it loads, else compiled to WebAssembly (libheif-js). The two differ
 * in one respect: the WebAssembly build leaves out HEVC's in-loop filters (deblocking and SAO) the
 * standard requires, so its pictures keep block edges a conformant decoder smooths (up to 13 levels
 * on a few tenths of a percent of the samples of a phone photo; the native pixels with both filters
 * switched off equal the WebAssembly ones within 1).
 */

/** One libheif-js instance per pool thread, dropped after any WebAssembly fault so the next job gets a clean one. */

const require = createRequire(import.meta.url);
let wasmBinary: Promise<Buffer> | undefined;
let instance: Promise<LibHeif> | undefined;

interface HeifChannel {
  id: unknown;
  data: Uint8Array;
  width: number;
  height: number;
  stride: number;
}
interface LibHeif {
  heif_context_alloc(): unknown;
  heif_context_free(ctx: unknown): void;
  heif_context_read_from_memory(ctx: unknown, bytes: Uint8Array): { code: { value: number }; message: string };
  heif_js_context_get_primary_image_handle(ctx: unknown): unknown;
  heif_image_handle_get_width(h: unknown): number;
  heif_image_handle_get_height(h: unknown): number;
  heif_image_handle_has_alpha_channel(h: unknown): number;
  heif_image_handle_release(h: unknown): void;
  heif_js_decode_image2(h: unknown, colorspace: unknown, chroma: unknown): Promise<{ code?: unknown; message?: string; image?: unknown; channels?: HeifChannel[] }>;
  heif_image_release(img: unknown): void;
  heif_colorspace: Record<string, unknown>;
  heif_chroma: Record<string, unknown>;
}

function libheif(): Promise<LibHeif> {
  wasmBinary ??= readFile(require.resolve('libheif-js/libheif-wasm/libheif.wasm'));
  instance ??= (async () => {
    const factory = require('libheif-js/libheif-wasm/libheif.js') as (m: Record<string, unknown>) => Promise<LibHeif>;
    return factory({ wasmBinary: await wasmBinary, print: () => {}, printErr: () => {} });
  })();
  return instance;
}

export async function decodeHeic(bytes: Buffer, limits: DecodeLimits): Promise<Decoded> {
  let meta: Metadata;
  try {
    meta = await sharp(bytes).metadata();
  } catch (err) {
    throw new JobError('image.decode_failed', `The HEIF container could not be read: ${err instanceof Error ? err.message : String(err)}`);
  }
  await admitPixels(meta.width ?? 0, meta.height ?? 0, limits.maxPixels);
  limits.signal.throwIfAborted();
  const heif = await nativeHeif();
  const pixels = heif ? await decodeHeifNatively(heif, bytes, limits, meta.icc) : { ...(await decodeHeifWasm(bytes, limits)), icc: meta.icc };
  return {
    image: sharpFromPixels(pixels),
    width: pixels.width,
    height: pixels.height,
    orientation: 1,
    exif: meta.exif,
    via: heif ? 'libheif' : 'libheif-wasm',
  };
}

/** The primary image's 8-bit RGB(A) through libheif-js. */
export async function decodeHeifWasm(bytes: Buffer, limits: DecodeLimits): Promise<RawPixels> {
  const loading = libheif();
  let M: LibHeif | undefined;
  let ctx: unknown;
  let handle: unknown;
  try {
    M = await loading;
    ctx = M.heif_context_alloc();
    const read = M.heif_context_read_from_memory(ctx, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length));
    if (read.message !== 'Success') throw new JobError(/end of data|truncat/i.test(read.message) ? 'image.truncated' : 'image.decode_failed', `libheif: ${read.message}`);
    handle = M.heif_js_context_get_primary_image_handle(ctx);
    if (!handle || (handle as { code?: unknown }).code !== undefined) throw new JobError('image.decode_failed', 'The HEIF file has no primary image.');
    const width = M.heif_image_handle_get_width(handle);
    const height = M.heif_image_handle_get_height(handle);
    checkPixelBudget(width, height, limits.maxPixels);
    const alpha = M.heif_image_handle_has_alpha_channel(handle) !== 0;
    const chroma = alpha ? M.heif_chroma.heif_chroma_interleaved_RGBA : M.heif_chroma.heif_chroma_interleaved_RGB;
    const img = await M.heif_js_decode_image2(handle, M.heif_colorspace.heif_colorspace_RGB, chroma);
    const plane = img.channels?.[0];
    if (!img.image || !plane) throw new JobError('image.decode_failed', `libheif could not decode the image${img.message ? `: ${img.message}` : ''}.`);
    const channels = alpha ? 4 : 3;
    const rowBytes = plane.width * channels;
    let data = plane.data;
    if (plane.stride !== rowBytes) {
      data = new Uint8Array(rowBytes * plane.height);
      for (let y = 0; y < plane.height; y++) data.set(plane.data.subarray(y * plane.stride, y * plane.stride + rowBytes), y * rowBytes);
    }
    M.heif_image_release(img.image);
    return { data, width: plane.width, height: plane.height, channels };
  } catch (err) {
    if (err instanceof JobError) throw err;
    // A WebAssembly fault (or a failed start) leaves the instance in an unknown state: the next job gets a new one.
    if (instance === loading) instance = undefined;
    throw new JobError('image.decode_failed', `libheif failed on this file: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    if (M && instance === loading) {
      if (handle && (handle as { code?: unknown }).code === undefined) M.heif_image_handle_release(handle);
      if (ctx) M.heif_context_free(ctx);
    }
  }
}
