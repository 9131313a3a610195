// The OpenAPI document as a contract, as a validating proxy would hold it: every request a test
// server receives and every response it sends are checked against the document it serves. A
// response: status declared for the operation, content type declared, JSON body and required
// headers matching. A request: an operation for its method and path, the credentials, path, query
// and header parameters and the body (JSON, or multipart fields with a JSON string's contentSchema)
// as declared. A request off the document may only be refused (4xx): a 2xx or 3xx means the server
// does something the document does not say. Test-side only: the product never validates itself.
import { appendFileSync, readFileSync } from 'node:fs';
import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import busboy from 'busboy';

type Json = Record<string, any>;

export interface Exchange {
  method: string;
  /** The request target as received (path and query). */
  url: string;
  status: number;
  /** Response headers, names in lower case. */
  headers: Record<string, string>;
  bodyBytes: number;
  /** The body when it is JSON (captured), else null. */
  body: Buffer | null;
  /** What the request carried; absent: the request is not checked. */
  request?: RequestSeen;
}

export interface RequestSeen {
  /** Request headers, names in lower case. */
  headers: Record<string, string>;
  /**
   * The body as the document's schemas see it: a JSON value, or a multipart form as an object of
   * its fields (a file part as ''). `unreadable`: it does not parse; null: no body, or one the
   * server did not read whole (not checked).
   */
  body: { value: unknown } | 'unreadable' | null;
}

export interface Verdict {
  /** `METHOD /template` of the operation, or null when no operation of the document matches. */
  operation: string | null;
  problems: string[];
  /** Where the request is off the document (a problem only when the server did not refuse it). */
  request: string[];
}

const BODY_CAP = 64 * 1024 * 1024;
const isJson = (mediaType: string) => mediaType === 'application/json' || mediaType.endsWith('+json');
const mediaTypeOf = (contentType: string | undefined) => (contentType ?? '').split(';')[0]!.trim().toLowerCase();

/** The body as sent, without its content coding: what the JSON schema describes. */
function decoded(body: Buffer, coding: string | undefined): Buffer {
  if (coding === 'gzip') return gunzipSync(body);
  if (coding === 'br') return brotliDecompressSync(body);
  return body;
}

/** Rewrites the document's local `#/…` references so its schemas compile on their own against `doc`. */
function anchorRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(anchorRefs);
  if (!node || typeof node !== 'object') return node;
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `doc${v}` : anchorRefs(v)]));
}

/**
 * The request target as the adapter builds its URL (`//x` stays a path; the absolute form
 * `http://host/path`, which HTTP servers must accept, is its path), or null when it is no URL.
 */
function urlOf(target: string): URL | null {
  try {
    if (target.startsWith('/')) return new URL(`http://host${target}`);
    return /^https?:\/\//i.test(target) ? new URL(target) : null;
  } catch {
    return null;
  }
}

interface Operation {
  key: string;
  op: Json;
}

interface PathEntry {
  template: string;
  pattern: RegExp;
  literalSegments: number;
  operations: Map<string, Operation>;
}

const METHODS = new Set(['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'TRACE']);
/** A path template as a pattern whose named groups are its parameters (`{id}`, or `v{version}` within a segment). */
const templatePattern = (template: string) =>
  new RegExp(`^${template.split(/(\{\w+\})/).map((part) => (/^\{\w+\}$/.test(part) ? `(?<${part.slice(1, -1)}>[^/]+)` : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('')}$`);
/** A parameter's text as the type its schema declares, so that `?fileSizeBytes=5` is the integer 5. */
const typed = (value: string, schema: Json) => (['integer', 'number'].includes(schema.type) && /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value);

/** Checks exchanges against one OpenAPI 3.1 document (JSON Schema 2020-12, compiled with ajv). */
export class ContractChecker {
  readonly operationKeys: string[];
  private readonly paths: PathEntry[];
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly document: Json) {
    this.ajv.addSchema(anchorRefs(document) as Json, 'doc');
    this.paths = Object.entries<Json>(document.paths)
      .map(([template, item]) => {
        const operations = new Map<string, Operation>();
        for (const [method, op] of Object.entries<Json>(item)) if (METHODS.has(method.toUpperCase())) operations.set(method.toUpperCase(), { key: `${method.toUpperCase()} ${template}`, op });
        return { template, pattern: templatePattern(template), literalSegments: template.split('/').filter((s) => !s.includes('{')).length, operations };
      })
      // A literal segment wins over a template, as in the router.
      .sort((a, b) => b.literalSegments - a.literalSegments);
    this.operationKeys = this.paths.flatMap((p) => [...p.operations.values()].map((o) => o.key)).sort();
  }

  private resolve(node: Json): Json {
    if (typeof node.$ref !== 'string') return node;
    return node.$ref
      .slice(2)
      .split('/')
      .reduce((at: Json, part: string) => at[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
  }

  private validator(id: string, schema: Json): ValidateFunction {
    let v = this.compiled.get(id);
    if (!v) this.compiled.set(id, (v = this.ajv.compile(anchorRefs(schema) as Json)));
    return v;
  }

  check(x: Exchange): Verdict {
    const url = urlOf(x.url);
    const entry = url === null ? undefined : this.paths.find((p) => p.pattern.test(url.pathname));
    const op = entry?.operations.get(x.method);
    if (!url || !entry || !op) return { operation: null, problems: this.checkUnrouted(x, entry), request: [`no operation ${x.method} ${url?.pathname ?? x.url}`] };
    const request = x.request ? this.checkRequest(op.op, url, entry.pattern.exec(url.pathname)!.groups ?? {}, x.request) : [];
    const problems = this.checkResponse(op, x);
    if (request.length > 0 && x.status < 400) problems.push(`the document refuses this request (${request.join('; ')}) but the server answered ${x.status}`);
    return { operation: op.key, problems, request };
  }

  private checkResponse({ key: operation, op }: Operation, x: Exchange): string[] {
    const problems: string[] = [];
    const declared = op.responses[x.status] ?? op.responses[`${String(x.status)[0]}XX`] ?? op.responses.default;
    if (!declared) return [`status ${x.status} is not declared (declared: ${Object.keys(op.responses).join(', ')})`];
    const response = this.resolve(declared);
    for (const [name, h] of Object.entries<Json>(response.headers ?? {})) {
      const header = this.resolve(h);
      const value = x.headers[name.toLowerCase()];
      if (value === undefined) {
        if (header.required) problems.push(`required header ${name} is missing`);
        continue;
      }
      if (header.schema) {
        const typed = header.schema.type === 'integer' && /^\d+$/.test(value) ? Number(value) : value;
        const v = this.validator(`${operation} ${x.status} header ${name}`, header.schema);
        if (!v(typed)) problems.push(`header ${name}: ${JSON.stringify(value)} ${this.ajv.errorsText(v.errors)}`);
      }
    }
    const mediaType = mediaTypeOf(x.headers['content-type']);
    const content: Json | undefined = response.content;
    if (!content) {
      if (x.bodyBytes > 0 && x.method !== 'HEAD') problems.push(`a body (${mediaType || 'no content type'}) where the document declares none`);
      return problems;
    }
    if (x.status === 304 || x.method === 'HEAD') return problems;
    const key = Object.keys(content).find((k) => {
      const m = k.toLowerCase();
      return m === mediaType || m === '*/*' || (m.endsWith('/*') && mediaType.startsWith(m.slice(0, -1)));
    });
    if (!key) return [...problems, `content type ${JSON.stringify(x.headers['content-type'] ?? null)} is not declared (declared: ${Object.keys(content).join(', ')})`];
    const schema = content[key].schema;
    if (schema && isJson(mediaType)) {
      let body: unknown;
      try {
        body = JSON.parse(decoded(x.body ?? Buffer.alloc(0), x.headers['content-encoding']).toString('utf8'));
      } catch {
        return [...problems, `the ${mediaType} body is not JSON`];
      }
      const v = this.validator(`${operation} ${x.status} ${key}`, schema);
      if (!v(body)) problems.push(`body: ${this.ajv.errorsText(v.errors, { dataVar: 'body' })}`);
    }
    return problems;
  }

  /** Where a request is off its operation: credentials, parameters, body. */
  private checkRequest(op: Json, url: URL, pathParams: Record<string, string>, seen: RequestSeen): string[] {
    const problems: string[] = [];
    const security: Json[] = op.security ?? this.document.security ?? [];
    const has = (scheme: string) => {
      const s = this.document.components.securitySchemes[scheme];
      return s.in === 'header' ? seen.headers[s.name.toLowerCase()] !== undefined : url.searchParams.has(s.name);
    };
    if (security.length > 0 && !security.some((req) => Object.keys(req).every(has))) problems.push(`no credentials (${security.map((r) => Object.keys(r).join('+') || 'none').join(' or ')})`);
    for (const p of (op.parameters ?? []).map((q: Json) => this.resolve(q))) {
      const raw = p.in === 'path' ? decodeURIComponentSafe(pathParams[p.name]) : p.in === 'query' ? url.searchParams.get(p.name) : seen.headers[p.name.toLowerCase()];
      if (raw === undefined || raw === null) {
        if (p.required) problems.push(`${p.in} parameter ${p.name} is missing`);
        continue;
      }
      const v = this.validator(`${op.operationId} ${p.in} ${p.name}`, p.schema);
      if (!v(typed(raw, p.schema))) problems.push(`${p.in} parameter ${p.name} ${JSON.stringify(raw).slice(0, 80)} ${this.ajv.errorsText(v.errors, { dataVar: p.name })}`);
    }
    if (op.requestBody) problems.push(...this.checkBody(op, this.resolve(op.requestBody), seen));
    return problems;
  }

  private checkBody(op: Json, body: Json, seen: RequestSeen): string[] {
    const mediaType = mediaTypeOf(seen.headers['content-type']);
    const declared: Json | undefined = body.content[mediaType];
    if (!declared) return seen.headers['content-type'] || body.required ? [`request content type ${JSON.stringify(seen.headers['content-type'] ?? null)} is not declared (declared: ${Object.keys(body.content).join(', ')})`] : [];
    if (seen.body === 'unreadable') return [`the ${mediaType} body does not parse`];
    if (seen.body === null) return [];
    const v = this.validator(`${op.operationId} request ${mediaType}`, declared.schema);
    if (!v(seen.body.value)) return [`request body: ${this.ajv.errorsText(v.errors, { dataVar: 'body' })}`];
    return mediaType === 'multipart/form-data' ? this.checkJsonFields(op, declared.schema, seen.body.value as Json) : [];
  }

  /** Multipart fields that carry JSON (`contentMediaType` with a `contentSchema`, an annotation ajv does not check). */
  private checkJsonFields(op: Json, schema: Json, fields: Json): string[] {
    const problems: string[] = [];
    const properties: Json = Object.assign({}, ...[schema, ...(schema.oneOf ?? [])].map((s: Json) => s.properties ?? {}));
    for (const [name, property] of Object.entries<Json>(properties)) {
      if (property.contentMediaType !== 'application/json' || !property.contentSchema || typeof fields[name] !== 'string') continue;
      let value: unknown;
      try {
        value = JSON.parse(fields[name]);
      } catch {
        problems.push(`request field ${name} is not JSON`);
        continue;
      }
      const v = this.validator(`${op.operationId} request field ${name}`, property.contentSchema);
      if (!v(value)) problems.push(`request field ${name}: ${this.ajv.errorsText(v.errors, { dataVar: name })}`);
    }
    return problems;
  }

  /**
   * No operation matches: an unknown path or a known path with another method, which the server
   * may only refuse (404, or 405 with the path's methods in Allow).
   */
  private checkUnrouted(x: Exchange, entry: PathEntry | undefined): string[] {
    if (x.status < 400) return [`${x.method} ${x.url.slice(0, 200)} answered ${x.status}, but the document has no such operation`];
    if (x.status !== 405 || !entry) return [];
    const response = this.resolve({ $ref: '#/components/responses/MethodNotAllowed' });
    const allow = (x.headers.allow ?? '').split(',').map((m) => m.trim().toUpperCase());
    const missing = [...entry.operations.keys()].filter((m) => !allow.includes(m));
    const problems = missing.length ? [`Allow ${JSON.stringify(x.headers.allow ?? null)} lacks ${missing.join(', ')} of ${entry.template}`] : [];
    if (!response) problems.push('the document has no MethodNotAllowed response');
    return problems;
  }
}

function decodeURIComponentSafe(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** What this test process saw, for the file's summary line and the failing test's message. */
export const contractStats = { checked: 0, unrouted: 0, refused: 0, covered: new Set<string>(), operations: new Set<string>(), mismatches: [] as string[], reported: 0 };

/** Mismatches since the last call, each as one line (method, path, status, what differed). */
export function takeMismatches(): string[] {
  const fresh = contractStats.mismatches.slice(contractStats.reported);
  contractStats.reported = contractStats.mismatches.length;
  return fresh;
}

function headersOf(res: ServerResponse, written: OutgoingHttpHeaders): Record<string, string> {
  const all: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...res.getHeaders(), ...written })) if (v !== undefined) all[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : String(v);
  return all;
}

const REQUEST_JSON_CAP = 1024 * 1024;

/** A multipart body's fields as they stream past (the upload as ''), parsed as the server's busboy does. */
function formFields(req: IncomingMessage): { feed(chunk: Buffer): void; end(): Promise<RequestSeen['body']> } {
  const fields: Record<string, string> = {};
  let failed = false;
  let bb: busboy.Busboy | undefined;
  try {
    bb = busboy({ headers: req.headers });
  } catch {
    failed = true;
  }
  const done = new Promise<void>((resolve) => {
    bb?.on('field', (name, value) => (fields[name] = value));
    const fail = () => ((failed = true), resolve());
    // A file part cut short errs on its own stream too (busboy's "Unexpected end of form").
    // The server reads a text field sent as a file part (curl -F options=@o.json) as its text.
    bb?.on('file', (name, file) => {
      const chunks: Buffer[] = [];
      fields[name] = '';
      file.on('error', fail);
      if (name === 'file') file.resume();
      else file.on('data', (c: Buffer) => chunks.push(c)).on('end', () => (fields[name] = Buffer.concat(chunks).toString('utf8')));
    });
    bb?.on('error', fail);
    bb?.on('close', resolve);
    if (!bb) resolve();
  });
  return {
    feed: (chunk) => {
      // Never let the watcher's parser throw into the server's own read of the body.
      try {
        if (!failed) bb?.write(chunk);
      } catch {
        failed = true;
      }
    },
    end: async () => {
      if (!failed) bb?.end();
      await done;
      return failed ? 'unreadable' : { value: fields };
    },
  };
}

/**
 * Sees the request body as the server reads it (every read, piped or not, emits 'data'), without
 * reading it itself: resolves once the response is sent, with null when the server did not read
 * the whole body (a refusal before it, which the request check does not need).
 */
function watchRequest(req: IncomingMessage): () => Promise<RequestSeen> {
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)]));
  const mediaType = mediaTypeOf(headers['content-type']);
  const form = mediaType === 'multipart/form-data' ? formFields(req) : undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  let ended = false;
  const emit = req.emit;
  req.emit = function (this: IncomingMessage, event: string | symbol, ...args: any[]) {
    if (event === 'data') {
      const chunk = typeof args[0] === 'string' ? Buffer.from(args[0]) : (args[0] as Buffer);
      size += chunk.length;
      if (form) form.feed(chunk);
      else if (size <= REQUEST_JSON_CAP) chunks.push(chunk);
    } else if (event === 'end') ended = true;
    return emit.call(this, event, ...args);
  } as typeof req.emit;
  return async () => {
    if (!ended || size === 0) return { headers, body: null };
    if (form) return { headers, body: await form.end() };
    if (!isJson(mediaType) || size > REQUEST_JSON_CAP) return { headers, body: null };
    try {
      return { headers, body: { value: JSON.parse(Buffer.concat(chunks).toString('utf8')) } };
    } catch {
      return { headers, body: 'unreadable' };
    }
  };
}

/**
 * Watches every response `server` sends and checks it against `document` once it has been sent.
 * The body is kept only when it is JSON; file downloads stream past untouched.
 */
export function watchContract(server: Server, document: Json): void {
  const checker = new ContractChecker(document);
  for (const key of checker.operationKeys) contractStats.operations.add(key);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const requestSeen = watchRequest(req);
    let written: OutgoingHttpHeaders = {};
    let capture: boolean | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const keep = (chunk: unknown, encoding?: unknown) => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
      capture ??= isJson(mediaTypeOf(headersOf(res, written)['content-type']));
      const buf = typeof chunk === 'string' ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8') : Buffer.from(chunk as Uint8Array);
      size += buf.length;
      if (capture && size <= BODY_CAP) chunks.push(buf);
    };
    const { writeHead, write, end } = res;
    res.writeHead = function (this: ServerResponse, status: number, ...rest: any[]) {
      const headers = rest.find((a) => a && typeof a === 'object');
      if (Array.isArray(headers)) for (let i = 0; i + 1 < headers.length; i += 2) written[String(headers[i]).toLowerCase()] = headers[i + 1];
      else if (headers) written = { ...written, ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v as string])) };
      return writeHead.call(this, status, ...rest);
    } as typeof res.writeHead;
    res.write = function (this: ServerResponse, chunk: unknown, ...rest: any[]) {
      keep(chunk, rest[0]);
      return (write as any).call(this, chunk, ...rest);
    } as typeof res.write;
    res.end = function (this: ServerResponse, chunk?: unknown, ...rest: any[]) {
      keep(chunk, rest[0]);
      return (end as any).call(this, chunk, ...rest);
    } as typeof res.end;
    res.once('finish', async () => {
      const exchange: Exchange = { method: req.method ?? 'GET', url: req.url ?? '/', status: res.statusCode, headers: headersOf(res, written), bodyBytes: size, body: capture && size <= BODY_CAP ? Buffer.concat(chunks) : null };
      exchange.request = await requestSeen();
      const verdict = checker.check(exchange);
      contractStats.checked++;
      if (verdict.operation) contractStats.covered.add(verdict.operation);
      else contractStats.unrouted++;
      if (verdict.request.length > 0) contractStats.refused++;
      for (const p of verdict.problems) contractStats.mismatches.push(`${exchange.method} ${exchange.url.slice(0, 200)} → ${exchange.status} (${verdict.operation ?? 'no operation'}): ${p}`);
    });
  });
}

/**
 * One line for this test file, and the totals of the whole run so far: every file of one
 * `node --test` run is a child of the same runner, so the runner's pid names the run's tally.
 */
export function contractSummary(file: string): string {
  const { checked, unrouted, refused, covered, operations, mismatches } = contractStats;
  const tally = join(tmpdir(), `compressd-openapi-contract-${process.ppid}.jsonl`);
  appendFileSync(tally, `${JSON.stringify({ file, checked, unrouted, covered: [...covered], operations: [...operations], mismatches: mismatches.length })}\n`);
  const runs = readFileSync(tally, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { checked: number; covered: string[]; operations: string[]; mismatches: number });
  const all = new Set(runs.flatMap((r) => r.operations));
  const hit = new Set(runs.flatMap((r) => r.covered).filter((k) => all.has(k)));
  const sum = (f: (r: (typeof runs)[number]) => number) => runs.reduce((n, r) => n + f(r), 0);
  return (
    `openapi contract, ${file}: ${checked} requests and responses checked (${refused} requests off the document, ${unrouted} outside any operation), ${covered.size} of ${operations.size} operations covered, ${mismatches.length} mismatches; ` +
    `run so far (${runs.length} files): ${sum((r) => r.checked)} exchanges checked, ${hit.size} of ${all.size} operations covered, ${sum((r) => r.mismatches)} mismatches`
  );
}
