import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Compress } from './contract.ts';
import { encodeJpegAuto, type JpegSetting } from './image/encode.ts';
import { dropExifThumbnail } from './image/exif-thumbnail.ts';
import { jpegOrigin, markAsOurs } from './image/jpeg-mark.ts';
import { alreadyAsCoarse } from './image/jpeg-quant.ts';
import { imageError, openImage, profileDecision } from './image/door.ts';
import { applyResize, targetSize } from './image/resize.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';
import { phase } from './shared/profile.ts';

/**
 * Below this saving the input is returned as it is: re-encoding an already optimised JPEG (our
 * own output, say) would cost a generation of quality for a few bytes.
 */
const MIN_SAVING = 0.01;
/**
 * An input already about as coarse as the chosen quality (jpeg-quant.ts) is still re-encoded when
 * the chosen form is predicted to save this much: another table set or chroma subsampling can
 * reach the target far smaller at the same luma coarseness (a CMYK photo: 72 KB at the target with
 * the standard tables and 4:4:4, for an input of 149 KB whose luminance table is as coarse).
 */
const FORM_GAIN = 0.1;

/** image.jpg-compress: perceptual auto quality (see image/encode.ts), EXIF/ICC/XMP kept, never larger. */
export const compress: Compress = async (job, out, ctx) => {
  ctx.progress(2, 'decoding');
  const { image, facts: meta } = await phase('read', () => openImage(job.inputPath, { kind: 'jpeg' }));
  const resized = targetSize(meta.width, meta.height, job.options.resize);
  const path = join(out.dir, 'output.jpg');
  const img = applyResize(image, meta.width, meta.height, job.options.resize);
  // Read once: its tables tell our own output, its coarseness the gain, its segments the metadata.
  const input = await readFile(job.inputPath);
  const inputBytes = input.length;
  // A profile that costs more than the picture is converted into (image/door.ts).
  const profile = await phase('analyse', () => profileDecision(img, meta.icc, inputBytes)).catch((err: unknown) => {
    throw imageError(err, job.inputPath);
  });
  if (!resized && profile.keep && (await phase('analyse', async () => jpegOrigin(input))) !== 'other') {
    // Already encoded by this encoder (or one with its tables) at a chosen quality: a second pass
    // would compound the loss (measured: 0.98 becomes 0.96-0.97 against the original).
    await copyFile(job.inputPath, path);
    ctx.progress(100, 'finalizing');
    return { path, format: 'jpg', contentType: 'image/jpeg', ...displayed(meta.width, meta.height, meta.orientation) };
  }
  let encoded;
  try {
    // Whether the input is already about as coarse as the chosen quality is known before the
    // full-size encode, which is then skipped (unless the gain is the profile).
    const worthEncoding =
      resized || !profile.keep
        ? undefined
        : async (setting: JpegSetting, predictedBytes: number) => predictedBytes < inputBytes * (1 - FORM_GAIN) || !(await alreadyAsCoarse(input, setting.quality, setting));
    // The searched pixels are the output's unless a kept profile other than sRGB stands between (encode.ts: metadataFrom).
    const asSearched = meta.space === 'cmyk' || !meta.icc || meta.asStored === true || !profile.keep;
    const metadataFrom = asSearched ? input : undefined;
    // jpegli only where the picture was resampled or comes from CMYK: on the input's own YCbCr 8×8
    // grid mozjpeg's forms re-quantise what the input kept, and made every corpus JPEG smaller
    // (jpegli's best form 2-11 % larger at the same perceived quality; offered, the search took it
    // on two and lost 5-6 %). A CMYK picture's blocks are in other components, so no quantisation
    // of the input survives into sRGB's (baiona_cmyk.jpg: jpegli's 4:4:4 6.1 % smaller, at a higher score).
    const jpegli = resized !== null || meta.space === 'cmyk';
    encoded = await encodeJpegAuto(img, { keepMetadata: true, convertProfile: !profile.keep, metadataFrom, jpegli, worthEncoding, progress: ctx.progress });
  } catch (err) {
    throw imageError(err, job.inputPath);
  }
  ctx.signal.throwIfAborted();
  ctx.progress(90, 'finalizing');
  const keptInput = await phase('write', async () => {
    if (!encoded) {
      await copyFile(job.inputPath, path);
      return true;
    }
    await writeFile(path, markAsOurs(dropExifThumbnail(encoded.data)));
    return keepInputUnlessSmaller(job.inputPath, path, resized ? 0 : MIN_SAVING);
  });
  const stored = keptInput || !encoded ? { width: meta.width, height: meta.height } : encoded;
  ctx.progress(100, 'finalizing');
  const perceived = keptInput || !encoded ? {} : { perceivedQuality: encoded.score };
  return { path, format: 'jpg', contentType: 'image/jpeg', ...displayed(stored.width, stored.height, meta.orientation), ...perceived };
};

/** Width and height as shown, after the EXIF orientation (5-8 swap the edges). */
function displayed(width: number, height: number, orientation = 1): { width: number; height: number } {
  return orientation >= 5 ? { width: height, height: width } : { width, height };
}
