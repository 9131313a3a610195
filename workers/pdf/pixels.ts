import { openImage } from '../image/door.ts';
import type { Pixels } from '../image/ssim.ts';
import { pixelPipeline } from '../image/vips.ts';
import type { Palette } from './image-info.ts';
import { phase } from '../shared/profile.ts';

/** Lanczos3 resampling of raw gray or RGB pixels to an exact size. */
export async function resample(p: Pixels, width: number, height: number): Promise<Pixels> {
  const img = pixelPipeline(p).resize(width, height, { fit: 'fill', kernel: 'lanczos3' });
  if (p.channels === 1) img.toColourspace('b-w');
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== p.channels) throw new Error(`resampling changed ${p.channels} channels into ${info.channels}`);
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/**
 * Decoded JPEG samples exactly as stored (no colour management: the PDF's ColorSpace rules),
 * through the image door; the document reserved the memory for its pictures (images.ts).
 */
export async function decodeJpeg(jpeg: Uint8Array, channels: 1 | 3): Promise<Pixels> {
  const { image: img } = await openImage(jpeg, { embedded: true, memory: 'reserved', asStored: true });
  // sharp hands grey JPEGs out as three equal channels unless asked for one.
  if (channels === 1) img.toColourspace('b-w');
  const { data, info } = await phase('decode', () => img.raw().toBuffer({ resolveWithObject: true }));
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** Indexed samples (1, 2, 4 or 8 bits) looked up into the base colour space's 8-bit components. */
export function expandPalette(indices: Uint8Array, size: { width: number; height: number; bitsPerComponent: number }, palette: Palette): Pixels {
  const { width, height, bitsPerComponent: bits } = size;
  const c = palette.baseComponents;
  const out = new Uint8Array(width * height * c);
  const rowBytes = Math.ceil((width * bits) / 8);
  const mask = (1 << bits) - 1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const bit = x * bits;
      const index = Math.min(palette.hival, (indices[y * rowBytes + (bit >> 3)] >> (8 - bits - (bit & 7))) & mask);
      const from = index * c;
      const to = (y * width + x) * c;
      for (let k = 0; k < c; k++) out[to + k] = palette.lookup[from + k] ?? 0;
    }
  }
  return { data: out, width, height, channels: c };
}

/**
 * Whether pixels look like a photograph or scan (JPEG territory) rather than flat artwork such as
 * charts, screenshots and diagrams (exact Flate territory): artwork repeats its left neighbour
 * exactly on most pixels, sensor noise and gradients almost never do. Sampled on ≤ 512 rows.
 */
export function looksPhotographic(p: Pixels): boolean {
  const { data, width, height, channels: c } = p;
  if (width < 16 || height < 16) return false;
  const step = Math.max(1, Math.floor(height / 512));
  let same = 0;
  let total = 0;
  for (let y = 0; y < height; y += step) {
    const row = y * width * c;
    for (let x = 1; x < width; x++) {
      const o = row + x * c;
      let eq = true;
      for (let k = 0; k < c; k++) if (data[o + k] !== data[o + k - c]) eq = false;
      if (eq) same++;
      total++;
    }
  }
  return same / total < 0.5;
}
