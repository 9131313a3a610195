import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Compress } from './contract.ts';
import { smallestLossyGif } from './image/gif/lossy.ts';
import { imageError, openImage } from './image/door.ts';
import { targetSize } from './image/resize.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';

/**
 * image.gif-compress: lossy LZW (gifsicle's `--lossy` technique, our own encoder) at the strongest
 * level whose displayed frames keep the perceived target; frames, loop count, delays and disposal
 * are copied from the input (or from sharp's resized re-encode, which keeps every frame).
 */
export const compress: Compress = async (job, out, ctx) => {
  ctx.progress(2, 'decoding');
  const { image, facts: meta } = await openImage(job.inputPath, { kind: 'gif', animated: true });
  const size = targetSize(meta.width, meta.height, job.options.resize);
  let result;
  try {
    let source: Uint8Array = await readFile(job.inputPath);
    if (size) {
      ctx.progress(10, 'encoding');
      source = await image
        .resize(size.width, size.height, { fit: 'fill', kernel: 'lanczos3' })
        .gif({ effort: 10, keepDuplicateFrames: true })
        .toBuffer();
    }
    ctx.progress(20, 'optimizing');
    result = await smallestLossyGif(source, (f) => ctx.progress(20 + Math.round(65 * f), 'optimizing'));
  } catch (err) {
    throw imageError(err, job.inputPath);
  }
  ctx.signal.throwIfAborted();
  ctx.progress(90, 'finalizing');
  const path = join(out.dir, 'output.gif');
  await writeFile(path, result.data);
  const keptInput = await keepInputUnlessSmaller(job.inputPath, path);
  const dims = size && !keptInput ? size : meta;
  ctx.progress(100, 'finalizing');
  const perceived = keptInput || result.score === undefined ? {} : { perceivedQuality: result.score };
  return { path, format: 'gif', contentType: 'image/gif', width: dims.width, height: dims.height, ...perceived };
};
