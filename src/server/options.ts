import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { optionsSchemaOf, type CompressorEntry, type JobOptions } from '../catalog/index.ts';
import { ApiError } from '../errors.ts';

const ajv = new Ajv2020({ allErrors: false, strict: false });
const validators = new Map<string, ValidateFunction>();

function validatorFor(entry: CompressorEntry): ValidateFunction {
  let v = validators.get(entry.job);
  if (!v) {
    v = ajv.compile(optionsSchemaOf(entry));
    validators.set(entry.job, v);
  }
  return v;
}

/**
 * Parses (when given as the multipart JSON string) and validates submitted options against
 * the compressor's schema from the catalog. Errors: 400 `compress.invalid_options` naming
 * the failing path.
 */
export function validateOptions(entry: CompressorEntry, raw: unknown): JobOptions {
  if (raw === undefined || raw === null || raw === '') return {};
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw new ApiError('compress.invalid_options', 400, 'options must be a JSON object (as a string in multipart forms).', { path: '' });
    }
  }
  const validate = validatorFor(entry);
  if (!validate(value)) {
    const e = validate.errors![0];
    const path = e.instancePath || '';
    const extra = e.keyword === 'additionalProperties' ? ` (${(e.params as { additionalProperty: string }).additionalProperty})` : '';
    throw new ApiError('compress.invalid_options', 400, `options${path.replaceAll('/', '.')} ${e.message}${extra}; see GET /compress/schema/${entry.inputFormats[0]}.`, {
      path: path.replaceAll('/', '.').replace(/^\./, ''),
    });
  }
  return value as JobOptions;
}
