import { perMegabyte } from '../costing.ts';
import { resizeSchema } from '../options.ts';
import type { CompressorEntry } from '../types.ts';

export const RAW_FORMATS = [
  'cr2', 'cr3', 'crw', 'nef', 'nrw', 'arw', 'sr2', 'srf', 'raf', 'dng', 'rw2', 'raw', 'orf', 'pef', '3fr',
  'fff', 'iiq', 'srw', 'x3f', 'gpr', 'mrw', 'dcr', 'kdc', 'erf', 'mef', 'mos',
];

const RASTER_FORMATS = ['jpg', 'jpeg', 'png', 'webp', 'avif', 'heic', 'heif', 'tiff', 'tif', 'bmp', 'gif', 'psd'];

/** The spec's output rules: JPG and RAW stay JPG; everything else is PNG with alpha, else JPG. */
export const universal: CompressorEntry = {
  jobType: 'image.universal-compress',
  category: 'images',
  path: '/compress/image',
  inputFormats: [...RASTER_FORMATS, ...RAW_FORMATS],
  listedFormats: ['webp', 'avif', 'heic', 'bmp'],
  outputsFor: (input) => (input === 'jpg' || input === 'jpeg' || RAW_FORMATS.includes(input) ? ['jpg'] : ['png', 'jpg']),
  optionProperties: { resize: resizeSchema },
  costing: perMegabyte(1, 5),
  worker: 'universal',
  maxConcurrentJobs: 6,
};
