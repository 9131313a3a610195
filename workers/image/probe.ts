import { open } from 'node:fs/promises';
import sharp from 'sharp';
import type { Metadata } from 'sharp';
import { JobError } from '../contract.ts';
import { FAIL_ON, imageError } from './decode-policy.ts';
import { hasSignature, kindOf, type ImageKind } from './signatures.ts';

export type { ImageKind };

/** A picture as a file path or as its bytes, as sharp takes either. */
export type ImageSource = string | Uint8Array;

/** What a header says, read before any pixel is decoded. */
export interface HeaderFacts {
  /** libvips's loader name (`jpeg`, `png`, `tiff`, …) or the decoder family (decoders/detect.ts). */
  format: string;
  /** Stored dimensions of one frame or page (before EXIF orientation). */
  width: number;
  height: number;
  /** Frames or pages the file holds (1 where a decoder reads one picture). */
  pages: number;
  /** EXIF orientation (1 when the pixels are upright). */
  orientation: number;
  exif?: Buffer;
  icc?: Buffer;
  /** Sample depth and colour space (libvips's names), where libvips reads the header. */
  depth?: string;
  space?: string;
}

/** The first `n` bytes of a source (fewer when it is shorter). */
export async function firstBytes(source: ImageSource, n: number): Promise<Buffer> {
  if (typeof source !== 'string') return Buffer.from(source.buffer, source.byteOffset, Math.min(n, source.length));
  const fh = await open(source, 'r');
  try {
    const buf = Buffer.alloc(n);
    const { bytesRead } = await fh.read(buf, 0, n, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** `image.format_mismatch` unless the first bytes are `kind`'s signature (e.g. a PDF named .jpg). */
export function checkSignature(head: Buffer, kind: ImageKind): void {
  if (!hasSignature(head, kind)) {
    throw new JobError('image.format_mismatch', `The file is not a ${kind.toUpperCase()} image${describe(head)}.`);
  }
}

/**
 * libvips's reading of a header, with the door's strictness and without sharp's pixel cap: the
 * pixel budget is the door's own check, with its own code. `animated`: the header of every frame.
 */
export async function readHeader(source: ImageSource, animated = false): Promise<HeaderFacts> {
  let meta: Metadata;
  try {
    meta = await sharp(source, { failOn: FAIL_ON, limitInputPixels: false, ...(animated ? { animated } : {}) }).metadata();
  } catch (err) {
    throw imageError(err, typeof source === 'string' ? source : undefined);
  }
  const { format, orientation = 1, exif, icc, depth, space } = meta;
  return { format: format ?? 'unknown', width: meta.width ?? 0, height: meta.pageHeight ?? meta.height ?? 0, pages: meta.pages ?? 1, orientation, exif, icc, depth, space };
}

function describe(head: Buffer): string {
  const ascii = head.toString('latin1');
  if (ascii.startsWith('%PDF')) return ' (it is a PDF document)';
  if (ascii.startsWith('PK')) return ' (it is a ZIP archive)';
  const kind = kindOf(head);
  return kind ? ` (it is a ${kind.toUpperCase()} image)` : '';
}
