import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import type { Compress } from './contract.ts';
import { encodeJpegAuto } from './image/encode.ts';
import { decodeFailed, inputOptions, probeImage } from './image/probe.ts';
import { applyResize, targetSize } from './image/resize.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';

/**
 * Below this saving the input is returned as it is: re-encoding an already optimised JPEG (our
 * own output, say) would cost a generation of quality for a few bytes.
 */
const MIN_SAVING = 0.01;

/** image.jpg-compress: perceptual auto quality (see image/encode.ts), EXIF/ICC/XMP kept, never larger. */
export const compress: Compress = async (job, out, ctx) => {
  ctx.progress(2, 'decoding');
  const meta = await probeImage(job.inputPath, 'jpeg');
  const resized = targetSize(meta.width, meta.height, job.options.resize);
  const img = applyResize(sharp(job.inputPath, inputOptions()), meta.width, meta.height, job.options.resize);
  let encoded;
  try {
    encoded = await encodeJpegAuto(img, { keepMetadata: true, progress: (p, phase) => ctx.progress(p, phase) });
  } catch (err) {
    throw decodeFailed(err);
  }
  ctx.signal.throwIfAborted();
  ctx.progress(90, 'finalizing');
  const path = join(out.dir, 'output.jpg');
  await writeFile(path, encoded.data);
  const keptInput = await keepInputUnlessSmaller(job.inputPath, path, resized ? 0 : MIN_SAVING);
  const stored = keptInput ? { width: meta.width, height: meta.height } : encoded;
  const swap = (meta.orientation ?? 1) >= 5;
  ctx.progress(100, 'finalizing');
  return {
    path,
    format: 'jpg',
    contentType: 'image/jpeg',
    width: swap ? stored.height : stored.width,
    height: swap ? stored.width : stored.height,
  };
};
