import { acceptedFormats, COMPRESSORS, contentTypeOf, outputFormatsOf, type CompressorEntry } from '../../catalog/index.ts';

export type Schema = Record<string, unknown>;

export interface Body {
  /** Media type → schema; a bare schema means `application/json`. */
  content?: Record<string, Schema>;
  headers?: Record<string, unknown>;
}

export interface RouteDoc {
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

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Schema): Body => ({ content: { 'application/json': schema } });
const text = (mediaType: string): Body => ({ content: { [mediaType]: { type: 'string' } } });
export const header = (name: string) => ({ $ref: `#/components/headers/${name}` });
export const retryAfter = { 'Retry-After': header('RetryAfter') };

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
export const formatSchema = (formats = acceptedFormats()) => ({
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
