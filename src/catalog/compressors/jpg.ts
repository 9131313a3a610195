import { perMegabyte } from '../costing.ts';
import { resizeSchema } from '../options.ts';
import type { CompressorEntry } from '../types.ts';

export const jpg: CompressorEntry = {
  jobType: 'image.jpg-compress',
  category: 'images',
  path: '/compress/jpg',
  inputFormats: ['jpg', 'jpeg'],
  listedFormats: ['jpg'],
  outputsFor: () => ['jpg'],
  optionProperties: { resize: resizeSchema },
  costing: perMegabyte(1, 5),
  worker: 'jpg',
  maxConcurrentJobs: 6,
};
