import { gif } from './compressors/gif.ts';
import { jpg } from './compressors/jpg.ts';
import { office } from './compressors/office.ts';
import { pdf } from './compressors/pdf.ts';
import { png } from './compressors/png.ts';
import { universal } from './compressors/universal.ts';
import { schemaVersionSchema } from './options.ts';
import type { CompressorEntry, JsonSchema } from './types.ts';

export * from './types.ts';
export { creditsFor, MB } from './costing.ts';
export { RESIZE_PRESETS } from './options.ts';

/**
 * Every compressor, dedicated ones first: a format accepted by several compressors is
 * routed on `POST /compress` to the first one listing it.
 */
export const COMPRESSORS: readonly CompressorEntry[] = [jpg, png, gif, universal, pdf, office];

/** The unified submission path every compressor record names as its `endpoint`. */
export const SUBMIT_ENDPOINT = '/compress';

const CONTENT_TYPES: Record<string, string> = {
  jpg: 'image/jpeg',
  png: 'image/png',
  gif: 'image/gif',
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
};

export function contentTypeOf(format: string): string {
  return CONTENT_TYPES[format] ?? 'application/octet-stream';
}

export function normaliseFormat(format: string): string {
  return format.trim().toLowerCase().replace(/^\./, '');
}

/** Dotless formats accepted by some compressor, sorted. */
export function acceptedFormats(): string[] {
  return [...new Set(COMPRESSORS.flatMap((c) => c.inputFormats))].sort();
}

/** The published supported-format list (dotless, sorted) that estimate and schema errors give. */
export function supportedFormats(): string[] {
  return [...new Set(COMPRESSORS.flatMap((c) => c.listedFormats))].sort();
}

export function compressorForFormat(format: string): CompressorEntry | undefined {
  const f = normaliseFormat(format);
  return COMPRESSORS.find((c) => c.inputFormats.includes(f));
}

export function compressorForJobType(jobType: string): CompressorEntry | undefined {
  return COMPRESSORS.find((c) => c.jobType === jobType);
}

export function compressorForPath(path: string): CompressorEntry | undefined {
  return COMPRESSORS.find((c) => c.path === path);
}

export function outputFormatsOf(entry: CompressorEntry): string[] {
  return [...new Set(entry.inputFormats.flatMap((f) => entry.outputsFor(f)))];
}

const SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** The options schema of one compressor, as served and as enforced. */
export function optionsSchemaOf(entry: CompressorEntry): JsonSchema {
  return {
    $schema: SCHEMA_DIALECT,
    $comment: entry.jobType,
    title: `Options for ${entry.jobType}`,
    type: 'object',
    properties: { _schemaVersion: schemaVersionSchema, ...entry.optionProperties },
    additionalProperties: false,
  };
}

/** The union of every compressor's options. */
export function unionOptionsSchema(): JsonSchema {
  const properties: Record<string, JsonSchema> = { _schemaVersion: schemaVersionSchema };
  for (const c of COMPRESSORS) Object.assign(properties, c.optionProperties);
  return {
    $schema: SCHEMA_DIALECT,
    $comment: `Union of the options of ${COMPRESSORS.map((c) => c.jobType).join(', ')}`,
    title: 'Compression options',
    type: 'object',
    properties,
    additionalProperties: false,
  };
}
