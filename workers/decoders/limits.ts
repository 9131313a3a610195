import { JobError } from '../contract.ts';
import { MAX_PIXELS } from '../image/probe.ts';

export { MAX_PIXELS };

/** Refuses a header that declares more pixels than the budget, before any pixel is decoded. */
export function checkPixelBudget(width: number, height: number, maxPixels: number, frames = 1): void {
  if (!(width >= 1 && height >= 1)) throw new JobError('image.decode_failed', 'The image header declares no dimensions.');
  if (width * height * frames > maxPixels) {
    throw new JobError(
      'image.too_many_pixels',
      `The image declares ${width}×${height}${frames > 1 ? `×${frames}` : ''} pixels, more than the limit of ${maxPixels / 1e6} megapixels.`,
    );
  }
}

export function decodeError(err: unknown, what: string): JobError {
  if (err instanceof JobError) return err;
  const message = err instanceof Error ? err.message.split('\n')[0] : String(err);
  return new JobError('image.decode_failed', `The ${what} could not be decoded: ${message}`);
}
