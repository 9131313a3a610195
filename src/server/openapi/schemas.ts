import { acceptedFormats, type CompressorEntry } from '../../catalog/index.ts';
import { formatSchema, ref } from './route-docs.ts';

const nullable = (type: string) => ({ type: [type, 'null'] });
const object = (properties: Record<string, unknown>, required = Object.keys(properties)) => ({ type: 'object', required, properties });
const STATUS = { type: 'string', enum: ['Queued', 'Running', 'Succeeded', 'Failed', 'Canceled'] };
const integers = (...names: string[]) => Object.fromEntries(names.map((n) => [n, { type: 'integer' }]));
const strings = (...names: string[]) => Object.fromEntries(names.map((n) => [n, { type: 'string' }]));

/** Success bodies, as src/server/views.ts and the discovery, entitlement, compare and ops routes write them. */
export const responseSchemas = {
  Costing: object({
    strategy: { type: 'string', enum: ['PerMegabyte', 'Fixed'] },
    baseCost: { type: 'integer' },
    increment: nullable('integer'),
    incrementUnit: nullable('string'),
    displaySuffix: { type: 'string' },
  }),
  JobAccepted: object({ ...strings('id', 'fileName', 'format', 'jobType'), status: STATUS, createdAt: { type: 'string', format: 'date-time' } }),
  JobStatus: object({
    ...strings('id', 'format', 'jobType'),
    status: STATUS,
    progress: object({ percent: { type: 'integer', minimum: 0, maximum: 100 }, phase: nullable('string') }),
    metrics: object({
      ...integers('inputBytes', 'outputBytes', 'creditCost'),
      compressionRatio: { type: 'number' },
      savingsPercent: { type: 'number' },
      perceivedQuality: {
        type: ['number', 'null'],
        minimum: 0,
        maximum: 100,
        description:
          'SSIMULACRA2 of the output against the input, one decimal (100: identical; about 90: hard to tell apart side by side at 1:1; 70: high quality; 50: medium), ' +
          "as the quality search measured it on a calibrated sample of the picture (a document's: its lowest lossy picture). " +
          'Null when nothing was encoded lossily (lossless output, the input returned unchanged, no picture recompressed) or the job has not succeeded.',
      },
    }),
    error: { oneOf: [object(strings('code', 'detail')), { type: 'null' }] },
    output: object({ ...strings('fileName', 'contentType'), fileCount: { type: 'integer' } }),
    createdAt: { type: 'string', format: 'date-time' },
    startedAt: nullable('string'),
    completedAt: nullable('string'),
    expiresAt: nullable('string'),
    expired: { type: 'boolean' },
  }),
  JobDeleted: object({ id: { type: 'string' }, deleted: { type: 'boolean', const: true } }),
  Compare: object({
    ...strings('beforeImage', 'afterImage', 'beforeMimeType', 'afterMimeType'),
    ...integers('originalBytes', 'compressedBytes', 'previewWidth', 'previewHeight', 'afterPreviewWidth', 'afterPreviewHeight', 'inputWidth', 'inputHeight', 'outputWidth', 'outputHeight'),
    wasResized: { type: 'boolean' },
  }),
  CostEstimate: object({
    ...strings('job', 'category'),
    estimatedCredits: { type: 'integer' },
    costing: ref('Costing'),
    inputs: object({ fileSizeBytes: nullable('integer'), fileSizeMb: nullable('number') }),
    limits: object(integers('maxFileSizeBytes')),
  }),
  Entitlements: object({
    account: { type: 'string' },
    guest: { type: 'boolean' },
    balance: { type: 'integer' },
    credits: object(integers('granted', 'spent', 'reserved', 'available')),
    limits: object(integers('maxFileSizeBytes', 'maxConcurrentJobs', 'maxQueuedJobs', 'maxBatchFiles')),
  }),
  Compressor: object({
    ...strings('job', 'category', 'endpoint'),
    costing: ref('Costing'),
    inputFormats: { type: 'array', items: { type: 'string' } },
    outputFormats: { type: 'array', items: { type: 'string' } },
    ...integers('maxFileSizeBytes', 'maxConcurrentJobs'),
  }),
  FormatEdge: object({ ...strings('sourceFormat', 'targetFormat', 'job', 'endpoint', 'category'), costing: ref('Costing'), ...integers('maxFileSizeBytes', 'maxConcurrentJobs') }),
  Compressors: object({
    compressors: { type: 'array', items: ref('Compressor') },
    sourceFormatTo: { type: 'object', additionalProperties: { type: 'array', items: ref('FormatEdge') } },
    ...integers('maxFileSizeBytes', 'maxConcurrentJobs', 'maxBatchFiles'),
  }),
  LegacyCompressors: object({
    compressors: {
      type: 'array',
      items: object({ ...strings('jobId', 'category', 'pool', 'endpoint'), formats: { type: 'array', items: { type: 'string', pattern: '^\\.' } } }),
    },
    next: { type: 'string' },
  }),
  Health: object({ status: { type: 'string', const: 'ok' } }),
  Readiness: object({ status: { type: 'string', enum: ['ready', 'not_ready'] }, reasons: { type: 'array', items: { type: 'string' } } }, ['status']),
  WebhookEvent: object(
    {
      event: { type: 'string', enum: ['job.succeeded', 'job.failed'] },
      ...strings('eventId', 'jobId', 'site'),
      jobType: { type: 'string', const: 'compress' },
      status: { type: 'string', enum: ['Succeeded', 'Failed'] },
      deliveryAttempt: { type: 'integer', minimum: 1, maximum: 5 },
      output: object({ ...strings('fileName', 'contentType', 'downloadUrl'), fileCount: { type: 'integer' }, expiresAt: { type: 'string', format: 'date-time' } }),
      error: object({ code: { type: 'string' }, detail: { type: 'string', maxLength: 256 } }),
      metrics: object({ ...integers('inputBytes', 'creditCost'), outputBytes: nullable('integer'), processingTimeMs: nullable('integer') }),
      completedAt: { type: 'string', format: 'date-time' },
    },
    ['event', 'eventId', 'jobId', 'jobType', 'site', 'status', 'deliveryAttempt', 'metrics', 'completedAt'],
  ),
};

export const errorSchema = {
  type: 'object',
  required: ['error', 'detail'],
  properties: { error: { type: 'string' }, detail: { type: ['string', 'null'] } },
  additionalProperties: true,
};

export const optionsName = (entry?: CompressorEntry) => (entry ? `Options_${entry.jobType}` : 'Options');

/**
 * The submission body: a multipart upload (`file`) or URL input (`inputUrl` + `sourceFormat`, as
 * form fields or JSON). The two multipart forms are a oneOf, so a form with both fields, or with
 * neither, is invalid, as the server says (`url_fetch.mutually_exclusive`, `request.no_files`).
 */
export function submitBody(entry?: CompressorEntry) {
  const formats = entry ? entry.inputFormats : acceptedFormats();
  const webhook = {
    webhookUrl: { type: 'string', format: 'uri', maxLength: 2048, description: 'HTTPS webhook target (a host name, not an IP address)' },
    webhookSecret: { type: 'string', minLength: 16, maxLength: 256 },
    webhookEvents: { type: 'string', description: 'succeeded, failed or succeeded,failed (default)' },
  };
  const optionsField = { type: 'string', description: 'JSON string of the options object', contentMediaType: 'application/json', contentSchema: ref(optionsName(entry)) };
  const form = (required: string[], input: Record<string, unknown>) => ({
    type: 'object',
    required,
    properties: { ...input, options: optionsField, ...webhook },
    dependentRequired: { webhookUrl: ['webhookSecret'] },
  });
  const urlInput = { inputUrl: { type: 'string', format: 'uri', description: 'HTTPS URL to fetch' }, sourceFormat: formatSchema(formats) };
  return {
    required: true,
    content: {
      'multipart/form-data': {
        schema: {
          oneOf: [
            { title: 'Upload', ...form(['file'], { file: { type: 'string', format: 'binary', description: `The file; its extension selects the format (${formats.join(', ')})` } }) },
            { title: 'URL input', ...form(['inputUrl', 'sourceFormat'], urlInput) },
          ],
        },
      },
      'application/json': {
        schema: { ...form(['inputUrl', 'sourceFormat'], urlInput), properties: { ...urlInput, options: ref(optionsName(entry)), ...webhook } },
      },
    },
  };
}
