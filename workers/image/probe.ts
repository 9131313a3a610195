import { open } from 'node:fs/promises';
import sharp from 'sharp';
import type { Metadata, SharpOptions } from 'sharp';
import { JobError } from '../contract.ts';

/**
 * Failure codes of the image compressors (a Failed job carries one of these):
 * - `image.empty`: the file has no bytes.
 * - `image.format_mismatch`: the bytes are not the format the job is for (e.g. a PDF named .jpg).
 * - `image.decode_failed`: the header or the pixel data is corrupt or truncated.
 * - `image.too_many_pixels`: the header declares more pixels (all frames counted) than MAX_PIXELS,
 *   checked before any pixel is decoded (decompression bombs).
 */
export const MAX_PIXELS = 100_000_000;

export type ImageKind = 'jpeg' | 'png' | 'gif';

const SIGNATURES: Record<ImageKind, number[]> = {
  jpeg: [0xff, 0xd8, 0xff],
  png: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
  gif: [0x47, 0x49, 0x46, 0x38],
};

export interface Probed extends Metadata {
  width: number;
  height: number;
  /** Frames (1 for a still image). */
  frames: number;
}

/** Sharp input options every image compressor uses: strict decoding, the pixel cap as a second guard. */
export function inputOptions(animated = false): SharpOptions {
  return { failOn: 'warning', limitInputPixels: MAX_PIXELS, animated };
}

/** Reads only the header: format by magic bytes, then dimensions and frame count, then the pixel budget. */
export async function probeImage(path: string, kind: ImageKind): Promise<Probed> {
  const head = await readHead(path, 16);
  if (head.length === 0) throw new JobError('image.empty', 'The file is empty.');
  const sig = SIGNATURES[kind];
  if (head.length < sig.length || sig.some((b, i) => head[i] !== b)) {
    throw new JobError('image.format_mismatch', `The file is not a ${kind.toUpperCase()} image${describe(head)}.`);
  }
  let meta: Metadata;
  try {
    meta = await sharp(path, { ...inputOptions(kind === 'gif'), limitInputPixels: false }).metadata();
  } catch (err) {
    throw decodeFailed(err);
  }
  const width = meta.width ?? 0;
  const height = meta.pageHeight ?? meta.height ?? 0;
  const frames = meta.pages ?? 1;
  if (width < 1 || height < 1) throw new JobError('image.decode_failed', 'The image header declares no dimensions.');
  if (width * height * frames > MAX_PIXELS) {
    throw new JobError(
      'image.too_many_pixels',
      `The image declares ${width}×${height}${frames > 1 ? `×${frames} frames` : ''} pixels, more than the limit of ${MAX_PIXELS / 1e6} megapixels.`,
    );
  }
  return { ...meta, width, height, frames };
}

/** Turns a codec error into the job failure users see; JobErrors pass through. */
export function decodeFailed(err: unknown): JobError {
  if (err instanceof JobError) return err;
  const message = err instanceof Error ? err.message.split('\n')[0] : String(err);
  return new JobError('image.decode_failed', `The image could not be decoded: ${message}`);
}

async function readHead(path: string, n: number): Promise<Buffer> {
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(n);
    const { bytesRead } = await fh.read(buf, 0, n, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

function describe(head: Buffer): string {
  const ascii = head.toString('latin1');
  if (ascii.startsWith('%PDF')) return ' (it is a PDF document)';
  if (ascii.startsWith('PK')) return ' (it is a ZIP archive)';
  for (const [k, sig] of Object.entries(SIGNATURES)) if (sig.every((b, i) => head[i] === b)) return ` (it is a ${k.toUpperCase()} image)`;
  return '';
}
