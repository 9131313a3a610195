import { open } from 'node:fs/promises';
import sharp from 'sharp';
import type { Metadata, SharpOptions } from 'sharp';
import { JobError } from '../contract.ts';
import { admitPixels, decodeOptions, imageError } from './door.ts';

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

/** The door's decode options, every frame for an animation. */
export function inputOptions(animated = false): SharpOptions {
  return decodeOptions({ animated });
}

/**
 * The dedicated compressors' header check, in front of the one image door (door.ts: options,
 * budget and failure codes). Reads only the header: format by magic bytes, then dimensions and
 * frame count, then the pixel budget. Besides the door's codes:
 * - `image.empty`: the file has no bytes.
 * - `image.format_mismatch`: the bytes are not the format the job is for (e.g. a PDF named .jpg).
 */
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
    throw imageError(err);
  }
  const width = meta.width ?? 0;
  const height = meta.pageHeight ?? meta.height ?? 0;
  const frames = meta.pages ?? 1;
  await admitPixels(width, height, undefined, frames);
  return { ...meta, width, height, frames };
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
