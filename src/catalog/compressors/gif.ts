import { perMegabyte } from '../costing.ts';
import { resizeSchema } from '../options.ts';
import type { CompressorEntry } from '../types.ts';

export const gif: CompressorEntry = {
  jobType: 'image.gif-compress',
  category: 'images',
  path: '/compress/gif',
  inputFormats: ['gif'],
  listedFormats: ['gif'],
  outputsFor: () => ['gif'],
  optionProperties: { resize: resizeSchema },
  costing: perMegabyte(1, 5),
  worker: 'gif',
  maxConcurrentJobs: 6,
};
