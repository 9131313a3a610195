import { acceptedFormats, COMPRESSORS, optionsSchemaOf, unionOptionsSchema } from '../catalog/index.ts';

export interface RouteInfo {
  method: string;
  path: string;
}

interface RouteDoc {
  summary: string;
  auth?: boolean;
  /** Success status and description. */
  ok: [number, string];
  /** Error codes this route answers with (beyond authentication), by status. */
  errors?: Record<number, string[]>;
  request?: 'submit';
}

const SUBMIT_ERRORS = {
  400: [
    'request.invalid_content_type', 'request.no_files', 'request.empty_file', 'request.invalid_extension', 'request.multiple_files',
    'request.invalid_body', 'compress.unsupported_format', 'compress.{format}.validation.unsupported_format', 'compress.invalid_options',
    'compress.invalid_webhook', 'url_fetch.missing_source_format', 'url_fetch.invalid_url', 'url_fetch.invalid_scheme', 'url_fetch.private_ip',
    'url_fetch.mutually_exclusive', 'url_fetch.output_url_reserved', 'url_fetch.http_error', 'url_fetch.dns_failure', 'url_fetch.timeout',
    'url_fetch.too_large', 'url_fetch.redirect_loop', 'url_fetch.redirect_denied', 'url_fetch.domain_circuit_open', 'url_fetch.url_expired',
    'url_fetch.no_filename', 'url_fetch.invalid_content',
  ],
  402: ['entitlements.insufficient_credits'],
  403: ['url_fetch.guest_not_allowed'],
  413: ['request.file_too_large'],
  429: ['queue.limit_exceeded', 'url_fetch.rate_limited'],
  503: ['server.insufficient_storage', 'server.shutting_down'],
};

/**
 * What each route does, keyed by `METHOD path` as the router registers it. The document's
 * paths come from the live router, so a route without an entry here fails the OpenAPI test.
 */
export const ROUTE_DOCS: Record<string, RouteDoc> = {
  'GET /compress/schema': { summary: 'Union JSON Schema of every option', auth: false, ok: [200, 'JSON Schema (application/schema+json)'] },
  'GET /compress/schema/:format': { summary: "Options schema of the format's compressor", auth: false, ok: [200, 'JSON Schema'], errors: { 400: ['schema.unsupported_format'] } },
  'GET /healthz': { summary: 'Process alive', auth: false, ok: [200, 'ok'] },
  'GET /readyz': { summary: 'Ready: data dir writable, pool up, disk space above the threshold', auth: false, ok: [200, 'ready'], errors: { 503: ['not_ready'] } },
  'GET /metrics': { summary: 'Prometheus metrics (bearer token when configured)', auth: false, ok: [200, 'text exposition format'], errors: { 401: ['metrics.unauthorized'] } },
  'GET /openapi.json': { summary: 'This document', auth: false, ok: [200, 'OpenAPI 3.1'] },
  'GET /docs': { summary: 'Human-readable API reference', auth: false, ok: [200, 'HTML'] },
  'GET /': { summary: 'Web UI', auth: false, ok: [200, 'HTML'] },
  'GET /ui/app.js': { summary: 'Web UI script', auth: false, ok: [200, 'JavaScript'] },
  'GET /ui/app.css': { summary: 'Web UI style sheet', auth: false, ok: [200, 'CSS'] },
  'GET /api/compress/job/:id/download': {
    summary: 'Presigned download (token query parameter, no key)',
    auth: false,
    ok: [200, 'the output file'],
    errors: { 401: ['download.invalid_token'], 409: ['jobs.not_ready'], 410: ['jobs.expired'] },
  },
  'GET /compress': { summary: 'Legacy compressor listing', ok: [200, 'jobId, category, pool, dotted formats'] },
  'GET /compress/compressors': { summary: 'All compressors, the format graph and limits', ok: [200, 'GetCompressorsResponse'] },
  'GET /compress/compressors/:filter': { summary: 'Compressors by format (input or output) or category', ok: [200, 'GetCompressorsResponse'] },
  'GET /compress/compressors/from/:format': { summary: 'Compressors accepting the format', ok: [200, 'GetCompressorsResponse'] },
  'GET /compress/compressors/to/:format': { summary: 'Compressors producing the format', ok: [200, 'GetCompressorsResponse'] },
  'GET /compress/estimate/:format': { summary: 'Cost estimate', ok: [200, 'CompressCostEstimateResponse'], errors: { 400: ['estimate.unsupported_format', 'estimate.invalid_size'] } },
  'GET /compress/entitlements/me': { summary: 'Credit balance and plan limits', ok: [200, 'balance, credits, limits'] },
  'POST /compress': { summary: 'Submit a job (upload or URL)', ok: [202, 'Job accepted'], errors: SUBMIT_ERRORS, request: 'submit' },
  'GET /compress/job/:id': { summary: 'Job status', ok: [200, 'Job status response'], errors: { 403: ['jobs.forbidden'], 404: ['jobs.not_found'] } },
  'GET /compress/job/:id/download': {
    summary: 'Download the output (API key, or a presigned token)',
    ok: [200, 'the output file'],
    errors: { 401: ['download.invalid_token'], 403: ['jobs.forbidden'], 404: ['jobs.not_found'], 409: ['jobs.not_ready'], 410: ['jobs.expired'] },
  },
  'POST /compress/job/:id/cancel': { summary: 'Cancel a queued or running job', ok: [200, 'Job status response'], errors: { 403: ['jobs.forbidden'], 404: ['jobs.not_found'], 409: ['jobs.not_cancellable'] } },
  'DELETE /compress/job/:id': { summary: 'Delete a finished job and its files', ok: [200, '{id, deleted}'], errors: { 403: ['jobs.forbidden'], 404: ['jobs.not_found'], 409: ['jobs.not_deletable'] } },
  'GET /compress/job/:id/compare': {
    summary: 'Before/after previews',
    ok: [200, 'Compare response'],
    errors: { 403: ['jobs.forbidden'], 404: ['jobs.not_found'], 409: ['compare.not_ready'], 410: ['compare.expired'], 504: ['compare.timeout'] },
  },
};
for (const c of COMPRESSORS) ROUTE_DOCS[`POST ${c.path}`] = { summary: `Submit a ${c.jobType} job (only its formats)`, ok: [202, 'Job accepted'], errors: SUBMIT_ERRORS, request: 'submit' };

const errorSchema = {
  type: 'object',
  required: ['error', 'detail'],
  properties: { error: { type: 'string' }, detail: { type: ['string', 'null'] } },
  additionalProperties: true,
};

function submitBody() {
  const webhook = {
    webhookUrl: { type: 'string', format: 'uri', maxLength: 2048 },
    webhookSecret: { type: 'string', minLength: 16, maxLength: 256 },
    webhookEvents: { type: 'string', description: 'succeeded, failed or succeeded,failed (default)' },
  };
  return {
    required: true,
    content: {
      'multipart/form-data': {
        schema: {
          type: 'object',
          properties: {
            file: { type: 'string', format: 'binary' },
            inputUrl: { type: 'string', format: 'uri' },
            sourceFormat: { type: 'string', enum: acceptedFormats() },
            options: { type: 'string', description: 'JSON string of the options object' },
            ...webhook,
          },
        },
      },
      'application/json': {
        schema: {
          type: 'object',
          required: ['inputUrl', 'sourceFormat'],
          properties: { inputUrl: { type: 'string', format: 'uri' }, sourceFormat: { type: 'string', enum: acceptedFormats() }, options: { $ref: '#/components/schemas/Options' }, ...webhook },
        },
      },
    },
  };
}

/** OpenAPI 3.1 built from the router's routes and the compressor catalog. */
export function openApiDocument(routes: RouteInfo[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const method = r.method.toUpperCase();
    if (method === 'ALL' || r.path.includes('*')) continue;
    const doc = ROUTE_DOCS[`${method} ${r.path}`];
    if (!doc) continue;
    const path = r.path.replace(/:(\w+)/g, '{$1}');
    const params = [...r.path.matchAll(/:(\w+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    const responses: Record<string, unknown> = { [doc.ok[0]]: { description: doc.ok[1] } };
    const errors = { ...(doc.errors ?? {}), ...(doc.auth === false ? {} : { 401: ['api_key.invalid_or_ip_not_allowed'] }), 400: [...(doc.errors?.[400] ?? []), 'request.unsupported_version'], 429: [...(doc.errors?.[429] ?? []), 'rate_limited'] };
    for (const [status, codes] of Object.entries(errors)) {
      responses[status] = { description: codes.join(', '), content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    }
    (paths[path] ??= {})[method.toLowerCase()] = {
      summary: doc.summary,
      ...(doc.auth === false ? { security: [] } : {}),
      parameters: [...params, { name: 'version', in: 'query', required: false, schema: { type: 'integer', enum: [1] } }],
      ...(doc.request === 'submit' ? { requestBody: submitBody() } : {}),
      responses,
    };
  }
  const { $schema: _dialect, ...options } = unionOptionsSchema();
  return {
    openapi: '3.1.0',
    info: { title: 'compressd', version: '1', description: 'Self-hosted asynchronous file compression. Every endpoint is at version 1.' },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    components: {
      securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-Service-Api-Key' } },
      schemas: {
        Error: errorSchema,
        Options: options,
        ...Object.fromEntries(COMPRESSORS.map((c) => [`Options_${c.jobType}`, (({ $schema: _d, ...rest }) => rest)(optionsSchemaOf(c))])),
      },
    },
    security: [{ apiKey: [] }],
    paths,
  };
}
