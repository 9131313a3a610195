import sharp, { type Sharp } from 'sharp';

/** Previews fit this box (longest edge), aspect kept, never enlarged. */
export const PREVIEW_EDGE = 1200;
const JPEG_QUALITY = 82;
const WEBP_QUALITY = 82;

export interface PreviewImage {
  /** Base64 of the encoded preview. */
  data: string;
  mimeType: 'image/jpeg' | 'image/webp';
  width: number;
  height: number;
}

/**
 * Encodes an upright picture as a preview: downscaled to fit PREVIEW_EDGE, in sRGB, as JPEG when
 * it is opaque and as WebP (which keeps alpha) when any pixel is transparent. An alpha channel
 * that is fully opaque is dropped, so a PNG saved with a useless alpha still previews as JPEG.
 */
export async function encodePreview(img: Sharp): Promise<PreviewImage> {
  const { data, info } = await img
    .resize(PREVIEW_EDGE, PREVIEW_EDGE, { fit: 'inside', withoutEnlargement: true, kernel: 'lanczos3' })
    .toColourspace('srgb')
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  const { width, height, channels } = info;
  const translucent = (channels === 2 || channels === 4) && hasTransparency(data, channels);
  const pixels = sharp(data, { raw: { width, height, channels: channels as 1 | 2 | 3 | 4 } });
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
