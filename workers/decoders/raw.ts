import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import type { Metadata as ImageMetadata } from 'sharp';
import type { LibRawSettings, Metadata as RawMetadata } from 'libraw-wasm';
import { JobError } from '../contract.ts';
import { admitPixels, decodeOptions } from '../image/decode-policy.ts';
import { wasm, type WasmInstance, type WasmMemory, type WasmModule } from './wasm.ts';
import { sharpFromPixels } from './pixels.ts';
import { developNatively, nativeRaw, type ShotFacts } from './raw-native.ts';
import type { Decoded, DecodeLimits } from './types.ts';

/**
 * Camera RAW through LibRaw: natively where Debian's LibRaw loads (raw-native.ts), for every file it
 * develops whole; otherwise, and for every file it refuses or finds damaged, through LibRaw
 * compiled to WebAssembly (libraw-wasm), which also decides those files' errors and previews. The package's own entry runs
 * LibRaw in a browser Web Worker; here its Emscripten module is instantiated directly in the pool
 * thread, from a WebAssembly.Module compiled once, with a fresh instance and a fresh, capped
 * memory for every file: a hostile file can neither exhaust the process nor leave a broken
 * instance behind (an abort inside LibRaw throws, the job fails, the next job starts clean).
 *
 * Rendering is LibRaw's (dcraw's) default development: AHD demosaicing, the white balance the
 * camera recorded, the camera colour matrix to sRGB, the Orientation applied, full resolution,
 * 8 bits. Failure codes:
 * - `raw.no_image_data`: the file has no (or incomplete) sensor data — camera files stripped or
 *   cut short by other tools — and no embedded preview at least as large as the sensor image.
 * - `raw.unsupported`: LibRaw does not recognise the file as any RAW format it can read.
 */

/** Largest WASM memory one RAW decode may use (a 100 MP file needs about 1.2 GiB). */
export const RAW_MEMORY_CAP_BYTES = 1536 * 1024 * 1024;
const PAGE = 65536;
/**
 * A file with fewer than 1 byte per 32 sensor pixels (0.25 bit per pixel) cannot hold the sensor
 * image: lossless RAW codecs need 6–14 bits and even lossy DNG stays above 1 bit. Some stripped
 * files (e.g. Panasonic RW2 without its strips) raise no data error in LibRaw and would come out
 * as a frame of invented pixels.
 */
const MIN_PIXELS_PER_BYTE = 32;
const INITIAL_PAGES = 4096;

const require = createRequire(import.meta.url);
let compiled: Promise<WasmModule> | undefined;

function wasmModule(): Promise<WasmModule> {
  compiled ??= readFile(require.resolve('libraw-wasm/dist/libraw.wasm')).then((b) => wasm.compile(b));
  return compiled;
}

interface LibRawInstance {
  open(bytes: Uint8Array, settings: LibRawSettings): void;
  metadata(full: boolean): RawMetadata | undefined;
  imageData(): { width: number; height: number; colors: number; bits: number; data: Uint8Array } | undefined;
  thumbnailData(): { width: number; height: number; format: string; data: Uint8Array } | undefined;
}

interface Session {
  raw: LibRawInstance;
  /** Messages LibRaw printed: its data-error callback reports cut or corrupt sensor data here. */
  complaints: string[];
  memory: WasmMemory;
}

async function newSession(): Promise<Session> {
  const module = await wasmModule();
  const { default: factory } = await import('libraw-wasm/dist/libraw.js');
  const memory = new wasm.Memory({ initial: INITIAL_PAGES, maximum: RAW_MEMORY_CAP_BYTES / PAGE, shared: true });
  const complaints: string[] = [];
  const M = await factory({
    wasmMemory: memory,
    print: () => {},
    printErr: (s: string) => complaints.push(s),
    instantiateWasm: (imports: object, done: (i: WasmInstance, m: WasmModule) => void) => {
      wasm.instantiate(module, imports).then((instance) => done(instance, module));
      return {};
    },
  });
  const LibRaw = M.LibRaw as new () => LibRawInstance;
  return { raw: new LibRaw(), complaints, memory };
}

const SETTINGS: LibRawSettings = {
  useCameraWb: true,
  useCameraMatrix: 1,
  outputColor: 1,
  outputBps: 8,
  // AHD demosaicing, dcraw's own: the reference developer of every RAW comparison. PPG was
  // 0.4 s faster on a 12 MP frame, but its full-resolution guess differs from dcraw's (SSIM
  // 0.969-0.994 against dcraw, 0.992-0.998 binned 2×2); AHD agrees to 0.998-0.9998, so the
  // quality search's SSIM is the SSIM a user developing with dcraw would measure.
  userQual: 3,
  userFlip: -1,
  halfSize: false,
};

/** Reads the text of the std::exception LibRaw's wrapper threw (its what() string), if there is one. */
function exceptionText(err: unknown, memory: WasmMemory): string {
  if (err instanceof Error) return err.message;
  const ptr = (err as { excPtr?: number } | null)?.excPtr;
  if (typeof ptr !== 'number') return String(err);
  const bytes = new Uint8Array(memory.buffer);
  const str = new Uint32Array(memory.buffer)[(ptr >> 2) + 1];
  let text = '';
  for (let i = str; i > 0 && i < bytes.length && bytes[i] !== 0 && text.length < 200; i++) text += String.fromCharCode(bytes[i]);
  return /^[\x20-\x7e]+$/.test(text) ? text : 'LibRaw could not read the file';
}

export async function decodeRaw(bytes: Buffer, limits: DecodeLimits): Promise<Decoded> {
  const native = await nativeRaw();
  const developed = native && (await developNatively(native, bytes, limits, MIN_PIXELS_PER_BYTE));
  if (developed) {
    const { pixels, facts } = developed;
    return { image: sharpFromPixels(pixels), width: pixels.width, height: pixels.height, orientation: 1, exif: exifOf(facts), via: 'libraw' };
  }
  return decodeRawWasm(bytes, limits);
}

/** Through LibRaw in WebAssembly: a fresh instance and memory for the file. */
export async function decodeRawWasm(bytes: Buffer, limits: DecodeLimits): Promise<Decoded> {
  const session = await newSession();
  const { raw, complaints, memory } = session;
  let meta: RawMetadata | undefined;
  try {
    raw.open(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length), SETTINGS);
    meta = raw.metadata(false);
  } catch (err) {
    const text = exceptionText(err, memory);
    if (/code -2\b/.test(text)) throw new JobError('raw.unsupported', 'LibRaw does not recognise this file as a camera RAW image it can read.');
    throw new JobError('raw.no_image_data', `The RAW file holds no readable sensor data (${text}).`);
  }
  if (!meta) throw new JobError('raw.no_image_data', 'The RAW file holds no readable sensor data.');
  await admitPixels(meta.width, meta.height, limits.maxPixels);
  limits.signal.throwIfAborted();

  const preview = () => embeddedPreview(raw, meta);
  if (bytes.length < (meta.width * meta.height) / MIN_PIXELS_PER_BYTE) {
    return (await preview()) ?? noImageData([`${bytes.length} bytes cannot hold ${meta.width}×${meta.height} sensor pixels`]);
  }
  // Other tools strip or cut RAW files for their test suites and LibRaw then "develops" noise:
  // a data error reported while unpacking means the sensor image is not the picture.
  if (complaints.length) return (await preview()) ?? noImageData(complaints);
  let image: ReturnType<LibRawInstance['imageData']>;
  try {
    image = raw.imageData();
  } catch (err) {
    return (await preview()) ?? noImageData([exceptionText(err, memory)]);
  }
  if (complaints.length || !image || image.width < 1) return (await preview()) ?? noImageData(complaints);
  const channels = image.colors === 1 ? 1 : 3;
  const pixels = sharpFromPixels({ data: image.data, width: image.width, height: image.height, channels });
  return { image: pixels, width: image.width, height: image.height, orientation: 1, exif: exifOf(meta), via: 'libraw' };
}

function noImageData(complaints: string[]): never {
  const why = complaints.map((c) => c.replace(/^[^:]*:\s*/, '')).join('; ');
  throw new JobError('raw.no_image_data', `The RAW file holds no complete sensor data${why ? ` (${why})` : ''} and no full-size embedded preview.`);
}

/**
 * The embedded JPEG preview, used only when the sensor data cannot be developed and the preview
 * is at least as large as the sensor image (in either orientation): a smaller preview would
 * silently shrink the photo, which is exactly the failure of tools that trust it.
 */
async function embeddedPreview(raw: LibRawInstance, meta: RawMetadata): Promise<Decoded | null> {
  let thumb: ReturnType<LibRawInstance['thumbnailData']>;
  try {
    thumb = raw.thumbnailData();
  } catch {
    return null;
  }
  if (!thumb || thumb.format !== 'jpeg') return null;
  const data = Buffer.from(thumb.data);
  let info: ImageMetadata;
  try {
    info = await sharp(data).metadata();
  } catch {
    return null;
  }
  const w = info.width ?? 0;
  const h = info.height ?? 0;
  const long = Math.max(w, h);
  const short = Math.min(w, h);
  if (long < Math.max(meta.width, meta.height) || short < Math.min(meta.width, meta.height)) return null;
  return { image: sharp(data, decodeOptions()), width: w, height: h, orientation: info.orientation ?? 1, exif: info.exif ?? exifOf(meta), via: 'raw-preview' };
}

/** The shooting facts LibRaw read, as an EXIF block for the JPG (the RAW's own EXIF sits in maker-specific places). */
function exifOf(meta: ShotFacts | RawMetadata): Buffer | undefined {
  const ifd0: Record<string, string> = {};
  if (meta.camera_make) ifd0.Make = meta.camera_make;
  if (meta.camera_model) ifd0.Model = meta.camera_model;
  if (meta.artist) ifd0.Artist = meta.artist;
  const exif: Record<string, string> = {};
  if (meta.iso_speed > 0) exif.ISOSpeedRatings = String(Math.round(meta.iso_speed));
  if (meta.shutter > 0) exif.ExposureTime = meta.shutter >= 1 ? `${Math.round(meta.shutter)}/1` : `1/${Math.round(1 / meta.shutter)}`;
  if (meta.aperture > 0) exif.FNumber = `${Math.round(meta.aperture * 10)}/10`;
  if (meta.focal_len > 0) exif.FocalLength = `${Math.round(meta.focal_len * 10)}/10`;
  const ts = meta.timestamp as unknown;
  const seconds = typeof ts === 'number' ? ts : ts instanceof Date ? ts.getTime() / 1000 : 0;
  if (seconds > 0) exif.DateTimeOriginal = new Date(seconds * 1000).toISOString().slice(0, 19).replace('T', ' ').replace(/-/g, ':');
  if (!Object.keys(ifd0).length && !Object.keys(exif).length) return undefined;
  return exifBlock(ifd0, exif);
}

/** A TIFF-structured EXIF block of ASCII and RATIONAL/SHORT tags, built by hand (sharp writes EXIF only while encoding). */
function exifBlock(ifd0: Record<string, string>, exif: Record<string, string>): Buffer {
  const TAGS: Record<string, [number, 'ascii' | 'rational' | 'short']> = {
    Make: [0x010f, 'ascii'],
    Model: [0x0110, 'ascii'],
    Artist: [0x013b, 'ascii'],
    ExposureTime: [0x829a, 'rational'],
    FNumber: [0x829d, 'rational'],
    ISOSpeedRatings: [0x8827, 'short'],
    DateTimeOriginal: [0x9003, 'ascii'],
    FocalLength: [0x920a, 'rational'],
  };
  type Entry = { tag: number; type: number; count: number; data: Buffer };
  const entry = (name: string, value: string): Entry => {
    const [tag, kind] = TAGS[name];
    if (kind === 'ascii') {
      const data = Buffer.from(`${value}\0`, 'latin1');
      return { tag, type: 2, count: data.length, data };
    }
    if (kind === 'short') {
      const data = Buffer.alloc(2);
      data.writeUInt16LE(Math.min(65535, Number(value)));
      return { tag, type: 3, count: 1, data };
    }
    const [n, d] = value.split('/').map(Number);
    const data = Buffer.alloc(8);
    data.writeUInt32LE(n);
    data.writeUInt32LE(d, 4);
    return { tag, type: 5, count: 1, data };
  };
  const ifd0Entries = Object.entries(ifd0).map(([k, v]) => entry(k, v));
  const exifEntries = Object.entries(exif).map(([k, v]) => entry(k, v));
  const EXIF_POINTER = 0x8769;
  if (exifEntries.length) ifd0Entries.push({ tag: EXIF_POINTER, type: 4, count: 1, data: Buffer.alloc(4) });
  const ifdSize = (n: number) => 2 + n * 12 + 4;
  const layout = (entries: Entry[], at: number): { ifd: Buffer; blobs: Buffer; end: number } => {
    entries.sort((a, b) => a.tag - b.tag);
    const ifd = Buffer.alloc(ifdSize(entries.length));
    ifd.writeUInt16LE(entries.length);
    let extra = at + ifd.length;
    const blobs: Buffer[] = [];
    entries.forEach((e, i) => {
      const o = 2 + i * 12;
      ifd.writeUInt16LE(e.tag, o);
      ifd.writeUInt16LE(e.type, o + 2);
      ifd.writeUInt32LE(e.count, o + 4);
      if (e.data.length <= 4) e.data.copy(ifd, o + 8);
      else {
        ifd.writeUInt32LE(extra, o + 8);
        const padded = e.data.length & 1 ? Buffer.concat([e.data, Buffer.alloc(1)]) : e.data;
        blobs.push(padded);
        extra += padded.length;
      }
    });
    return { ifd, blobs: Buffer.concat(blobs), end: extra };
  };
  const first = layout(ifd0Entries, 8);
  const parts = [Buffer.from([0x49, 0x49, 42, 0, 8, 0, 0, 0]), first.ifd, first.blobs];
  if (exifEntries.length) {
    const pointerIndex = ifd0Entries.findIndex((e) => e.tag === EXIF_POINTER);
    first.ifd.writeUInt32LE(first.end, 2 + pointerIndex * 12 + 8);
    const sub = layout(exifEntries, first.end);
    parts.push(sub.ifd, sub.blobs);
  }
  return Buffer.concat(parts);
}
