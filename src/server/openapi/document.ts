import { COMPRESSORS, optionsSchemaOf, unionOptionsSchema } from '../../catalog/index.ts';
import { SUPPORTED_VERSIONS, takesVersionSuffix } from '../middleware/versioning.ts';
import { VERSION } from '../../version.ts';
import { headOf, operationOf, TAGS, versionedOf, type Operation } from './operations.ts';
import { ref, ROUTE_DOCS } from './route-docs.ts';
import { errorSchema, optionsName, responseSchemas } from './schemas.ts';

export interface RouteInfo {
  method: string;
  path: string;
}
/** One operation per documented route, its HEAD beside each GET, and the `/v{version}` twin where a route takes one. */
function pathsOf(routes: RouteInfo[]): Record<string, Record<string, unknown>> {
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
  return paths;
}

const INFO = {
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
};

/** The endpoint version's schema; not an enum: an unknown version is a valid request the server answers with its own 400. */
const versionSchema = () => ({ type: 'integer', minimum: 0, description: `Supported: ${SUPPORTED_VERSIONS.join(', ')}; another answers 400 request.unsupported_version.` });

/** The request parameters operations refer to (`#/components/parameters/…`). */
function parameters() {
  const version = versionSchema();
  return {
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
  };
}

const HEADERS = {
  RetryAfter: { description: 'Seconds to wait before retrying', required: true, schema: { type: 'integer', minimum: 0 } },
  IdempotentReplayed: { description: '"true" when the answer is the first job of this Idempotency-Key, replayed', schema: { type: 'string', enum: ['true'] } },
  AcceptRanges: { description: 'Byte ranges are served', required: true, schema: { type: 'string', const: 'bytes' } },
  ETag: { description: "Strong: the SHA-256 of the output's bytes (absent on outputs stored before ETags were recorded)", schema: { type: 'string', pattern: '^"[0-9a-f]{64}"$' } },
  LastModified: { description: 'When the job completed (HTTP date)', required: true, schema: { type: 'string' } },
  ContentRange: { description: 'The bytes sent and the whole size: bytes a-b/size', required: true, schema: { type: 'string', pattern: '^bytes \\d+-\\d+/\\d+$' } },
  UnsatisfiedRange: { description: 'The whole size, which the range missed: bytes */size', required: true, schema: { type: 'string', pattern: '^bytes \\*/\\d+$' } },
};

/** The error envelope, the answers' bodies, and the option schemas: the union, and each compressor's own. */
function schemas() {
  const { $schema: _dialect, ...options } = unionOptionsSchema();
  return {
    Error: errorSchema,
    ...responseSchemas,
    Options: options,
    ...Object.fromEntries(COMPRESSORS.map((c) => [optionsName(c), (({ $schema: _d, ...rest }) => rest)(optionsSchemaOf(c))])),
  };
}

const WEBHOOKS = {
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
};

/** OpenAPI 3.1 built from the router's routes and the compressor catalog. */
export function openApiDocument(routes: RouteInfo[]) {
  return {
    openapi: '3.1.0',
    info: INFO,
    tags: TAGS,
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    servers: [{ url: '/', description: 'The server that serves this document' }],
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-Service-Api-Key' },
        downloadToken: { type: 'apiKey', in: 'query', name: 'token', description: 'The encrypted token of a presigned download URL (from a webhook)' },
      },
      parameters: parameters(),
      headers: HEADERS,
      responses: {
        MethodNotAllowed: {
          description: 'route.method_not_allowed: the path exists, not with this method',
          headers: { Allow: { description: 'The methods the path is served with', required: true, schema: { type: 'string' } } },
          content: { 'application/json': { schema: ref('Error') } },
        },
      },
      schemas: schemas(),
    },
    security: [{ apiKey: [] }],
    paths: pathsOf(routes),
    webhooks: WEBHOOKS,
  };
}
