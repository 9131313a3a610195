import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { compressorForJobType, optionsSchemaOf, RESIZE_PRESETS, unionOptionsSchema, type CompressorEntry, type JobOptions, type ResizeOptions } from './catalog/index.ts';
import { ApiError } from './errors.ts';

/**
 * Compression options as the API and the offline CLI take them: one validator (against the
 * catalog's schemas), one error format, and one rule for naming outputs.
 */
const ajv = new Ajv2020({ allErrors: false, strict: false });
const validators = new Map<string, ValidateFunction>();

function compiled(key: string, schema: () => Record<string, unknown>): ValidateFunction {
  let v = validators.get(key);
  if (!v) {
    v = ajv.compile(schema());
    validators.set(key, v);
  }
  return v;
}

/** `<label>.resize.preset must be equal to one of the allowed values`, and the failing path (a missing property's own). */
function describe(e: ErrorObject, label: string): { path: string; text: string } {
  const dotted = e.instancePath.replaceAll('/', '.');
  const extra = e.keyword === 'additionalProperties' ? ` (${(e.params as { additionalProperty: string }).additionalProperty})` : '';
  const path = e.keyword === 'required' ? `${dotted}.${(e.params as { missingProperty: string }).missingProperty}` : dotted;
  return { path: path.replace(/^\./, ''), text: `${label}${dotted} ${e.message}${extra}` };
}

function invalid(detail: string, path: string): ApiError {
  return new ApiError('compress.invalid_options', 400, detail, { path });
}

function parse(raw: unknown, label: string): unknown {
  if (typeof raw !== 'string') return raw;
  try {
    return JSON.parse(raw);
  } catch {
    throw invalid(`${label} must be a JSON object (as a string in multipart forms).`, '');
  }
}

/**
 * A JSON body carries options as the object itself (the spec: "JSON-body object `options`"); the
 * JSON string form is a multipart form's, so a string there is refused rather than parsed.
 */
export function assertOptionsObject(raw: unknown): void {
  if (typeof raw === 'string') throw invalid('options must be an object in a JSON body (a JSON string only in multipart forms).', '');
}

/**
 * Parses (when given as a JSON string) and validates options against one compressor's schema.
 * Errors: 400 `compress.invalid_options` naming the failing path.
 */
export function validateOptions(entry: CompressorEntry, raw: unknown, label = 'options'): JobOptions {
  if (raw === undefined || raw === null || raw === '') return {};
  const value = parse(raw, label);
  const validate = compiled(entry.jobType, () => optionsSchemaOf(entry));
  if (!validate(value)) {
    const { path, text } = describe(validate.errors![0]!, label);
    throw invalid(`${text}; see GET /compress/schema/${entry.inputFormats[0]}.`, path);
  }
  return value as JobOptions;
}

/** Validates options meant for several compressors at once (the CLI): each must be some compressor's. */
export function validateAnyOptions(raw: unknown, label: string): Record<string, unknown> {
  if (raw === undefined) return {};
  const value = parse(raw, label);
  const validate = compiled('*', unionOptionsSchema);
  if (!validate(value)) {
    const { path, text } = describe(validate.errors![0]!, label);
    throw invalid(text, path);
  }
  return value as Record<string, unknown>;
}

/**
 * Valid options that change nothing, each with why (the schema's defaults make them legal): the
 * command line warns, since a run that exits 0 with untouched sizes looks like a broken compressor.
 */
export function ineffectiveOptions(options: Record<string, unknown>, label = 'options'): string[] {
  const resize = options.resize as ResizeOptions | undefined;
  if (!resize) return [];
  if (resize.enabled !== true) return [`${label}.resize has no effect without "enabled": true`];
  const named = resize.preset !== undefined && resize.preset in RESIZE_PRESETS;
  if (!named && typeof resize.value !== 'number') return [`${label}.resize has no effect: give a "preset" (${Object.keys(RESIZE_PRESETS).join(', ')}), or a "mode" and a "value"`];
  if (named && typeof resize.value === 'number') return [`${label}.resize.value is ignored: the preset ${resize.preset} sets the size`];
  return [];
}

/** The options one compressor gets out of options meant for several: those it has, validated as the API does. */
export function optionsFor(entry: CompressorEntry, options: Record<string, unknown>, label = 'options'): JobOptions {
  const own = Object.fromEntries(Object.entries(options).filter(([k]) => k === '_schemaVersion' || k in entry.optionProperties));
  return validateOptions(entry, own, label);
}

/** The output format a job has or will have (the universal compressor decides at run time). */
export function expectedOutputFormat(job: { jobType: string; format: string; output: { format: string } | null }): string {
  return job.output?.format ?? compressorForJobType(job.jobType)?.outputsFor(job.format)[0] ?? job.format;
}

/** An output is named after its input, with the extension of its own format: `photo.jpeg` → `photo.jpg`. */
export function outputFileName(inputBaseName: string, outputFormat: string): string {
  return `${inputBaseName}.${outputFormat}`;
}

const SPELLINGS: Record<string, string> = { jpeg: 'jpg', tif: 'tiff' };

/** Whether an input of extension `ext` and an output of `format` are one format (`jpeg` and `jpg` are). */
export function sameFormat(ext: string, format: string): boolean {
  return (SPELLINGS[ext] ?? ext) === (SPELLINGS[format] ?? format);
}
