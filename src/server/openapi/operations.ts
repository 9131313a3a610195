import { RATE_LIMIT_EXEMPT } from '../middleware/rate-limit.ts';
import { formatSchema, ref, retryAfter, type Body, type RouteDoc } from './route-docs.ts';
import { submitBody } from './schemas.ts';

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

export type Operation = Record<string, any>;

/** The tag of a route, by what a caller does with it (Spectral's operation-tags). */
function tagOf(method: string, path: string): string {
  if (path === '/' || path.startsWith('/ui/')) return 'Web UI';
  if (['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs'].includes(path)) return 'Operations';
  if (path.includes('/job/')) return 'Jobs';
  if (method === 'POST') return 'Submission';
  if (path.startsWith('/compress/entitlements')) return 'Account';
  return 'Discovery';
}
export const TAGS = [
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

export function operationOf(doc: RouteDoc, method: string, path: string): Operation {
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
export function headOf(get: Operation): Operation {
  const responses = Object.fromEntries(
    Object.entries<Operation>(get.responses).map(([status, r]) => [status, r.$ref ? r : Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'content'))]),
  );
  return { ...get, operationId: `${get.operationId}Head`, summary: `${get.summary} (headers only)`, description: `The answer GET would give, without its body. ${get.description}`, responses };
}

/** The same operation with the endpoint version as its path's last segment. */
export function versionedOf(op: Operation): Operation {
  return { ...op, operationId: `${op.operationId}Versioned`, summary: `${op.summary} (version in the path)`, parameters: [versionInPath, ...op.parameters] };
}
