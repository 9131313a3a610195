// Spec: "Compressor listing", "Option schema", "Cost estimate", "Credit balance"; and how these answers,
// the OpenAPI document and the page travel: compressed by Accept-Encoding (issue 42).
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { json, startTestServer, type TestServer } from './helpers/server.ts';

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.stop());

const JOB_TYPES = ['image.jpg-compress', 'image.png-compress', 'image.gif-compress', 'image.universal-compress', 'document.pdf-compress', 'document.office-compress'];

describe('GET /compress/compressors', () => {
  it('lists every compressor with the record fields of the spec', async () => {
    const res = await s.api('/compress/compressors');
    assert.equal(res.status, 200);
    const body = await json(res);
    assert.deepEqual(body.compressors.map((c: any) => c.job).sort(), [...JOB_TYPES].sort());
    for (const c of body.compressors) {
      assert.ok(['images', 'documents'].includes(c.category));
      assert.equal(c.endpoint, '/compress');
      assert.ok(c.inputFormats.every((f: string) => !f.startsWith('.')));
      assert.ok(c.outputFormats.length > 0);
      assert.equal(typeof c.maxFileSizeBytes, 'number');
      assert.equal(typeof c.maxConcurrentJobs, 'number');
      assert.deepEqual(Object.keys(c.costing).sort(), ['baseCost', 'displaySuffix', 'increment', 'incrementUnit', 'strategy']);
      assert.equal(c.costing.strategy, 'PerMegabyte');
      assert.equal(c.costing.incrementUnit, 'mb');
    }
    assert.equal(body.maxBatchFiles, 200);
    assert.equal(body.maxFileSizeBytes, 1073741824);
    assert.equal(body.maxConcurrentJobs, 6);
    const universal = body.compressors.find((c: any) => c.job === 'image.universal-compress');
    assert.ok(universal.inputFormats.length >= 37);
    for (const raw of ['cr2', 'nef', 'dng', 'x3f', 'mos']) assert.ok(universal.inputFormats.includes(raw));
    assert.deepEqual(universal.outputFormats.sort(), ['jpg', 'png']);
  });

  it('builds the sourceFormatTo graph from the catalog', async () => {
    const body = await json(await s.api('/compress/compressors'));
    const png = body.sourceFormatTo.png;
    assert.ok(png.some((e: any) => e.job === 'image.png-compress' && e.targetFormat === 'png'));
    assert.ok(png.some((e: any) => e.job === 'image.universal-compress' && e.targetFormat === 'jpg'));
    assert.deepEqual(body.sourceFormatTo.cr2.map((e: any) => e.targetFormat), ['jpg']);
    for (const e of png) {
      for (const k of ['sourceFormat', 'targetFormat', 'job', 'endpoint', 'category', 'costing', 'maxFileSizeBytes', 'maxConcurrentJobs']) assert.ok(k in e, k);
    }
  });

  const filters: [string, string[]][] = [
    ['/compress/compressors/images', ['image.jpg-compress', 'image.png-compress', 'image.gif-compress', 'image.universal-compress']],
    ['/compress/compressors/documents', ['document.pdf-compress', 'document.office-compress']],
    ['/compress/compressors/jpg', ['image.jpg-compress', 'image.universal-compress']],
    ['/compress/compressors/pdf', ['document.pdf-compress']],
    ['/compress/compressors/from/png', ['image.png-compress', 'image.universal-compress']],
    ['/compress/compressors/to/png', ['image.png-compress', 'image.universal-compress']],
    ['/compress/compressors/to/jpg', ['image.jpg-compress', 'image.universal-compress']],
    ['/compress/compressors/from/heic', ['image.universal-compress']],
    ['/compress/compressors?formats=docx,pdf', ['document.pdf-compress', 'document.office-compress']],
    ['/compress/compressors?category=documents', ['document.pdf-compress', 'document.office-compress']],
    ['/compress/compressors/from/png?category=documents', []],
    ['/compress/compressors/to/jpg?formats=heic', ['image.universal-compress']],
    ['/compress/compressors/images?category=documents', []],
    ['/compress/compressors/xyz', []],
  ];
  for (const [path, expected] of filters) {
    it(`filters ${path}`, async () => {
      const res = await s.api(path);
      assert.equal(res.status, 200);
      const body = await json(res);
      assert.deepEqual(body.compressors.map((c: any) => c.job).sort(), [...expected].sort());
    });
  }

  it('restricts the graph on directional paths', async () => {
    const from = await json(await s.api('/compress/compressors/from/webp'));
    assert.deepEqual(Object.keys(from.sourceFormatTo), ['webp']);
    const to = await json(await s.api('/compress/compressors/to/png'));
    for (const edges of Object.values<any[]>(to.sourceFormatTo)) assert.ok(edges.every((e) => e.targetFormat === 'png'));
  });

  it('serves the legacy GET /compress shape with dotted formats', async () => {
    const body = await json(await s.api('/compress'));
    const jpg = body.compressors.find((c: any) => c.jobId === 'image.jpg-compress');
    assert.deepEqual(jpg.formats, ['.jpg', '.jpeg']);
    assert.equal(jpg.category, 'images');
    assert.equal(typeof jpg.pool, 'string');
  });
});

describe('GET /compress/schema', () => {
  it('serves the union schema without a key', async () => {
    const res = await s.api('/compress/schema', { key: null });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^application\/schema\+json/);
    const schema = await json(res);
    assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.equal(schema.type, 'object');
    assert.equal(schema.additionalProperties, false);
    assert.ok(schema.properties.resize && schema.properties.compression);
    assert.equal(typeof schema.$comment, 'string');
  });

  const perFormat: [string, string, string[]][] = [
    ['png', 'image.png-compress', ['_schemaVersion', 'compression', 'resize']],
    ['jpg', 'image.jpg-compress', ['_schemaVersion', 'resize']],
    ['heic', 'image.universal-compress', ['_schemaVersion', 'resize']],
    ['pdf', 'document.pdf-compress', ['_schemaVersion']],
    ['docx', 'document.office-compress', ['_schemaVersion', 'resize']],
  ];
  for (const [format, job, props] of perFormat) {
    it(`filters the schema to ${format}`, async () => {
      const schema = await json(await s.api(`/compress/schema/${format}`, { key: null }));
      assert.equal(schema.$comment, job);
      assert.deepEqual(Object.keys(schema.properties).sort(), props);
      assert.equal(schema.additionalProperties, false);
    });
  }
});

describe('GET /compress/estimate/{format}', () => {
  const cases: [string, number | null, number | null][] = [
    ['/compress/estimate/jpg', null, null],
    ['/compress/estimate/jpg?fileSizeBytes=1000', 1000, null],
    ['/compress/estimate/pdf?fileSizeMb=120', null, 120],
    ['/compress/estimate/pdf?fileSizeBytes=1048576&fileSizeMb=500', 1048576, 500],
  ];
  for (const [path, bytes, mb] of cases) {
    it(`estimates ${path}`, async () => {
      const res = await s.api(path);
      assert.equal(res.status, 200);
      const body = await json(res);
      const { costing } = body;
      const size = bytes ?? (mb === null ? null : mb * 1048576);
      const expected = size === null ? costing.baseCost : Math.max(costing.baseCost, Math.ceil(size / (costing.increment * 1048576)));
      assert.equal(body.estimatedCredits, expected);
      assert.deepEqual(body.inputs, { fileSizeBytes: bytes, fileSizeMb: mb });
      assert.equal(body.limits.maxFileSizeBytes, 1073741824);
      assert.ok(body.job && body.category);
    });
  }

  it('charges the base cost when the size is missing, and more for large files', async () => {
    const small = await json(await s.api('/compress/estimate/png'));
    const large = await json(await s.api('/compress/estimate/png?fileSizeMb=120'));
    assert.equal(small.estimatedCredits, small.costing.baseCost);
    assert.ok(large.estimatedCredits > small.estimatedCredits);
  });
});

describe('GET /compress/entitlements/me', () => {
  it('reports the balance and plan limits', async () => {
    const body = await json(await s.api('/compress/entitlements/me'));
    assert.equal(body.account, 'default');
    assert.equal(body.guest, false);
    assert.equal(body.balance, 500);
    assert.deepEqual(body.credits, { granted: 500, spent: 0, reserved: 0, available: 500 });
    assert.equal(body.limits.maxQueuedJobs, 18);
  });
});

// Spec: "The supported-format list used in estimate and schema errors is: avif, bmp, docx, gif,
// heic, jpg, pdf, png, pptx, webp." Compress errors list every accepted extension, with dots.
describe('unsupported_format errors', () => {
  const SPEC_LIST = ['avif', 'bmp', 'docx', 'gif', 'heic', 'jpg', 'pdf', 'png', 'pptx', 'webp'];
  const cases: [name: string, path: string, key: boolean, code: string, check: (list: string[]) => void][] = [
    ['schema', '/compress/schema/xyz', false, 'schema.unsupported_format', (l) => assert.deepEqual(l, SPEC_LIST)],
    ['schema (dotted format)', '/compress/schema/.exe', false, 'schema.unsupported_format', (l) => assert.deepEqual(l, SPEC_LIST)],
    ['estimate', '/compress/estimate/exe', true, 'estimate.unsupported_format', (l) => assert.deepEqual(l, SPEC_LIST)],
    ['estimate (upper case)', '/compress/estimate/TXT?fileSizeBytes=10', true, 'estimate.unsupported_format', (l) => assert.deepEqual(l, SPEC_LIST)],
  ];
  for (const [name, path, key, code, check] of cases) {
    it(`${name}: 400 ${code} with exactly the spec's dotless list`, async () => {
      const res = await s.api(path, key ? {} : { key: null });
      assert.equal(res.status, 400);
      const body = await json(res);
      assert.equal(body.error, code);
      check(body.supportedFormats);
    });
  }

  it('POST /compress keeps its own list: every accepted extension, with a leading dot', async () => {
    const form = new FormData();
    form.set('file', new Blob(['MZ']), 'setup.exe');
    const body = await json(await s.api('/compress', { method: 'POST', body: form }));
    assert.equal(body.error, 'compress.unsupported_format');
    for (const f of ['.jpg', '.jpeg', '.heif', '.tif', '.psd', '.cr2', '.docx']) assert.ok(body.supportedFormats.includes(f), f);
    assert.ok(body.supportedFormats.every((f: string) => f.startsWith('.')));
  });
});

/** An answer as it crossed the wire (fetch would undo the coding). */
function raw(path: string, headers: Record<string, string>, method = 'GET'): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request(`${s.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

const decode = (body: Buffer, coding: string | undefined) => (coding === 'br' ? brotliDecompressSync(body) : coding === 'gzip' ? gunzipSync(body) : body);

describe('response compression', () => {
  const keyed = () => ({ 'x-service-api-key': s.key });
  const cases: [string, string, () => Record<string, string>, string | undefined, string | null][] = [
    // path, Accept-Encoding, other headers, expected coding, expected Vary
    ['/compress/compressors', 'gzip', keyed, 'gzip', 'Accept-Encoding'],
    ['/compress/compressors', 'gzip, deflate, br', keyed, 'br', 'Accept-Encoding'],
    ['/compress/compressors', 'br;q=0.5, gzip', keyed, 'gzip', 'Accept-Encoding'],
    ['/compress/compressors', 'br;q=0, *', keyed, 'gzip', 'Accept-Encoding'],
    ['/compress/compressors', 'identity', keyed, undefined, 'Accept-Encoding'],
    ['/compress/compressors', '', keyed, undefined, 'Accept-Encoding'],
    ['/compress/schema', 'gzip', () => ({}), 'gzip', 'Accept-Encoding'],
    ['/openapi.json', 'br', () => ({}), 'br', 'Accept-Encoding'],
    ['/openapi.json', 'gzip', () => ({}), 'gzip', 'Accept-Encoding'],
    ['/ui/app.js', 'gzip, br', () => ({}), 'br', 'Accept-Encoding'],
    ['/ui/app.css', 'gzip', () => ({}), 'gzip', 'Accept-Encoding'],
    ['/ui/app.css', '', () => ({}), undefined, 'Accept-Encoding'],
    ['/healthz (under 1 KB)', 'gzip, br', () => ({}), undefined, 'Accept-Encoding'],
    ['/compress/job/nope (a small error)', 'gzip, br', keyed, undefined, 'Accept-Encoding'],
  ];
  for (const [target, accept, headers, coding, vary] of cases) {
    it(`${target} with Accept-Encoding ${JSON.stringify(accept)}: ${coding ?? 'identity'}`, async () => {
      const path = target.split(' ')[0]!;
      const res = await raw(path, { ...headers(), ...(accept ? { 'accept-encoding': accept } : {}) });
      const plain = await raw(path, headers());
      assert.equal(res.status, plain.status);
      assert.equal(res.headers['content-encoding'], coding);
      assert.equal(res.headers.vary, vary);
      const body = decode(res.body, coding);
      assert.deepEqual(body, plain.body, 'the same bytes once decoded');
      if (coding) assert.ok(res.body.length < plain.body.length, `${res.body.length} B of ${plain.body.length}`);
      else assert.equal(Number(res.headers['content-length']), plain.body.length);
    });
  }

  it('answers HEAD with the headers of the compressed GET and no body', async () => {
    const res = await raw('/openapi.json', { 'accept-encoding': 'gzip' }, 'HEAD');
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-encoding'], 'gzip');
    assert.equal(res.headers.vary, 'Accept-Encoding');
    assert.equal(res.body.length, 0);
  });

  it("gives each coding of the page's files its own ETag, and revalidates each (304)", async () => {
    const tags = new Map<string, string>();
    for (const accept of ['', 'gzip', 'br']) {
      const res = await raw('/ui/app.js', accept ? { 'accept-encoding': accept } : {});
      tags.set(accept, String(res.headers.etag));
      const again = await raw('/ui/app.js', { ...(accept ? { 'accept-encoding': accept } : {}), 'if-none-match': String(res.headers.etag) });
      assert.equal(again.status, 304, `the ${accept || 'identity'} copy is still good`);
      assert.equal(again.headers.etag, res.headers.etag);
      const weak = await raw('/ui/app.js', { ...(accept ? { 'accept-encoding': accept } : {}), 'if-none-match': `W/${res.headers.etag}` });
      assert.equal(weak.status, 304, 'If-None-Match compares weakly');
    }
    assert.equal(new Set(tags.values()).size, 3, [...tags.values()].join(' '));
    const stale = await raw('/ui/app.js', { 'accept-encoding': 'gzip', 'if-none-match': tags.get('')! });
    assert.equal(stale.status, 200, 'an identity copy does not validate the gzip one');
    assert.equal(stale.headers['content-encoding'], 'gzip');
  });
});
