// The OpenAPI document as a contract: every response a test server sends is checked against the
// document it serves (status declared for the operation, content type declared, JSON body and
// required headers matching). Test-side only: the product never validates its own answers.
import { appendFileSync, readFileSync } from 'node:fs';
import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { pathWithoutVersion } from '../../src/server/middleware/versioning.ts';

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
}

export interface Verdict {
  /** `METHOD /template` of the operation, or null when no operation of the document matches. */
  operation: string | null;
  problems: string[];
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

/** The path the router sees: the request target after the origin, as the adapter builds its URL (`//x` stays a path). */
function pathOf(target: string): string | null {
  if (!target.startsWith('/')) return null;
  try {
    return pathWithoutVersion(new URL(`http://host${target}`).pathname);
  } catch {
    return null;
  }
}

interface Operation {
  key: string;
  responses: Json;
}

interface PathEntry {
  template: string;
  pattern: RegExp;
  literalSegments: number;
  operations: Map<string, Operation>;
}

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
        const segments = template.split('/');
        const pattern = new RegExp(`^${segments.map((s) => (/^\{\w+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}$`);
        const operations = new Map<string, Operation>();
        for (const [method, op] of Object.entries<Json>(item)) operations.set(method.toUpperCase(), { key: `${method.toUpperCase()} ${template}`, responses: op.responses });
        return { template, pattern, literalSegments: segments.filter((s) => !s.startsWith('{')).length, operations };
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
    const method = x.method === 'HEAD' ? 'GET' : x.method;
    const path = pathOf(x.url);
    const entry = path === null ? undefined : this.paths.find((p) => p.pattern.test(path));
    const op = entry?.operations.get(method);
    if (!entry || !op) return { operation: null, problems: this.checkUnrouted(x, entry) };
    const problems: string[] = [];
    const declared = op.responses[x.status] ?? op.responses[`${String(x.status)[0]}XX`] ?? op.responses.default;
    if (!declared) return { operation: op.key, problems: [`status ${x.status} is not declared (declared: ${Object.keys(op.responses).join(', ')})`] };
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
        const v = this.validator(`${op.key} ${x.status} header ${name}`, header.schema);
        if (!v(typed)) problems.push(`header ${name}: ${JSON.stringify(value)} ${this.ajv.errorsText(v.errors)}`);
      }
    }
    const mediaType = mediaTypeOf(x.headers['content-type']);
    const content: Json | undefined = response.content;
    if (!content) {
      if (x.bodyBytes > 0 && x.method !== 'HEAD') problems.push(`a body (${mediaType || 'no content type'}) where the document declares none`);
      return { operation: op.key, problems };
    }
    if (x.status === 304 || x.method === 'HEAD') return { operation: op.key, problems };
    const key = Object.keys(content).find((k) => {
      const m = k.toLowerCase();
      return m === mediaType || m === '*/*' || (m.endsWith('/*') && mediaType.startsWith(m.slice(0, -1)));
    });
    if (!key) return { operation: op.key, problems: [...problems, `content type ${JSON.stringify(x.headers['content-type'] ?? null)} is not declared (declared: ${Object.keys(content).join(', ')})`] };
    const schema = content[key].schema;
    if (schema && isJson(mediaType)) {
      let body: unknown;
      try {
        body = JSON.parse(decoded(x.body ?? Buffer.alloc(0), x.headers['content-encoding']).toString('utf8'));
      } catch {
        return { operation: op.key, problems: [...problems, `the ${mediaType} body is not JSON`] };
      }
      const v = this.validator(`${op.key} ${x.status} ${key}`, schema);
      if (!v(body)) problems.push(`body: ${this.ajv.errorsText(v.errors, { dataVar: 'body' })}`);
    }
    return { operation: op.key, problems };
  }

  /** No operation matches: an unknown path (404) or a known path with another method (405 with Allow). */
  private checkUnrouted(x: Exchange, entry: PathEntry | undefined): string[] {
    if (x.status !== 405 || !entry) return [];
    const response = this.resolve({ $ref: '#/components/responses/MethodNotAllowed' });
    const allow = (x.headers.allow ?? '').split(',').map((m) => m.trim().toUpperCase());
    const missing = [...entry.operations.keys()].filter((m) => !allow.includes(m));
    const problems = missing.length ? [`Allow ${JSON.stringify(x.headers.allow ?? null)} lacks ${missing.join(', ')} of ${entry.template}`] : [];
    if (!response) problems.push('the document has no MethodNotAllowed response');
    return problems;
  }
}

/** What this test process saw, for the file's summary line and the failing test's message. */
export const contractStats = { checked: 0, unrouted: 0, covered: new Set<string>(), operations: new Set<string>(), mismatches: [] as string[], reported: 0 };

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

/**
 * Watches every response `server` sends and checks it against `document` once it has been sent.
 * The body is kept only when it is JSON; file downloads stream past untouched.
 */
export function watchContract(server: Server, document: Json): void {
  const checker = new ContractChecker(document);
  for (const key of checker.operationKeys) contractStats.operations.add(key);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
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
    res.once('finish', () => {
      const exchange: Exchange = { method: req.method ?? 'GET', url: req.url ?? '/', status: res.statusCode, headers: headersOf(res, written), bodyBytes: size, body: capture && size <= BODY_CAP ? Buffer.concat(chunks) : null };
      const verdict = checker.check(exchange);
      contractStats.checked++;
      if (verdict.operation) contractStats.covered.add(verdict.operation);
      else contractStats.unrouted++;
      for (const p of verdict.problems) contractStats.mismatches.push(`${exchange.method} ${exchange.url.slice(0, 200)} → ${exchange.status} (${verdict.operation ?? 'no operation'}): ${p}`);
    });
  });
}

/**
 * One line for this test file, and the totals of the whole run so far: every file of one
 * `node --test` run is a child of the same runner, so the runner's pid names the run's tally.
 */
export function contractSummary(file: string): string {
  const { checked, unrouted, covered, operations, mismatches } = contractStats;
  const tally = join(tmpdir(), `compressd-openapi-contract-${process.ppid}.jsonl`);
  appendFileSync(tally, `${JSON.stringify({ file, checked, unrouted, covered: [...covered], operations: [...operations], mismatches: mismatches.length })}\n`);
  const runs = readFileSync(tally, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { checked: number; covered: string[]; operations: string[]; mismatches: number });
  const all = new Set(runs.flatMap((r) => r.operations));
  const hit = new Set(runs.flatMap((r) => r.covered).filter((k) => all.has(k)));
  const sum = (f: (r: (typeof runs)[number]) => number) => runs.reduce((n, r) => n + f(r), 0);
  return (
    `openapi contract, ${file}: ${checked} responses checked (${unrouted} outside any operation), ${covered.size} of ${operations.size} operations covered, ${mismatches.length} mismatches; ` +
    `run so far (${runs.length} files): ${sum((r) => r.checked)} responses checked, ${hit.size} of ${all.size} operations covered, ${sum((r) => r.mismatches)} mismatches`
  );
}
