import type { JsonSchema } from './types.ts';

/** Longest-edge pixel sizes of the named resize presets (never upscaled). */
export const RESIZE_PRESETS: Record<string, number> = { '4k': 3840, '2k': 2560, '1080p': 1920, '720p': 1280 };

const resizeMode: JsonSchema = { type: 'string', enum: ['pixels', 'percentage'], description: 'pixels: value is the longest edge; percentage: proportional scaling' };

export const resizeSchema: JsonSchema = {
  type: 'object',
  description: 'Downscale the image (never upscales).',
  properties: {
    enabled: { type: 'boolean', default: false },
    mode: resizeMode,
    preset: { type: 'string', enum: ['off', '4k', '2k', '1080p', '720p', 'custom'], default: 'off' },
    value: { type: ['integer', 'null'], minimum: 1, maximum: 10000, description: 'the size in `mode`, which must be given with it' },
  },
  additionalProperties: false,
  allOf: [
    // A value means nothing without its unit: refused rather than silently ignored.
    { if: { properties: { value: { type: 'integer' } }, required: ['value'] }, then: { properties: { mode: resizeMode }, required: ['mode'] } },
    {
      if: { properties: { mode: { const: 'percentage' }, value: { type: 'integer' } }, required: ['mode', 'value'] },
      then: { properties: { value: { maximum: 99 } } },
    },
  ],
};

export const compressionSchema: JsonSchema = {
  type: 'object',
  description: 'PNG compression: lossy palette quantisation (smaller) or lossless optimisation.',
  properties: {
    enabled: { type: 'boolean', default: true },
    mode: { type: 'string', enum: ['lossy', 'lossless'], default: 'lossy' },
  },
  additionalProperties: false,
};

export const schemaVersionSchema: JsonSchema = { type: 'integer', const: 1 };
