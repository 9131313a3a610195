import type { PreviewImage } from '../../src/catalog/contract.ts';
import { pixelPipeline, type Pipeline } from '../image/vips.ts';

/** Previews fit this box (longest edge), aspect kept, never enlarged: the compare view's first look. */
export const PREVIEW_EDGE = 1200;
/**
 * `size=full` previews fit this box instead: the picture's own pixels for anything up to a
 * 33-megapixel photo, so the compare view can show it 1:1. Kept below the pixel budget of a
 * worker and the compare cache's share per entry.
 */
export const FULL_EDGE = 7000;
/** A PDF page drawn for `size=full`: about 250 dpi on an A4 or Letter page, so small print is readable. */
export const FULL_PAGE_EDGE = 3000;
const JPEG_QUALITY = 82;
const WEBP_QUALITY = 82;

/**
 * Encodes an upright picture as a preview: downscaled to fit `edge`, in sRGB, as JPEG when
 * it is opaque and as WebP (which keeps alpha) when any pixel is transparent. An alpha channel
 * that is fully opaque is dropped, so a PNG saved with a useless alpha still previews as JPEG.
 */
export async function encodePreview(img: Pipeline, edge: number = PREVIEW_EDGE): Promise<PreviewImage> {
  const { data, info } = await img
    .resize(edge, edge, { fit: 'inside', withoutEnlargement: true, kernel: 'lanczos3' })
    .toColourspace('srgb')
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  const { width, height, channels } = info;
  const translucent = (channels === 2 || channels === 4) && hasTransparency(data, channels);
  const pixels = pixelPipeline({ data, width, height, channels });
  if (translucent) {
    const webp = await pixels.webp({ quality: WEBP_QUALITY, alphaQuality: 90, effort: 2 }).toBuffer();
    return { data: webp.toString('base64'), mimeType: 'image/webp', width, height };
  }
  const opaque = channels === 2 || channels === 4 ? pixels.removeAlpha() : pixels;
  const jpeg = await opaque.jpeg({ quality: JPEG_QUALITY, mozjpeg: true }).toBuffer();
  return { data: jpeg.toString('base64'), mimeType: 'image/jpeg', width, height };
}

function hasTransparency(data: Buffer, channels: number): boolean {
  for (let i = channels - 1; i < data.length; i += channels) if (data[i] !== 255) return true;
  return false;
}
