import type { Sharp } from 'sharp';
import { RESIZE_PRESETS } from '../../src/catalog/index.ts';
import type { ResizeOptions } from '../../src/catalog/index.ts';

/**
 * The size an image of `width`×`height` should be scaled to, or null when it stays as it is.
 * Named presets and `mode: 'pixels'` give the longest edge; `mode: 'percentage'` scales both
 * edges. Never upscales. Works on stored or displayed dimensions alike, since the longest edge
 * and a percentage do not depend on the EXIF orientation.
 */
export function targetSize(width: number, height: number, resize?: ResizeOptions): { width: number; height: number } | null {
  if (!resize?.enabled || width < 1 || height < 1) return null;
  const scale = scaleFor(Math.max(width, height), resize);
  if (scale === null || scale >= 1) return null;
  const w = Math.max(1, Math.round(width * scale));
  const h = Math.max(1, Math.round(height * scale));
  return w >= width && h >= height ? null : { width: w, height: h };
}

function scaleFor(longest: number, resize: ResizeOptions): number | null {
  const preset = resize.preset && resize.preset in RESIZE_PRESETS ? RESIZE_PRESETS[resize.preset] : undefined;
  if (preset !== undefined) return preset / longest;
  const value = resize.value;
  if (typeof value !== 'number' || value <= 0) return null;
  if (resize.mode === 'percentage') return value / 100;
  if (resize.mode === 'pixels' || resize.preset === 'custom') return value / longest;
  return null;
}

/**
 * Adds the resize step to a pipeline that sees `width`×`height` pixels at its resize step: the
 * stored dimensions, or the displayed ones when the pipeline auto-orients (sharp resizes after
 * rotating). Lanczos3 downscaling to the exact target size.
 */
export function applyResize(img: Sharp, width: number, height: number, resize?: ResizeOptions): Sharp {
  const size = targetSize(width, height, resize);
  if (!size) return img;
  return img.resize(size.width, size.height, { fit: 'fill', kernel: 'lanczos3' });
}
