// "No request can stop the service": a seeded, grammar-based generator of malformed HTTP
// requests for every route, over raw sockets (node:net) and fetch. After every case the
// server must be alive and answer within 2 s; no answer is a 5xx other than 503; every
// accepted job ends; no credit stays reserved; the spool holds only live jobs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { fuzzSettings, Invariants, parseResponses, rawExchange, Rng, type RawOptions } from './helpers/fuzz.ts';
import { json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';

let s: TestServer;
let guestKey: string;
let png: Buffer;
let jobId: string;
const FORMATS = ['jpg', 'png', 'gif', 'pdf', 'docx', 'webp', 'exe', '', '.PNG', '%00', 'j%zzpg', 'x'.repeat(300)];

before(async () => {
  s = await startTestServer({ workers: '1', rateLimitPerMinute: '0' });
  guestKey = s.newKey('guest-fuzz', { guest: true });
  png = await sharp({ create: { width: 24, height: 16, channels: 3, background: '#3a7' } }).png().toBuffer();
  const form = new FormData();
  form.set('file', new Blob([png]), 'seed.png');
  jobId = (await json(await s.api('/compress', { method: 'POST', body: form }))).id;
  assert.equal((await waitForJob(s, jobId)).status, 'Succeeded');
});
after(() => s.stop());

const CRLF = '\r\n';
const b = (x: string | Buffer) => (typeof x === 'string' ? Buffer.from(x, 'latin1') : x);

interface Part {
  headers: (string | Buffer)[];
  content: Buffer;
}

/** The structural pieces of a multipart body; cutting between any two of them is a case. */
function multipartPieces(boundary: string, parts: Part[], opts: { preamble?: string; closing?: boolean; epilogue?: string } = {}): Buffer[] {
  const pieces: Buffer[] = [];
  if (opts.preamble) pieces.push(b(opts.preamble));
  for (const p of parts) {
    pieces.push(b(`--${boundary}`), b(CRLF));
    for (const h of p.headers) pieces.push(b(h), b(CRLF));
    pieces.push(b(CRLF), p.content, b(CRLF));
  }
  if (opts.closing !== false) pieces.push(b(`--${boundary}--`), b(CRLF));
  if (opts.epilogue) pieces.push(b(opts.epilogue));
  return pieces;
}

const filePart = (name: string | Buffer, content: Buffer, field = 'file'): Part => ({
  headers: [Buffer.concat([b(`Content-Disposition: form-data; name="${field}"; filename="`), b(name), b('"')]), 'Content-Type: application/octet-stream'],
  content,
});
const fieldPart = (name: string, value: string | Buffer): Part => ({ headers: [`Content-Disposition: form-data; name="${name}"`], content: b(value) });

/** A request as bytes: request line, headers and body, with the framing the case chose. */
function request(method: string, path: string | Buffer, headers: [string, string | Buffer][], body: Buffer | null, framing: 'length' | 'chunked' | 'none' | 'short' | 'long' = 'length'): Buffer {
  // Connection: close lets the exchange end when the server is done instead of at the timeout.
  const lines: Buffer[] = [Buffer.concat([b(`${method} `), b(path), b(' HTTP/1.1\r\n')]), b(`Host: 127.0.0.1${CRLF}Connection: close${CRLF}`)];
  for (const [k, v] of headers) lines.push(Buffer.concat([b(`${k}: `), b(v), b(CRLF)]));
  if (body) {
    if (framing === 'length') lines.push(b(`Content-Length: ${body.length}${CRLF}`));
    if (framing === 'short') lines.push(b(`Content-Length: ${Math.max(0, body.length - 7)}${CRLF}`));
    if (framing === 'long') lines.push(b(`Content-Length: ${body.length + 4096}${CRLF}`));
    if (framing === 'chunked') {
      lines.push(b(`Transfer-Encoding: chunked${CRLF}${CRLF}`));
      const chunks: Buffer[] = [];
      for (let i = 0; i < body.length; i += 1000) {
        const c = body.subarray(i, i + 1000);
        chunks.push(b(`${c.length.toString(16)}${CRLF}`), c, b(CRLF));
      }
      chunks.push(b(`0${CRLF}${CRLF}`));
      return Buffer.concat([...lines, ...chunks]);
    }
  }
  lines.push(b(CRLF));
  return Buffer.concat(body ? [...lines, body] : lines);
}

interface RawCase {
  kind: 'raw';
  name: string;
  chunks: Buffer[];
  /** The request is complete: an answer must come (a 4xx, a 2xx, or 503). */
  mustAnswer: boolean;
  /** The API key sent, to follow an accepted job with. */
  key?: string;
  /** A HEAD request somewhere on the connection (its answers carry no body). */
  head?: boolean;
  opts: Partial<RawOptions>;
}
interface FetchCase {
  kind: 'fetch';
  name: string;
  path: string;
  init: RequestInit & { key?: string | null };
  /** Abort the upload body after this many bytes, or the download after the first chunk. */
  abort?: 'upload' | 'download';
}
type Case = RawCase | FetchCase;

function routePaths(r: Rng): string[] {
  return s.service
    .routes()
    .filter((x) => x.method !== 'ALL')
    .map((x) => x.path.replace(':id', r.pick([jobId, jobId, 'nope', '00000000-0000-0000-0000-000000000000', '..%2f..%2fetc', '%E0%A4%A'])).replace(/:format|:filter/, r.pick(FORMATS)));
}

function keyHeader(r: Rng): [string, string][] {
  const key = r.pick([s.key, s.key, s.key, s.key, null, 'sk_bogus', guestKey]);
  return key === null ? [] : [['X-Service-Api-Key', key]];
}

const keyOf = (headers: [string, string | Buffer][]) => headers.find(([k]) => k === 'X-Service-Api-Key')?.[1] as string | undefined;

const BOUNDARIES = ['xx', 'b0undary', '----WebKitFormBoundary7MA4YWxkTrZu0gW', 'a'.repeat(70), 'a'.repeat(71), 'a'.repeat(5000), '', '"quoted"', 'sp ace', 'ünï'];

function multipartCase(r: Rng, n: number): RawCase {
  const boundary = r.pick(BOUNDARIES);
  const fileName = r.pick<string | Buffer>(['a.jpg', 'p.png', 'a.png', 'noext', '../../etc/passwd.png', Buffer.from([0xff, 0xfe, 0x2e, 0x70, 0x6e, 0x67]), 'ä€😀.png', 'x'.repeat(2000) + '.png', '.png', 'a.PNG', 'a.pdf', 'a.exe']);
  const content = r.pick([png, png, Buffer.from([0xff, 0xd8, 0x20, 0x70]), r.bytes(r.int(3000)), Buffer.alloc(0), Buffer.concat([png, b(`\r\n--${boundary}`)])]);
  const parts: Part[] = [];
  const shape = r.int(12);
  if (shape === 0) parts.push(filePart(fileName, content), filePart('b.png', png));
  else if (shape === 1) parts.push({ headers: ['Content-Type: image/png'], content });
  else if (shape === 2) parts.push({ headers: ['Content-Disposition: form-data; name="file"; filename="a.png"', 'Content-Disposition: form-data; name="file"; filename="b.jpg"'], content });
  else if (shape === 3) parts.push(fieldPart('options', 'x'.repeat(70 * 1024)), filePart(fileName, content));
  else if (shape === 4) for (let i = 0; i < 45; i++) parts.push(fieldPart(`f${i}`, 'v'));
  else if (shape === 5) parts.push(fieldPart('options', r.pick(['{', '[]', '{"resize":{"enabled":true,"mode":"pixels","preset":"custom","value":1e308}}', JSON.stringify({ compression: { mode: 'lossless' } }), '{"resize":' + '['.repeat(5000) + ']'.repeat(5000) + '}'])), filePart(fileName, content));
  else if (shape === 6) parts.push(fieldPart('inputUrl', r.pick(['https://127.0.0.1/x.png', 'http://a', 'javascript:1', '%%%'])), fieldPart('sourceFormat', 'png'));
  else if (shape === 7) parts.push({ headers: [`Content-Disposition: form-data; name="file"; filename*=UTF-8''%E0%A4%A.png`], content });
  else if (shape === 8) parts.push({ headers: ['Content-Disposition: form-data; name="file"; filename="a.png"', `X-Big: ${'h'.repeat(20000)}`], content });
  else parts.push(filePart(fileName, content));
  const pieces = multipartPieces(boundary, parts, { preamble: r.chance(0.1) ? 'preamble\r\n' : undefined, closing: !r.chance(0.1), epilogue: r.chance(0.1) ? 'epilogue' : undefined });
  // Cut at a structural position (every one in turn, then at random), or keep the body whole.
  let body = Buffer.concat(pieces);
  let cut = 'whole';
  if (r.chance(0.6)) {
    const at = n % (pieces.length + 1);
    body = Buffer.concat(pieces.slice(0, at));
    cut = `cut after piece ${at}/${pieces.length}`;
  }
  const ct = r.pick([`multipart/form-data; boundary=${boundary}`, `multipart/form-data; boundary="${boundary}"`, 'multipart/form-data', `multipart/form-data; boundary=${boundary}; boundary=other`, `multipart/mixed; boundary=${boundary}`]);
  const framing = r.pick(['length', 'length', 'length', 'chunked', 'short', 'long'] as const);
  const path = r.pick(['/compress', '/compress/png', '/compress/jpg', '/compress/image', '/v1/compress', '/compress/pdf']);
  const key = keyHeader(r);
  const chunks = [request('POST', path, [...key, ['Content-Type', ct]], body, framing)];
  const split = r.chance(0.3) ? splitRandomly(r, chunks[0]!) : chunks;
  const abort = r.chance(0.15);
  return {
    kind: 'raw',
    name: `multipart ${cut}, boundary ${boundary.length} chars, shape ${shape}, ${framing}${abort ? ', aborted' : ''}`,
    chunks: split,
    mustAnswer: !abort && framing !== 'long',
    key: keyOf(key),
    // A body shorter than its Content-Length: mostly the client ends the stream, sometimes it stalls.
    opts: abort ? { abortAfter: r.int(chunks[0]!.length) } : { halfClose: framing === 'long' && r.chance(0.8) },
  };
}

function splitRandomly(r: Rng, data: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at < data.length) {
    const n = 1 + r.int(Math.min(4096, data.length - at));
    out.push(data.subarray(at, at + n));
    at += n;
  }
  return out;
}

function deepJson(r: Rng): string {
  const depth = r.pick([10, 1000, 100_000]);
  return r.pick([`{"inputUrl":${'['.repeat(depth)}${']'.repeat(depth)}}`, `{"options":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)},"sourceFormat":"png","inputUrl":"https://127.0.0.1/a.png"}`]);
}

function jsonCase(r: Rng): RawCase {
  const body = b(
    r.pick([
      deepJson(r),
      JSON.stringify({ inputUrl: 'https://127.0.0.1/a.png', sourceFormat: 'png' }),
      JSON.stringify({ inputUrl: 'https://example.invalid/a.png', sourceFormat: r.pick(FORMATS), webhookUrl: 'http://x', webhookSecret: 's' }),
      `{"inputUrl":"${'a'.repeat(2 * 1024 * 1024)}"}`,
      '{"inputUrl": "https://a.b/\ud800.png", "sourceFormat": "png"}',
      '{"a":1,',
      'null',
      '"str"',
      '[1,2]',
    ]),
  );
  const mangled = r.chance(0.15) ? Buffer.concat([body.subarray(0, r.int(body.length)), Buffer.from([0xc3, 0x28, 0xff])]) : body;
  const framing = r.pick(['length', 'length', 'chunked', 'short'] as const);
  const key = keyHeader(r);
  return { kind: 'raw', name: `json body ${mangled.length} bytes, ${framing}`, key: keyOf(key), chunks: [request('POST', r.pick(['/compress', '/compress/png', '/compress/office']), [...key, ['Content-Type', r.pick(['application/json', 'application/json; charset=latin1', 'APPLICATION/JSON'])]], mangled, framing)], mustAnswer: true, opts: {} };
}

const METHODS = ['GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'OPTIONS', 'HEAD', 'BREW', 'CONNECT', 'TRACE', 'G\u0000T', 'M'.repeat(100)];

function routeCase(r: Rng): RawCase {
  const paths = routePaths(r);
  let path: string = r.pick(paths);
  const mutation = r.int(10);
  if (mutation === 0) path += `?${r.pick(['token=', 'token=%zz', 'formats=' + ',png'.repeat(5000), 'fileSizeMb=-1', 'fileSizeBytes=1e400', 'category=%C0%AF', 'a=%'])}`;
  if (mutation === 1) path = path.replace(/\//g, r.pick(['//', '/./', '/%2F', '\\']));
  if (mutation === 2) path = `${path}/${'x'.repeat(r.pick([100, 8000, 20000]))}`;
  if (mutation === 3) path = r.pick(['*', 'http://evil/compress', '/%', '/%%30%30', '/compress/job/%E0%A4%A/download', '/\u00ff\u00fe']);
  if (mutation === 4) path = `/v${r.pick(['0', '1', '2', '999999999999', '-1', 'x'])}${path}`;
  const method = r.pick(METHODS);
  const headers: [string, string | Buffer][] = [...keyHeader(r)];
  const extra = r.int(8);
  if (extra === 0) headers.push(['X-Request-Id', r.pick(['ok-id', 'bad id\u0001', 'x'.repeat(500)])]);
  if (extra === 1) headers.push(['X-Big', 'v'.repeat(r.pick([1000, 17000, 70000]))]);
  if (extra === 2) for (let i = 0; i < 300; i++) headers.push([`X-H${i}`, 'v']);
  if (extra === 3) headers.push(['Origin', r.pick(['https://evil.example', 'null', '::::'])]);
  if (extra === 4) headers.push(['Bad Header', 'x'], ['Content-Length', '5'], ['Content-Length', '6']);
  if (extra === 5) headers.push(['Transfer-Encoding', 'chunked'], ['Content-Length', '3']);
  if (extra === 6) headers.push(['X-Forwarded-For', '1.2.3.4, ::1, garbage'], ['Authorization', 'Bearer x']);
  const body = r.chance(0.3) ? r.bytes(r.int(2000)) : null;
  return { kind: 'raw', name: `${method.slice(0, 10)} ${path.slice(0, 60)} (+${extra})`, chunks: [request(method, path, headers, body)], mustAnswer: !method.includes('\u0000'), head: method === 'HEAD', opts: {} };
}

function chunkedCase(r: Rng): RawCase {
  const head = request('POST', r.pick(['/compress', '/compress/job/x/cancel']), [...keyHeader(r), ['Content-Type', r.pick(['application/json', 'multipart/form-data; boundary=xx'])], ['Transfer-Encoding', r.pick(['chunked', 'gzip, chunked', 'chunked, chunked', 'identity'])]], null).subarray(0, -2);
  const bodies = [`zz${CRLF}abc${CRLF}0${CRLF}${CRLF}`, `5${CRLF}ab${CRLF}0${CRLF}${CRLF}`, `-1${CRLF}`, `ffffffffffffffff${CRLF}x${CRLF}`, `3;ext=${'e'.repeat(20000)}${CRLF}abc${CRLF}0${CRLF}${CRLF}`, `3${CRLF}abc0${CRLF}${CRLF}`, `0${CRLF}Trailer: ${'t'.repeat(30000)}${CRLF}${CRLF}`, `2\n{}\n0\n\n`];
  return { kind: 'raw', name: 'invalid chunked encoding', chunks: [head, b(CRLF), b(r.pick(bodies))], mustAnswer: false, opts: { halfClose: r.chance(0.8) } };
}

function garbageCase(r: Rng): RawCase {
  const kinds = [
    () => r.bytes(1 + r.int(4000)),
    () => b('GET / HTTP/1.1\r\n\r\n'.repeat(1 + r.int(3)).slice(0, -r.int(10) || undefined)),
    () => b(`GET /healthz HTTP/9.9${CRLF}${CRLF}`),
    () => b(`GET /healthz${CRLF}${CRLF}`),
    () => b(`\u0016\u0003\u0001\u0000\u00a5\u0001\u0000\u0000`),
    () => b(`PRI * HTTP/2.0${CRLF}${CRLF}SM${CRLF}${CRLF}`),
    () => b(`GET /healthz HTTP/1.1${CRLF}Host: a${CRLF}Upgrade: websocket${CRLF}Connection: Upgrade${CRLF}${CRLF}`),
  ];
  return { kind: 'raw', name: 'garbage bytes', chunks: [r.pick(kinds)()], mustAnswer: false, opts: { halfClose: r.chance(0.5) } };
}

function pipelineCase(r: Rng): RawCase {
  const reqs: Buffer[] = [];
  const n = 2 + r.int(6);
  let head = false;
  for (let i = 0; i < n; i++) {
    const sub = r.chance(0.7) ? routeCase(r) : multipartCase(r, i);
    head ||= sub.head === true;
    // All but the last keep the connection open, so the server reads the next request from the same stream.
    const bytes = Buffer.concat(sub.chunks).toString('latin1');
    reqs.push(Buffer.from(i < n - 1 ? bytes.replace('Connection: close\r\n', 'Connection: keep-alive\r\n') : bytes, 'latin1'));
  }
  return { kind: 'raw', name: `${n} pipelined requests`, chunks: [Buffer.concat(reqs)], mustAnswer: false, head, opts: { halfClose: true } };
}

function downloadCase(r: Rng): RawCase {
  const path = r.pick([`/compress/job/${jobId}/download`, `/compress/job/${jobId}/compare`, `/api/compress/job/${jobId}/download?token=abc`]);
  return { kind: 'raw', name: `aborted download ${path}`, chunks: [request('GET', path, [['X-Service-Api-Key', s.key]], null)], mustAnswer: false, opts: { readLimit: 1 + r.int(300) } };
}

function fetchCase(r: Rng): FetchCase {
  const kind = r.int(4);
  if (kind === 0) {
    // An upload whose body stream fails midway: the client is gone.
    const form = new FormData();
    form.set('file', new Blob([png]), 'a.png');
    return { kind: 'fetch', name: 'fetch: aborted upload', path: '/compress', init: { method: 'POST', body: form }, abort: 'upload' };
  }
  if (kind === 1) return { kind: 'fetch', name: 'fetch: aborted download', path: `/compress/job/${jobId}/download`, init: {}, abort: 'download' };
  if (kind === 2) {
    const form = new FormData();
    for (let i = 0; i < r.int(40); i++) {
      const field = r.pick(['file', 'options', 'webhookUrl', 'x']);
      if (r.chance(0.5)) form.append(field, new Blob([r.bytes(r.int(200))]), r.pick(['a.png', 'b.jpg', 'c', '\u0000.png']));
      else form.append(field, 'v');
    }
    return { kind: 'fetch', name: 'fetch: random form', path: r.pick(['/compress', '/compress/gif']), init: { method: 'POST', body: form } };
  }
  return { kind: 'fetch', name: 'fetch: route', path: r.pick(routePaths(r)), init: { method: r.pick(['GET', 'POST', 'DELETE', 'PUT']), key: r.pick([s.key, null, 'nope']) } };
}

function generate(r: Rng, n: number): Case {
  const k = r.int(100);
  if (k < 40) return multipartCase(r, n);
  if (k < 52) return jsonCase(r);
  if (k < 74) return routeCase(r);
  if (k < 80) return chunkedCase(r);
  if (k < 85) return garbageCase(r);
  if (k < 89) return pipelineCase(r);
  if (k < 92) return downloadCase(r);
  return fetchCase(r);
}

async function runFetch(c: FetchCase, inv: Invariants): Promise<void> {
  const controller = new AbortController();
  let init = c.init;
  if (c.abort === 'upload') {
    const encoded = new Response(c.init.body as FormData);
    const contentType = encoded.headers.get('content-type')!;
    const data = Buffer.from(await encoded.arrayBuffer());
    const body = new ReadableStream({
      start(ctl) {
        ctl.enqueue(data.subarray(0, data.length >> 1));
        setTimeout(() => ctl.error(new Error('client went away')), 5);
      },
    });
    init = { method: 'POST', body, headers: { 'content-type': contentType }, duplex: 'half' } as RequestInit;
  }
  try {
    const res = await s.api(c.path, { ...init, signal: controller.signal, key: c.init.key });
    if (c.abort === 'download') {
      const reader = res.body!.getReader();
      await reader.read();
      controller.abort();
      inv.response(c.name, res.status, '');
      return;
    }
    inv.response(c.name, res.status, Buffer.from(await res.arrayBuffer()), s.key, c.init.method !== 'HEAD');
  } catch (err) {
    if (!c.abort) inv.violation(c.name, `fetch failed: ${(err as Error).message}`);
  }
}

async function runRaw(c: RawCase, inv: Invariants): Promise<void> {
  const { data, ending } = await rawExchange(s.service.port, c.chunks, { waitMs: c.mustAnswer ? 2000 : 150, ...c.opts });
  const responses = parseResponses(data);
  // A reset while the client still sends is the server refusing to read an invalid body any further.
  const refusedToRead = /EPIPE|ECONNRESET/.test(ending);
  if (c.mustAnswer && responses.length === 0 && !refusedToRead) inv.violation(c.name, `no answer to a complete request: ${ending} (got ${JSON.stringify(data.subarray(0, 80).toString('latin1'))})`);
  // A HEAD answer has no body; a pipelined exchange's answers are checked one by one.
  for (const res of responses) inv.response(c.name, res.status, res.body, c.key, !c.head);
}

it('survives malformed requests on every route', { timeout: 600_000 }, async () => {
  const { seed, cases } = fuzzSettings('HTTP fuzzer', 2400);
  const r = new Rng(seed);
  const inv = new Invariants(s);
  const all: Case[] = [];
  for (let n = 0; n < cases; n++) all.push(generate(r, n));
  const started = Date.now();
  const lanes = 8;
  let next = 0;
  let sent = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < all.length) {
        const c = all[next++]!;
        const name = `#${next - 1} ${c.name}`;
        if (c.kind === 'raw') await runRaw({ ...c, name }, inv);
        else await runFetch({ ...c, name }, inv);
        await inv.alive(name);
        sent += 2;
        if (inv.violations.length >= 50) return;
      }
    }),
  );
  const elapsed = Date.now() - started;
  await inv.settle(120_000);
  console.log(`HTTP fuzzer: ${cases} cases (${sent} requests with the liveness probes) in ${(elapsed / 1000).toFixed(1)} s`);
  inv.report();
});

it('answers the issue #16 upload that ends inside the file part with 400 and keeps serving', async () => {
  const body = Buffer.concat([b('--xx\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n'), Buffer.from([0xff, 0xd8]), b(' partial')]);
  const res = await s.api('/compress', { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=xx' }, body });
  assert.equal(res.status, 400);
  assert.equal((await json(res)).error, 'request.invalid_body');
  assert.equal((await s.api('/compress/compressors')).status, 200);
  const inv = new Invariants(s);
  await inv.spoolHoldsOnlyLiveJobs('issue #16', [s.key, guestKey]);
  inv.report();
});

describe('requests the app never sees are answered in the envelope', () => {
  const cases: [name: string, raw: string, status: number, code: string][] = [
    ['CONNECT', 'CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n', 405, 'request.method_not_allowed'],
    ['no Host header', 'GET /healthz HTTP/1.1\r\n\r\n', 400, 'request.malformed'],
    ['an invalid chunk size', 'POST /compress HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 400, 'request.malformed'],
    ['two different Content-Lengths', 'POST /compress HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab', 400, 'request.malformed'],
    ['the request target *', 'OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n', 400, 'request.malformed'],
    ['headers over 16 KB', `GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: ${'v'.repeat(20_000)}\r\n\r\n`, 431, 'request.headers_too_large'],
  ];
  for (const [name, raw, status, code] of cases) {
    it(`${name}: ${status} ${code}`, async () => {
      const { data } = await rawExchange(s.service.port, [Buffer.from(raw, 'latin1')], { waitMs: 2000, halfClose: true });
      const [res] = parseResponses(data);
      assert.equal(res?.status, status);
      assert.equal(JSON.parse(String(res!.body)).error, code);
    });
  }
});
