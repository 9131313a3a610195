import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Compress } from './contract.ts';
import { encodePng } from './image/png-encode.ts';
import { imageError, openImage } from './image/door.ts';
import { applyResize, targetSize } from './image/resize.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';
import { onScale, type Toward } from './shared/progress.ts';

/**
 * image.png-compress. `compression.mode` lossy (default): perceptual palette quantisation;
 * lossless: pixel-identical; `compression.enabled: false`: resize (if asked) and lossless only.
 * Colour chunks (ICC, gamma, sRGB, cHRM, pHYs) are carried over; text chunks are dropped.
 */
export const compress: Compress = async (job, out, ctx) => {
  ctx.progress(2, 'decoding');
  const { image, facts: meta } = await openImage(job.inputPath, { kind: 'png' });
  const { compression, resize } = job.options;
  const mode = compression?.enabled === false || compression?.mode === 'lossless' ? 'lossless' : 'lossy';
  // keepIccProfile: pixels stay in their own colour space (no conversion to sRGB), the profile is re-attached below.
  const img = applyResize(image.keepIccProfile(), meta.width, meta.height, resize);
  ctx.progress(10, mode === 'lossy' ? 'analyzing' : 'encoding');
  const input = await readFile(job.inputPath);
  const progress = (fraction: number, step: 'analyzing' | 'encoding', toward?: Toward) => onScale(10, 80, (p, t) => ctx.progress(p, step, t))(fraction, toward);
  let encoded;
  try {
    encoded = await encodePng(img, mode, { colourChunksFrom: input, unchanged: targetSize(meta.width, meta.height, resize) === null, progress });
  } catch (err) {
    throw imageError(err, job.inputPath);
  }
  ctx.signal.throwIfAborted();
  ctx.progress(90, 'finalizing');
  const path = join(out.dir, 'output.png');
  await writeFile(path, encoded.data);
  const keptInput = await keepInputUnlessSmaller(job.inputPath, path);
  const size = keptInput ? meta : encoded;
  ctx.progress(100, 'finalizing');
  const perceived = keptInput || encoded.score === undefined ? {} : { perceivedQuality: encoded.score };
  return { path, format: 'png', contentType: 'image/png', width: size.width, height: size.height, ...perceived };
};
