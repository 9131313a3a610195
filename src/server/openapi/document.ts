import { acceptedFormats, COMPRESSORS, contentTypeOf, optionsSchemaOf, outputFormatsOf, unionOptionsSchema, type CompressorEntry } from '../../catalog/index.ts';
import { RATE_LIMIT_EXEMPT } from '../middleware/rate-limit.ts';
import { SUPPORTED_VERSIONS, takesVersionSuffix } from '../middleware/versioning.ts';
import { VERSION } from '../../version.ts';

export interface RouteInfo {
  method: string;
  path: string;
}

type Schema = Record<string, unknown>;

interface Body {
  /** Media type → schema; a bare schema means `application/json`. */
  content?: Record<string, Schema>;
  headers?: Record<string, unknown>;
}

interface RouteDoc {
  /** The stable operationId generated clients name their methods after. */
  id: string;
  summary: string;
  /** What a caller needs to know beyond the summary (Spectral's operation-description). */
  description: string;
  /** `false`: no API key; `token`: the presigned `token` query parameter only; `key-or-token`: either. */
  auth?: false | 'token' | 'key-or-token';
  /** Success status, description and body. */
  ok: [number, string, Body?];
  /** Error codes this route answers with (beyond the ones every route has), by status. */
  errors?: Record<number, string[]>;
  /** Other answers that are not the error envelope (a 304, a 503 in another shape), by status. */
  other?: Record<number, [string, Body?]>;
  /** Headers an error answer carries, by status (429 and a submission's 409/503 have Retry-After anyway). */
  errorHeaders?: Record<number, Record<string, unknown>>;
  query?: Schema[];
  /** Request headers beyond the version one, as references to `components.parameters`. */
  headers?: string[];
  /** The submission body, for `POST /compress` (undefined entry) or a dedicated path. */
  submit?: { entry?: CompressorEntry };
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Schema): Body => ({ content: { 'application/json': schema } });
const text = (mediaType: string): Body => ({ content: { [mediaType]: { type: 'string' } } });
const header = (name: string) => ({ $ref: `#/components/headers/${name}` });
const retryAfter = { 'Retry-After': header('RetryAfter') };

const SUBMIT_ERRORS = {
  400: [
    'request.invalid_content_type', 'request.no_files', 'request.empty_file', 'request.invalid_extension', 'request.multiple_files',
    'request.invalid_body', 'request.invalid_idempotency_key', 'compress.unsupported_format', 'compress.{format}.validation.unsupported_format',
    'compress.invalid_options', 'compress.invalid_webhook', 'url_fetch.missing_source_format', 'url_fetch.invalid_url', 'url_fetch.invalid_scheme',
    'url_fetch.private_ip', 'url_fetch.mutually_exclusive', 'url_fetch.output_url_reserved', 'url_fetch.http_error', 'url_fetch.dns_failure',
    'url_fetch.timeout', 'url_fetch.too_large', 'url_fetch.redirect_loop', 'url_fetch.redirect_denied', 'url_fetch.domain_circuit_open',
    'url_fetch.url_expired', 'url_fetch.no_filename', 'url_fetch.invalid_content',
  ],
  402: ['entitlements.insufficient_credits'],
  403: ['url_fetch.guest_not_allowed'],
  409: ['request.idempotency_in_progress'],
  413: ['request.file_too_large'],
  422: ['request.idempotency_mismatch'],
  429: ['queue.limit_exceeded', 'url_fetch.rate_limited'],
  503: ['server.insufficient_storage', 'server.shutting_down'],
};

const JOB_ERRORS = { 403: ['jobs.forbidden'], 404: ['jobs.not_found'] };

/**
 * A format as a path parameter or `sourceFormat`: any string, since the server reads it in any
 * case and with or without its dot, and answers a format no compressor takes with its own 400
 * (an enum would make that documented answer an invalid request).
 */
const formatSchema = (formats = acceptedFormats()) => ({
  type: 'string',
  minLength: 1,
  description: `A dotless format, in any case (jpg, JPG and .jpg are one format). Supported: ${formats.join(', ')}; another answers 400 with the supported list.`,
  examples: ['jpg', 'PNG'],
});
const LISTING_QUERY = [
  {
    name: 'formats',
    in: 'query',
    required: false,
    description: 'Comma-separated dotless formats; a compressor matches when it accepts or produces one of them. Unknown formats match nothing.',
    schema: { type: 'string', examples: ['png,webp'] },
  },
  { name: 'category', in: 'query', required: false, description: 'Category; an unknown category matches nothing.', schema: { type: 'string', examples: ['images', 'documents'] } },
];
const listing = (id: string, summary: string, description: string): RouteDoc => ({ id, summary, description, ok: [200, 'GetCompressorsResponse', json(ref('Compressors'))], query: LISTING_QUERY });
const outputContentTypes = () => [...new Set(COMPRESSORS.flatMap((c) => outputFormatsOf(c)).map(contentTypeOf))].sort();
const validatorHeaders = { ETag: header('ETag'), 'Last-Modified': header('LastModified') };
const fileBody = (extra: Record<string, unknown> = {}): Body => ({
  content: Object.fromEntries(outputContentTypes().map((t) => [t, { type: 'string', format: 'binary' }])),
  headers: { 'Content-Disposition': { description: 'attachment, with the output file name', schema: { type: 'string' } }, 'Accept-Ranges': header('AcceptRanges'), ...validatorHeaders, ...extra },
});
/** Both download routes answer ranges and validators alike (`downloadResponse`). */
const download = (id: string, summary: string, auth: RouteDoc['auth'], errors: Record<number, string[]>): RouteDoc => ({
  id,
  summary,
  description:
    'Streams the output of a Succeeded job until its retention ends (then 410). One byte range answers 206; validators (ETag, Last-Modified) answer 304. ' +
    'The body is never compressed in transit (Cache-Control: no-transform).',
  auth,
  ok: [200, 'the output file (also the answer to several ranges, to an If-Range that does not match, and to a HEAD)', fileBody()],
  other: {
    206: ['one byte range of the output file', fileBody({ 'Content-Range': { ...header('ContentRange') } })],
    304: ['Not modified (If-None-Match matched the ETag, or If-Modified-Since is not before Last-Modified)', { headers: validatorHeaders }],
  },
  errors: { ...errors, 416: ['download.range_not_satisfiable'] },
  errorHeaders: { 416: { 'Content-Range': header('UnsatisfiedRange') } },
  headers: ['Range', 'IfRange', 'IfNoneMatch', 'IfModifiedSince'],
});
const uiAsset = (id: string, summary: string, mediaType: string): RouteDoc => ({
  id,
  summary,
  description: 'Part of the web page that takes an API key and compresses dropped files through this API; revalidated by ETag.',
  auth: false,
  ok: [200, summary, text(mediaType)],
  other: { 304: ['Not modified (If-None-Match matched the ETag)'] },
  errors: { 503: ['ui.unavailable'] },
});

/**
 * What each route does, keyed by `METHOD path` as the router registers it. The document's
 * paths come from the live router, so a route without an entry here fails the OpenAPI test.
 */
export const ROUTE_DOCS: Record<string, RouteDoc> = {
  'GET /compress/schema': {
    id: 'getOptionsSchema',
    summary: 'Union JSON Schema of every option',
    description: 'Every option any compressor takes; no API key needed. A format-specific schema is at /compress/schema/{format}.',
    auth: false, ok: [200, 'JSON Schema (draft 2020-12)', { content: { 'application/schema+json': { type: 'object' } } }] },
  'GET /compress/schema/:format': {
    id: 'getFormatOptionsSchema',
    summary: "Options schema of the format's compressor",
    description: "The options the format's compressor validates a submission's options against (draft 2020-12; `$comment` names the job type); no API key needed.",
    auth: false,
    ok: [200, 'JSON Schema (draft 2020-12)', { content: { 'application/schema+json': { type: 'object' } } }],
    errors: { 400: ['schema.unsupported_format'] },
  },
  'GET /healthz': { id: 'getHealth', summary: 'Process alive', description: 'Liveness probe: answers while the process runs; never rate-limited, no API key.', auth: false, ok: [200, 'ok', json(ref('Health'))] },
  'GET /readyz': {
    id: 'getReadiness',
    summary: 'Ready: data dir writable, pool up, disk space above the threshold',
    description: 'Readiness probe for a load balancer: 503 with the reasons while this node should get no traffic; never rate-limited, no API key.',
    auth: false,
    ok: [200, 'ready', json(ref('Readiness'))],
    other: { 503: ['not_ready, with the reasons', json(ref('Readiness'))] },
  },
  'GET /metrics': {
    id: 'getMetrics',
    summary: 'Prometheus metrics (bearer token when configured)',
    description: 'Request, job, queue, pool and disk metrics in the Prometheus text format; when a metrics token is configured, it must come as a bearer token.',
    auth: false, ok: [200, 'Prometheus text exposition format', text('text/plain')], errors: { 401: ['metrics.unauthorized'] } },
  'GET /openapi.json': { id: 'getOpenApiDocument', summary: 'This document', description: 'The OpenAPI 3.1 document of this server, built from its own routes and compressor catalog.', auth: false, ok: [200, 'OpenAPI 3.1', json({ type: 'object' })] },
  'GET /docs': { id: 'getApiReference', summary: 'Human-readable API reference', description: 'An HTML page rendering this document.', auth: false, ok: [200, 'HTML', text('text/html')] },
  'GET /': uiAsset('getWebUi', 'Web UI', 'text/html'),
  'GET /ui/app.js': uiAsset('getWebUiScript', 'Web UI script', 'text/javascript'),
  'GET /ui/app.css': uiAsset('getWebUiStyles', 'Web UI style sheet', 'text/css'),
  'GET /api/compress/job/:id/download': download('downloadJobWithToken', 'Presigned download (token query parameter, no key)', 'token', {
    401: ['download.invalid_token'],
    409: ['jobs.not_ready'],
    410: ['jobs.expired'],
  }),
  'GET /compress': {
    id: 'listCompressorsLegacy',
    summary: 'Legacy compressor listing',
    description: 'The minimal listing older clients read (formats with a leading dot); new clients use /compress/compressors.',
    ok: [200, 'jobId, category, pool, dotted formats', json(ref('LegacyCompressors'))] },
  'GET /compress/compressors': listing('listCompressors', 'All compressors, the format graph and limits', 'Every compressor with its formats, costing and limits for this API key, and the graph from each source format to its targets.'),
  'GET /compress/compressors/:filter': listing('listCompressorsByFilter', 'Compressors by format (input or output) or category', 'The listing narrowed to a format (accepted or produced) or a category (images, documents); no match is an empty list.'),
  'GET /compress/compressors/from/:format': listing('listCompressorsFrom', 'Compressors accepting the format', 'The listing narrowed to the compressors that take the format as input.'),
  'GET /compress/compressors/to/:format': listing('listCompressorsTo', 'Compressors producing the format', 'The listing narrowed to the compressors that can output the format.'),
  'GET /compress/estimate/:format': {
    id: 'estimateCost',
    summary: 'Cost estimate',
    description: 'Credits a file of the given size would cost with this API key, the costing rule and the size limit. Without a size: the base cost (a minimum).',
    ok: [200, 'CompressCostEstimateResponse', json(ref('CostEstimate'))],
    errors: { 400: ['estimate.unsupported_format', 'estimate.invalid_size'] },
    query: [
      { name: 'fileSizeBytes', in: 'query', required: false, description: 'Input size in bytes; wins over fileSizeMb.', schema: { type: 'integer', minimum: 0 } },
      { name: 'fileSizeMb', in: 'query', required: false, description: 'Input size in megabytes (MiB).', schema: { type: 'number', minimum: 0 } },
    ],
  },
  'GET /compress/entitlements/me': {
    id: 'getEntitlements',
    summary: 'Credit balance and plan limits',
    description: 'The API key\'s account: credits granted, spent, reserved by open jobs and available, and its limits.',
    ok: [200, 'balance, credits, limits', json(ref('Entitlements'))] },
  'POST /compress': {
    id: 'submitJob',
    summary: 'Submit a job (upload or URL)',
    description:
      'One file per request: a multipart upload (the extension picks the compressor) or an HTTPS URL with its sourceFormat (multipart fields or JSON). ' +
      'Options are a JSON string in a form and an object in a JSON body. Credits are reserved here and charged on success.',
    ok: [202, 'Job accepted', json(ref('JobAccepted'))], errors: SUBMIT_ERRORS, submit: {} },
  'GET /compress/job/:id': { id: 'getJob', summary: 'Job status', description: 'Status, progress, metrics and output of one of this account\'s jobs; poll it until Succeeded, Failed or Canceled.', ok: [200, 'Job status response', json(ref('JobStatus'))], errors: JOB_ERRORS },
  'GET /compress/job/:id/download': download('downloadJob', 'Download the output (API key, or a presigned token)', 'key-or-token', {
    ...JOB_ERRORS,
    401: ['download.invalid_token'],
    409: ['jobs.not_ready'],
    410: ['jobs.expired'],
  }),
  'POST /compress/job/:id/cancel': {
    id: 'cancelJob',
    summary: 'Cancel a queued or running job',
    description: 'The job ends Canceled and its reserved credits are released; a finished job answers 409.',
    ok: [200, 'Job status response', json(ref('JobStatus'))], errors: { ...JOB_ERRORS, 409: ['jobs.not_cancellable'] } },
  'DELETE /compress/job/:id': {
    id: 'deleteJob',
    summary: 'Delete a finished job and its files',
    description: 'Removes the record and its input and output at once; a queued or running job answers 409 (cancel it first).',
    ok: [200, '{id, deleted}', json(ref('JobDeleted'))], errors: { ...JOB_ERRORS, 409: ['jobs.not_deletable'] } },
  'GET /compress/job/:id/compare': {
    id: 'compareJob',
    summary: 'Before/after previews',
    description: 'Preview images of the input and the output of a Succeeded job (a PDF page, or the first picture of a DOCX/PPTX), with their sizes.',
    ok: [
      200,
      'Compare response',
      {
        ...json(ref('Compare')),
        headers: {
          'X-Compare-Page': { description: 'PDF: the page shown (from 1)', schema: { type: 'integer', minimum: 1 } },
          'X-Compare-Page-Count': { description: 'PDF: how many pages the input has', schema: { type: 'integer', minimum: 1 } },
          'X-Compare-Picture': { description: 'DOCX/PPTX: the part name of the picture shown, URI-encoded', schema: { type: 'string' } },
        },
      },
    ],
    query: [
      { name: 'size', in: 'query', required: false, description: '"fit" (default): previews fit 1200 px; "full": the picture at its own pixels (up to 7000 px; a PDF page 3000 px long)', schema: { type: 'string', enum: ['fit', 'full'], default: 'fit' } },
      { name: 'page', in: 'query', required: false, description: 'PDF page to show, from 1', schema: { type: 'integer', minimum: 1, default: 1 } },
    ],
    errors: { ...JOB_ERRORS, 400: ['compare.invalid_query'], 409: ['compare.not_ready'], 410: ['compare.expired'], 422: ['compare.unavailable', 'compare.too_large'], 429: ['compare.busy'], 504: ['compare.timeout'] },
  },
};
for (const c of COMPRESSORS) {
  const name = c.path.split('/').pop()!;
  ROUTE_DOCS[`POST ${c.path}`] = {
    id: `submit${name[0]!.toUpperCase()}${name.slice(1)}Job`,
    summary: `Submit a job to ${c.jobType} (only its formats)`,
    description: `As POST /compress, limited to ${c.jobType}: a file of another format answers 400 compress.${name}.validation.unsupported_format.`,
    ok: [202, 'Job accepted', json(ref('JobAccepted'))],
    errors: SUBMIT_ERRORS,
    submit: { entry: c },
  };
}

const nullable = (type: string) => ({ type: [type, 'null'] });
const object = (properties: Record<string, unknown>, required = Object.keys(properties)) => ({ type: 'object', required, properties });
const STATUS = { type: 'string', enum: ['Queued', 'Running', 'Succeeded', 'Failed', 'Canceled'] };
const integers = (...names: string[]) => Object.fromEntries(names.map((n) => [n, { type: 'integer' }]));
const strings = (...names: string[]) => Object.fromEntries(names.map((n) => [n, { type: 'string' }]));

/** Success bodies, as src/server/views.ts and the discovery, entitlement, compare and ops routes write them. */
const responseSchemas = {
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

const errorSchema = {
  type: 'object',
  required: ['error', 'detail'],
  properties: { error: { type: 'string' }, detail: { type: ['string', 'null'] } },
  additionalProperties: true,
};

const optionsName = (entry?: CompressorEntry) => (entry ? `Options_${entry.jobType}` : 'Options');

/**
 * The submission body: a multipart upload (`file`) or URL input (`inputUrl` + `sourceFormat`, as
 * form fields or JSON). The two multipart forms are a oneOf, so a form with both fields, or with
 * neither, is invalid, as the server says (`url_fetch.mutually_exclusive`, `request.no_files`).
 */
function submitBody(entry?: CompressorEntry) {
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

const errorResponse = (codes: string[], headers?: Record<string, unknown>) => ({
  description: codes.join(', '),
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema: ref('Error') } },
});

const asResponse = (description: string, body: Body = {}) => ({
  description,
  ...(body.headers ? { headers: body.headers } : {}),
  ...(body.content ? { content: Object.fromEntries(Object.entries(body.content).map(([type, schema]) => [type, { schema }])) } : {}),
});

function securityOf(doc: RouteDoc) {
  if (doc.auth === false) return { security: [] };
  if (doc.auth === 'token') return { security: [{ downloadToken: [] }] };
  if (doc.auth === 'key-or-token') return { security: [{ apiKey: [] }, { downloadToken: [] }] };
  return {};
}

type Operation = Record<string, any>;

/** The tag of a route, by what a caller does with it (Spectral's operation-tags). */
function tagOf(method: string, path: string): string {
  if (path === '/' || path.startsWith('/ui/')) return 'Web UI';
  if (['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs'].includes(path)) return 'Operations';
  if (path.includes('/job/')) return 'Jobs';
  if (method === 'POST') return 'Submission';
  if (path.startsWith('/compress/entitlements')) return 'Account';
  return 'Discovery';
}
const TAGS = [
  { name: 'Submission', description: 'Submitting a file or a URL as a compression job' },
  { name: 'Jobs', description: 'Status, download, previews, cancel and delete of a job' },
  { name: 'Discovery', description: 'Compressors, their option schemas and cost estimates' },
  { name: 'Account', description: 'Credits and limits of the API key\'s account' },
  { name: 'Operations', description: 'Health, readiness, metrics and this document' },
  { name: 'Web UI', description: 'The web page served at /' },
];

const versionInPath = {
  name: 'version',
  in: 'path',
  required: true,
  description: 'Endpoint version as a path suffix (/v1); it wins over the query parameter and the header. 1 is the only version: another answers 400 request.unsupported_version.',
  schema: { type: 'integer', minimum: 0 },
};

function responsesOf(doc: RouteDoc, path: string): Record<string, unknown> {
  const [okStatus, okDescription, okBody] = doc.ok;
  const responses: Record<string, unknown> = { [okStatus]: asResponse(okDescription, okBody) };
  for (const [status, [description, body]] of Object.entries(doc.other ?? {})) responses[status] = asResponse(description, body);
  const keyed = doc.auth === undefined || doc.auth === 'key-or-token';
  const errors: Record<number, string[]> = { ...(doc.errors ?? {}), 400: [...(doc.errors?.[400] ?? []), 'request.unsupported_version'] };
  if (!RATE_LIMIT_EXEMPT.has(path)) errors[429] = [...(doc.errors?.[429] ?? []), 'rate_limited'];
  if (keyed) {
    errors[401] = ['api_key.invalid_or_ip_not_allowed', ...(doc.errors?.[401] ?? [])];
    errors[403] = [...(doc.errors?.[403] ?? []), 'request.cross_origin'];
  }
  for (const [status, codes] of Object.entries(errors)) {
    responses[status] = errorResponse(codes, status === '429' || (doc.submit && (status === '503' || status === '409')) ? retryAfter : doc.errorHeaders?.[Number(status)]);
  }
  if (doc.submit) responses[okStatus] = { ...(responses[okStatus] as object), headers: { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } } };
  responses[405] = { $ref: '#/components/responses/MethodNotAllowed' };
  return responses;
}

function operationOf(doc: RouteDoc, method: string, path: string): Operation {
  const params = [...path.matchAll(/:(\w+)/g)].map((m) => {
    const name = m[1]!;
    const schema = name !== 'format' || path.startsWith('/compress/compressors/') ? { type: 'string' } : formatSchema();
    return { name, in: 'path', required: true, schema };
  });
  return {
    operationId: doc.id,
    summary: doc.summary,
    description: doc.description,
    tags: [tagOf(method, path)],
    ...securityOf(doc),
    parameters: [
      ...params,
      ...(doc.query ?? []),
      ...(doc.submit ? [{ $ref: '#/components/parameters/IdempotencyKey' }] : []),
      ...(doc.headers ?? []).map((name) => ({ $ref: `#/components/parameters/${name}` })),
      { $ref: '#/components/parameters/Version' },
      { $ref: '#/components/parameters/VersionHeader' },
    ],
    ...(doc.submit ? { requestBody: submitBody(doc.submit.entry) } : {}),
    responses: responsesOf(doc, path),
  };
}

/** HEAD of a GET route (Hono answers it from the GET handler): the same answers, headers only. */
function headOf(get: Operation): Operation {
  const responses = Object.fromEntries(
    Object.entries<Operation>(get.responses).map(([status, r]) => [status, r.$ref ? r : Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'content'))]),
  );
  return { ...get, operationId: `${get.operationId}Head`, summary: `${get.summary} (headers only)`, description: `The answer GET would give, without its body. ${get.description}`, responses };
}

/** The same operation with the endpoint version as its path's last segment. */
function versionedOf(op: Operation): Operation {
  return { ...op, operationId: `${op.operationId}Versioned`, summary: `${op.summary} (version in the path)`, parameters: [versionInPath, ...op.parameters] };
}

/** OpenAPI 3.1 built from the router's routes and the compressor catalog. */
export function openApiDocument(routes: RouteInfo[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  const add = (path: string, method: string, op: Operation) => {
    const item = (paths[path] ??= {});
    item[method] = op;
    if (method === 'get') item.head = headOf(op);
  };
  for (const r of routes) {
    const method = r.method.toUpperCase();
    if (method === 'ALL' || r.path.includes('*')) continue;
    const doc = ROUTE_DOCS[`${method} ${r.path}`];
    if (!doc) continue;
    const path = r.path.replace(/:(\w+)/g, '{$1}');
    const op = operationOf(doc, method, r.path);
    add(path, method.toLowerCase(), op);
    if (takesVersionSuffix(r.path)) add(`${path}/v{version}`, method.toLowerCase(), versionedOf(op));
  }
  const { $schema: _dialect, ...options } = unionOptionsSchema();
  // Not an enum: an unknown version is a valid request the server answers with its own 400.
  const version = { type: 'integer', minimum: 0, description: `Supported: ${SUPPORTED_VERSIONS.join(', ')}; another answers 400 request.unsupported_version.` };
  return {
    openapi: '3.1.0',
    info: {
      title: 'compressd',
      // The release (the document changes with it); the API's own version is the endpoint version below.
      version: VERSION,
      description:
        'Self-hosted asynchronous file compression. Every endpoint is at version 1. A version is chosen by a `/v<N>` path suffix ' +
        'on the API paths (`/compress/v1`), the `version` query parameter or the `X-Service-Endpoint-Version` header, in that order of precedence. ' +
        'Every GET path also answers HEAD. OPTIONS is answered 405 with `Allow` on every path, with or without a key: there is no CORS preflight (browser calls are first-party only). ' +
        'JSON answers and the web page of 1 KB or more are compressed (br or gzip) when Accept-Encoding allows it (`Vary: Accept-Encoding`); ' +
        'downloads never are. /healthz and /readyz are not rate-limited.',
      license: { name: 'MIT', identifier: 'MIT' },
      // Self-hosted: whoever runs this server answers for it.
      contact: { name: 'The operator of this compressd server' },
    },
    tags: TAGS,
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    servers: [{ url: '/', description: 'The server that serves this document' }],
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-Service-Api-Key' },
        downloadToken: { type: 'apiKey', in: 'query', name: 'token', description: 'The encrypted token of a presigned download URL (from a webhook)' },
      },
      parameters: {
        Version: { name: 'version', in: 'query', required: false, description: 'Endpoint version', schema: version },
        VersionHeader: { name: 'X-Service-Endpoint-Version', in: 'header', required: false, description: 'Endpoint version (below the query parameter)', schema: version },
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description: 'The same key from the same account within 24 h returns the first job (one charge); with a different body: 422 request.idempotency_mismatch.',
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
        },
        Range: {
          name: 'Range',
          in: 'header',
          required: false,
          description: 'One byte range: bytes=a-b, bytes=a- or bytes=-n (the last n bytes) → 206. Several ranges are answered with the whole file (200).',
          schema: { type: 'string', examples: ['bytes=0-99'] },
        },
        IfRange: { name: 'If-Range', in: 'header', required: false, description: 'The ETag or Last-Modified of the partial copy; a mismatch answers the whole file (200).', schema: { type: 'string' } },
        IfNoneMatch: { name: 'If-None-Match', in: 'header', required: false, description: 'ETags the client holds; a match answers 304.', schema: { type: 'string' } },
        IfModifiedSince: { name: 'If-Modified-Since', in: 'header', required: false, description: 'Used without If-None-Match: 304 when the output is not newer.', schema: { type: 'string' } },
      },
      headers: {
        RetryAfter: { description: 'Seconds to wait before retrying', required: true, schema: { type: 'integer', minimum: 0 } },
        IdempotentReplayed: { description: '"true" when the answer is the first job of this Idempotency-Key, replayed', schema: { type: 'string', enum: ['true'] } },
        AcceptRanges: { description: 'Byte ranges are served', required: true, schema: { type: 'string', const: 'bytes' } },
        ETag: { description: "Strong: the SHA-256 of the output's bytes (absent on outputs stored before ETags were recorded)", schema: { type: 'string', pattern: '^"[0-9a-f]{64}"$' } },
        LastModified: { description: 'When the job completed (HTTP date)', required: true, schema: { type: 'string' } },
        ContentRange: { description: 'The bytes sent and the whole size: bytes a-b/size', required: true, schema: { type: 'string', pattern: '^bytes \\d+-\\d+/\\d+$' } },
        UnsatisfiedRange: { description: 'The whole size, which the range missed: bytes */size', required: true, schema: { type: 'string', pattern: '^bytes \\*/\\d+$' } },
      },
      responses: {
        MethodNotAllowed: {
          description: 'route.method_not_allowed: the path exists, not with this method',
          headers: { Allow: { description: 'The methods the path is served with', required: true, schema: { type: 'string' } } },
          content: { 'application/json': { schema: ref('Error') } },
        },
      },
      schemas: {
        Error: errorSchema,
        ...responseSchemas,
        Options: options,
        ...Object.fromEntries(COMPRESSORS.map((c) => [optionsName(c), (({ $schema: _d, ...rest }) => rest)(optionsSchemaOf(c))])),
      },
    },
    security: [{ apiKey: [] }],
    paths,
    webhooks: {
      jobEnded: {
        post: {
          operationId: 'jobEnded',
          summary: 'Sent to webhookUrl when a job succeeds or fails',
          description: 'X-Service-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>',
          security: [],
          requestBody: { required: true, content: { 'application/json': { schema: ref('WebhookEvent') } } },
          responses: {
            200: { description: 'Any 2xx: delivered.' },
            400: { description: 'Other 4xx (but 429): not retried.' },
            429: { description: '429 and 5xx: retried (1, 5, 30, 120 s).' },
          },
        },
      },
    },
  };
}
