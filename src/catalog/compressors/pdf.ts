import { perMegabyte } from '../costing.ts';
import type { CompressorEntry } from '../types.ts';

export const pdf: CompressorEntry = {
  jobType: 'document.pdf-compress',
  category: 'documents',
  path: '/compress/pdf',
  inputFormats: ['pdf'],
  listedFormats: ['pdf'],
  outputsFor: () => ['pdf'],
  optionProperties: {},
  costing: perMegabyte(1, 5),
  worker: 'pdf',
  maxConcurrentJobs: 4,
};
