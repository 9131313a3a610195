// The OpenAPI document as a contract (issues 29, 42): Redocly's recommended lint, Spectral's
// spectral:oas, what the document says about parameters and bodies, what the server does where the
// two used to disagree, and the request and response check every test server runs (helpers/contract.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { acceptedFormats } from '../src/catalog/index.ts';
import { ContractChecker, type Exchange } from './helpers/contract.ts';
import { CORPUS, fileForm, json, startTestServer, type TestServer } from './helpers/server.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

let s: TestServer;
let doc: Record<string, any>;
before(async () => {
  s = await startTestServer({ workers: '1' });
  doc = await json(await s.api('/openapi.json', { key: null }));
});
after(() => s.stop());

const operations = () =>
  Object.entries<Record<string, any>>(doc.paths).flatMap(([path, item]) =>
    Object.entries<Record<string, any>>(item)
      .filter(([m]) => METHODS.includes(m))
      .map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, op })),
  );

describe('the served document', () => {
  it('passes Redocly CLI lint with the recommended rules: 0 errors, 0 warnings', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-redocly-'));
    try {
      const file = join(dir, 'openapi.json');
      await writeFile(file, JSON.stringify(doc));
      const cli = join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');
      const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
      const out = await run(process.execPath, [cli, 'lint', file, '--config', join(ROOT, 'redocly.yaml'), '--format', 'json'], { env, maxBuffer: 64 << 20 }).catch((e) => e);
      const report = JSON.parse(out.stdout) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; message: string; location: { pointer: string }[] }[] };
      const lines = report.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
      assert.deepEqual({ errors: report.totals.errors, warnings: report.totals.warnings }, { errors: 0, warnings: 0 }, lines.join('\n'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('passes Spectral CLI lint with spectral:oas: 0 errors, 0 warnings', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-spectral-'));
    try {
      const file = join(dir, 'openapi.json');
      await writeFile(file, JSON.stringify(doc));
      const manifest = createRequire(join(ROOT, 'package.json')).resolve('@stoplight/spectral-cli/package.json');
      const cli = join(dirname(manifest), JSON.parse(readFileSync(manifest, 'utf8')).bin.spectral);
      const args = [cli, 'lint', file, '--ruleset', join(ROOT, '.spectral.yaml'), '--format', 'json', '--quiet'];
      const out = await run(process.execPath, args, { maxBuffer: 64 << 20 }).catch((e) => e);
      const results = JSON.parse(out.stdout || '[]') as { code: string; message: string; severity: number; path: string[] }[];
      const lines = results.map((r) => `${['error', 'warning', 'info', 'hint'][r.severity]} ${r.code}: ${r.message} at ${r.path.join('.')}`);
      assert.deepEqual(lines.filter((l) => /^(error|warning) /.test(l)), [], lines.join('\n'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('names every operation with a unique, readable operationId', () => {
    const ids = operations().map(({ op }) => op.operationId as string);
    assert.equal(new Set(ids).size, ids.length);
    for (const id of ids) assert.match(id, /^[a-z][A-Za-z]+$/);
    const byRoute = Object.fromEntries(operations().map(({ key, op }) => [key, op.operationId]));
    assert.deepEqual(
      [byRoute['POST /compress'], byRoute['POST /compress/jpg'], byRoute['GET /compress/job/{id}'], byRoute['GET /compress/job/{id}/download'], byRoute['GET /compress/compressors']],
      ['submitJob', 'submitJpgJob', 'getJob', 'downloadJob', 'listCompressors'],
    );
  });

  it('gives every answer with a body its content type (HEAD: none), and every path its 405 with Allow', () => {
    for (const { key, op } of operations()) {
      for (const [status, response] of Object.entries<Record<string, any>>(op.responses)) {
        if (status === '304' || key.startsWith('HEAD ')) continue;
        const resolved = response.$ref ? doc.components.responses[response.$ref.split('/').pop()] : response;
        assert.ok(resolved.content && Object.keys(resolved.content).length > 0, `${key} ${status} has no content`);
      }
      assert.equal(op.responses['405'].$ref, '#/components/responses/MethodNotAllowed', key);
    }
    assert.equal(doc.components.responses.MethodNotAllowed.headers.Allow.required, true);
  });

  it('declares formats and versions as what the server reads: any case, and no enum that would make its 400 an invalid request', () => {
    for (const path of ['/compress/schema/{format}', '/compress/estimate/{format}']) {
      const param = doc.paths[path].get.parameters.find((p: any) => p.name === 'format');
      assert.equal(param.schema.enum, undefined, path);
      assert.equal(param.schema.type, 'string', path);
      for (const format of acceptedFormats()) assert.ok(param.schema.description.includes(format), `${path} names ${format}`);
    }
    const sourceFormat = doc.paths['/compress'].post.requestBody.content['application/json'].schema.properties.sourceFormat;
    assert.equal(sourceFormat.enum, undefined);
    assert.equal(doc.components.parameters.Version.schema.type, 'integer');
    assert.equal(doc.components.parameters.Version.schema.enum, undefined);
    const estimate = doc.paths['/compress/estimate/{format}'].get.parameters.map((p: any) => p.name);
    for (const name of ['fileSizeBytes', 'fileSizeMb']) assert.ok(estimate.includes(name), name);
    const listing = doc.paths['/compress/compressors'].get.parameters.map((p: any) => p.name);
    for (const name of ['formats', 'category']) assert.ok(listing.includes(name), name);
    assert.deepEqual(doc.paths['/api/compress/job/{id}/download'].get.security, [{ downloadToken: [] }]);
    assert.equal(doc.components.securitySchemes.downloadToken.name, 'token');
  });

  const bodies: [string, Record<string, string>, boolean][] = [
    ['a file', { file: 'x' }, true],
    ['a URL with its format', { inputUrl: 'https://example.com/a', sourceFormat: 'png' }, true],
    ['a URL without its format', { inputUrl: 'https://example.com/a' }, false],
    ['both a file and a URL', { file: 'x', inputUrl: 'https://example.com/a', sourceFormat: 'png' }, false],
    ['neither', { options: '{}' }, false],
    ['a webhook URL without its secret', { file: 'x', webhookUrl: 'https://hooks.example.com/x' }, false],
  ];
  for (const [name, body, valid] of bodies) {
    it(`${valid ? 'accepts' : 'refuses'} a multipart submission with ${name}`, () => {
      const ajv = new Ajv2020({ strict: false, validateFormats: false }).addSchema(doc, 'doc');
      const ok = ajv.validate({ $ref: 'doc#/paths/~1compress/post/requestBody/content/multipart~1form-data/schema' }, body);
      assert.equal(ok, valid, ajv.errorsText());
    });
  }
});

describe('the document describes what the server does (issue 42: the eight places a validating proxy found)', () => {
  const JPG = join(CORPUS, 'jpg/jpeg420exif.jpg');
  /** The request as the document sees it, whatever the server answers: the proxy's first question. */
  const requestProblems = (method: string, url: string, body: unknown = null, contentType = 'application/json') =>
    new ContractChecker(doc).check({
      method,
      url,
      status: 400,
      headers: {},
      bodyBytes: 0,
      body: null,
      request: { headers: { 'x-service-api-key': 'k', ...(body === null ? {} : { 'content-type': contentType }) }, body: body === null ? null : { value: body } },
    }).request;

  it('formats in any case: JPG and PNG paths, a .JPG upload, a JSON sourceFormat "PNG" are valid requests the server serves', async () => {
    for (const path of ['/compress/estimate/JPG', '/compress/schema/PNG', '/compress/compressors/from/JPG']) {
      assert.equal((await s.api(path)).status, 200, path);
      assert.deepEqual(requestProblems('GET', path), [], path);
    }
    const res = await s.api('/compress', { method: 'POST', body: await fileForm(JPG, {}, 'PHOTO.JPG') });
    assert.equal(res.status, 202);
    assert.deepEqual(requestProblems('POST', '/compress', { inputUrl: 'https://example.com/a', sourceFormat: 'PNG' }), []);
  });

  it("an unsupported format is a valid request, answered with the document's own 400", async () => {
    for (const [path, code] of [['/compress/estimate/xyz', 'estimate.unsupported_format'], ['/compress/schema/xyz', 'schema.unsupported_format']] as const) {
      const res = await s.api(path);
      assert.equal(res.status, 400);
      assert.equal((await json(res)).error, code);
      assert.deepEqual(requestProblems('GET', path), [], path);
      assert.match(doc.paths[path.replace('xyz', '{format}')].get.responses['400'].description, new RegExp(code.replace('.', '\\.')));
    }
    assert.deepEqual(requestProblems('POST', '/compress', { inputUrl: 'https://example.com/a', sourceFormat: 'xyz' }), []);
  });

  it('HEAD of every GET path is an operation of the document, and the server answers it', async () => {
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) if (item.get) assert.ok(item.head, `HEAD ${path}`);
    const res = await s.api('/compress/compressors', { method: 'HEAD' });
    assert.equal(res.status, 200);
    assert.equal(new ContractChecker(doc).check({ method: 'HEAD', url: '/compress/compressors', status: 200, headers: {}, bodyBytes: 0, body: null }).operation, 'HEAD /compress/compressors');
  });

  it('the /v<N> suffix of the API paths is documented and served; the probes and the page take none', async () => {
    assert.ok(doc.paths['/compress/v{version}'].post);
    assert.ok(doc.paths['/compress/job/{id}/download/v{version}'].get);
    assert.equal(doc.paths['/healthz/v{version}'], undefined);
    assert.equal(doc.paths['/compress/compressors/{filter}/v{version}'], undefined, 'the filtered listing has no suffix: /compress/compressors/from/v1 would read two ways');
    assert.equal((await s.api('/compress/v1', { method: 'POST', body: await fileForm(JPG) })).status, 202);
    assert.equal((await s.api('/compress/compressors/v1', { method: 'HEAD' })).status, 200);
    assert.equal((await s.api('/compress/v2', { method: 'POST', body: await fileForm(JPG) })).status, 400);
    assert.equal((await s.api('/healthz/v1')).status, 404);
    assert.equal((await s.api('/healthz?version=1', { key: null })).status, 200);
  });

  it('JSON options are an object, as the spec says: a JSON string there is 400 compress.invalid_options', async () => {
    const body = JSON.stringify({ inputUrl: 'https://example.com/a.png', sourceFormat: 'png', options: '{}' });
    const res = await s.api('/compress', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(res.status, 400);
    assert.equal((await json(res)).error, 'compress.invalid_options');
    assert.notDeepEqual(requestProblems('POST', '/compress', JSON.parse(body)), []);
  });

  // One OPTIONS behaviour (docs/api.md): 405 with Allow on every path, for every caller; no CORS.
  const optionsCases: [string, Record<string, string>, string | null][] = [
    ['no key', {}, null],
    ['a key', {}, 'key'],
    ['a cross-origin preflight', { Origin: 'https://elsewhere.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'x-service-api-key' }, null],
  ];
  for (const [who, headers, key] of optionsCases) {
    it(`OPTIONS from ${who}: 405 with Allow on /healthz, /compress and a job path, no CORS headers`, async () => {
      for (const [path, allow] of [['/healthz', 'GET, HEAD'], ['/compress', 'GET, HEAD, POST'], ['/compress/job/x/cancel', 'POST']]) {
        const res = await s.api(path, { method: 'OPTIONS', headers, key: key === null ? null : s.key });
        assert.equal(res.status, 405, path);
        assert.equal(res.headers.get('allow'), allow, path);
        assert.equal(res.headers.get('access-control-allow-origin'), null, path);
        assert.equal((await json(res)).error, 'route.method_not_allowed');
      }
    });
  }
});

describe('query parameters behave as declared', () => {
  const cases: [string, number, string?][] = [
    ['/compress/compressors?version=1', 200],
    ['/compress/compressors?version=v1', 400, 'request.unsupported_version'],
    ['/compress/compressors?version=%201', 400, 'request.unsupported_version'],
    ['/compress/estimate/jpg?fileSizeBytes=2048', 200],
    ['/compress/estimate/jpg?fileSizeBytes=1.5', 400, 'estimate.invalid_size'],
    ['/compress/estimate/jpg?fileSizeMb=1.5', 200],
    ['/compress/estimate/jpg?fileSizeMb=-1', 400, 'estimate.invalid_size'],
  ];
  for (const [path, status, code] of cases) {
    it(`${path} → ${status}${code ? ` ${code}` : ''}`, async () => {
      const res = await s.api(path);
      assert.equal(res.status, status);
      if (code) assert.equal((await json(res)).error, code);
      else await res.arrayBuffer();
    });
  }
  it('takes the version header as a bare number too', async () => {
    assert.equal((await s.api('/compress/compressors', { headers: { 'X-Service-Endpoint-Version': 'v1' } })).status, 400);
    assert.equal((await s.api('/compress/compressors', { headers: { 'X-Service-Endpoint-Version': '1' } })).status, 200);
  });
});

describe('the response check', () => {
  const jsonHeaders = { 'content-type': 'application/json; charset=utf-8' };
  const exchange = (x: Partial<Exchange> & { json?: unknown }): Exchange => {
    const body = x.json === undefined ? null : Buffer.from(JSON.stringify(x.json));
    return { method: 'GET', url: '/compress/job/abc', status: 200, headers: jsonHeaders, bodyBytes: body?.length ?? 0, body, ...x };
  };
  const error = { error: 'jobs.not_found', detail: null };
  const estimate = { job: 'image.jpg-compress', category: 'images', estimatedCredits: 1, costing: { strategy: 'Fixed', baseCost: 1, increment: null, incrementUnit: null, displaySuffix: 'each' }, inputs: { fileSizeBytes: null, fileSizeMb: null }, limits: { maxFileSizeBytes: 1 } };
  const accepted = { id: 'a', fileName: 'x', format: 'png', jobType: 'image.png-compress', status: 'Queued', createdAt: '2026-01-01T00:00:00Z' };
  /** The exchange with the request a client with a key sent: a body (JSON unless said) or none. */
  const withRequest = (x: Exchange, body: unknown, contentType = 'application/json'): Exchange => ({
    ...x,
    request: { headers: { 'x-service-api-key': 'k', ...(x.method === 'POST' ? { 'content-type': contentType } : {}) }, body: x.method === 'POST' ? { value: body } : null },
  });
  const download = { 'accept-ranges': 'bytes', 'last-modified': 'Tue, 01 Dec 2026 10:00:00 GMT', etag: `"${'0'.repeat(64)}"` };
  const cases: [string, Exchange, RegExp | null][] = [
    ['a declared error', exchange({ status: 404, json: error }), null],
    ['a versioned path', exchange({ url: '/compress/job/abc/v1', status: 404, json: error }), null],
    ['an undeclared status', exchange({ status: 418, json: error }), /status 418 is not declared/],
    ['an undeclared content type', exchange({ status: 404, headers: { 'content-type': 'text/plain' }, json: error }), /content type "text\/plain" is not declared/],
    ['a body off its schema', exchange({ json: { id: 'abc', status: 'Lost' } }), /body.*must have required property/],
    ['a 429 without Retry-After', exchange({ status: 429, json: { error: 'rate_limited', detail: 'slow down' } }), /required header Retry-After is missing/],
    ['a JSON type with no JSON', { ...exchange({ status: 404 }), body: Buffer.from('<html>'), bodyBytes: 6 }, /not JSON/],
    ['a 405 whose Allow lacks a method', exchange({ method: 'PUT', url: '/compress', status: 405, headers: { ...jsonHeaders, allow: 'GET, HEAD' }, json: error }), /lacks POST/],
    ['a 405 with the right Allow', exchange({ method: 'PUT', url: '/compress', status: 405, headers: { ...jsonHeaders, allow: 'GET, HEAD, POST' }, json: error }), null],
    ['a file download', exchange({ url: '/compress/job/abc/download', headers: { 'content-type': 'image/png', ...download }, bodyBytes: 10 }), null],
    ['a file download without Accept-Ranges', exchange({ url: '/compress/job/abc/download', headers: { 'content-type': 'image/png', 'last-modified': download['last-modified'] }, bodyBytes: 10 }), /required header Accept-Ranges is missing/],
    ['a byte range', exchange({ url: '/compress/job/abc/download', status: 206, headers: { 'content-type': 'image/png', ...download, 'content-range': 'bytes 0-9/100' }, bodyBytes: 10 }), null],
    ['a byte range without Content-Range', exchange({ url: '/compress/job/abc/download', status: 206, headers: { 'content-type': 'image/png', ...download }, bodyBytes: 10 }), /required header Content-Range is missing/],
    ['a 304 of a download', exchange({ url: '/compress/job/abc/download', status: 304, headers: download }), null],
    ['a 416 with the size', exchange({ url: '/compress/job/abc/download', status: 416, headers: { ...jsonHeaders, 'content-range': 'bytes */100' }, json: error }), null],
    ['a 416 without the size', exchange({ url: '/compress/job/abc/download', status: 416, json: error }), /required header Content-Range is missing/],
    ['a 429 from /healthz, which is never limited', exchange({ url: '/healthz', status: 429, headers: { ...jsonHeaders, 'retry-after': '5' }, json: error }), /status 429 is not declared/],
    ['a gzip-coded JSON body', { ...exchange({}), headers: { ...jsonHeaders, 'content-encoding': 'gzip' }, body: gzipSync(JSON.stringify({ id: 'abc', status: 'Lost' })) }, /body.*must have required property/],
    ['a method the document lacks, answered 200', exchange({ method: 'PUT', url: '/compress', json: error }), /the document has no such operation/],
    ['a path the document lacks, answered 200', exchange({ url: '/healthz/v1', json: { status: 'ok' } }), /the document has no such operation/],
    ['a query off its schema, answered 200', withRequest(exchange({ url: '/compress/estimate/jpg?fileSizeBytes=abc', json: estimate }), {}), /document refuses this request.*fileSizeBytes.*answered 200/],
    ['a query off its schema, refused', withRequest(exchange({ url: '/compress/estimate/jpg?fileSizeBytes=abc', status: 400, json: error }), {}), null],
    ['no API key, answered 200', { ...withRequest(exchange({ url: '/compress/estimate/jpg', json: estimate }), {}), request: { headers: {}, body: null } }, /no credentials/],
    ['JSON options as a string, accepted', withRequest(exchange({ method: 'POST', url: '/compress', status: 202, json: accepted }), { inputUrl: 'https://a.example/x', sourceFormat: 'png', options: '{}' }), /options must be object/],
    ['multipart options off the schema, accepted', withRequest(exchange({ method: 'POST', url: '/compress', status: 202, json: accepted }), { file: '', options: '{"quality":80}' }, 'multipart/form-data; boundary=x'), /field options: .*additional properties/],
    ['a body of an undeclared type, refused', withRequest(exchange({ method: 'POST', url: '/compress', status: 400, json: error }), 'x', 'text/plain'), null],
  ];
  for (const [name, x, expected] of cases) {
    it(`${expected ? 'flags' : 'passes'} ${name}`, () => {
      const { problems } = new ContractChecker(doc).check(x);
      if (expected) assert.match(problems.join('\n'), expected);
      else assert.deepEqual(problems, []);
    });
  }
});
