import { perMegabyte } from '../costing.ts';
import { compressionSchema, resizeSchema } from '../options.ts';
import type { CompressorEntry } from '../types.ts';

export const png: CompressorEntry = {
  jobType: 'image.png-compress',
  category: 'images',
  path: '/compress/png',
  inputFormats: ['png'],
  listedFormats: ['png'],
  outputsFor: () => ['png'],
  optionProperties: { resize: resizeSchema, compression: compressionSchema },
  costing: perMegabyte(1, 5),
  worker: 'png',
  maxConcurrentJobs: 6,
};
