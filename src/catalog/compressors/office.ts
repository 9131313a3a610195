import { perMegabyte } from '../costing.ts';
import { resizeSchema } from '../options.ts';
import type { CompressorEntry } from '../types.ts';

export const office: CompressorEntry = {
  jobType: 'document.office-compress',
  category: 'documents',
  path: '/compress/office',
  inputFormats: ['docx', 'pptx'],
  listedFormats: ['docx', 'pptx'],
  outputsFor: (input) => [input],
  optionProperties: { resize: resizeSchema },
  costing: perMegabyte(1, 5),
  worker: 'office',
  maxConcurrentJobs: 4,
};
