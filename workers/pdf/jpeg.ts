import type { SearchBudget } from '../image/budget.ts';
import { defaultSetting, fastOptions, jpegOptions, jpegPipeline } from '../image/encode.ts';
import { frameComponents } from '../image/jpeg-quant.ts';
import type { Pixels } from '../image/ssim.ts';
import { chooseViewQuality } from './quality.ts';
import { phase } from '../shared/profile.ts';

/**
 * JPEG of gray or RGB samples drawn at `ppi` on the page, at the lowest quality that keeps the
 * perceived `target` as seen on the page (chooseViewQuality, within the document's `search` budget),
 * or undefined when that JPEG cannot be smaller than `ceiling` bytes.
 * The encode keeps the component count: a PDF image's ColorSpace says how many components its
 * JPEG must have (encodeJpegAuto would always emit sRGB).
 */
export async function encodePhoto(
  p: Pixels,
  ppi: number | undefined,
  { target, search, ceiling }: { target: number; search?: SearchBudget; ceiling?: number },
): Promise<{ data: Buffer; quality: number; score?: number } | undefined> {
  const final = (quality: number): Promise<Buffer> => {
    // As many components as the samples have (a grey picture stays one component).
    const img = jpegPipeline(p);
    const options = jpegOptions(defaultSetting(quality));
    return phase('encode', () => img.jpeg(search?.fastEncode ? fastOptions(options) : options).toBuffer());
  };
  const found = await phase('search', () => chooseViewQuality(p, ppi, { target, search, final, ceiling }));
  if (!found) return undefined;
  const { quality, encoded, score } = found;
  const data = encoded ?? (await final(quality));
  const channels = frameComponents(data);
  if (channels !== p.channels) throw new Error(`JPEG has ${channels} components, the image ${p.channels}`);
  return { data, quality, score };
}
