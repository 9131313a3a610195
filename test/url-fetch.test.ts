import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { buildConnector } from 'undici';
import { ApiError } from '../src/errors.ts';
import { FETCH_DEFAULTS, type FetchConfig } from '../src/fetch/config.ts';
import { UrlFetcher } from '../src/fetch/fetch-input.ts';
import { waitUntil } from './helpers/poll.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const JPG = '/work/shared/corpus/jpg/baiona_cmyk.jpg';
const PDF = '/work/shared/corpus/pdf/ocrmypdf-cardinal-scan.pdf';

let jpg: Buffer;
let pdf: Buffer;
let dir: string;
/** Open responses of `/hold/*`, released by tests. */
const held = new Map<string, ServerResponse>();

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function route(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'https://x');
  const p = url.pathname;
  const redirect = (to: string, status = 302) => {
    res.writeHead(status, { location: to });
    res.end();
  };
  if (p === '/files/photo.jpg' || p === '/o/abc123' || p === '/' || p === '/dir/' || p === '/o/photo.jpeg') {
    res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': jpg.length });
    res.end(jpg);
  } else if (p === '/download') {
    res.writeHead(200, { 'content-type': 'application/pdf', 'content-disposition': `attachment; filename="scan.pdf"; filename*=UTF-8''Scan%20%C3%A9t%C3%A9.pdf` });
    res.end(pdf);
  } else if (p.startsWith('/chain/')) {
    const n = Number(p.split('/')[2]);
    if (n === 0) redirect('/files/photo.jpg', 307);
    else redirect(`/chain/${n - 1}`, n % 2 ? 301 : 308);
  } else if (p === '/loop') {
    redirect('/loop');
  } else if (p === '/to') {
    redirect(url.searchParams.get('u')!, Number(url.searchParams.get('s') ?? 302));
  } else if (p === '/no-location') {
    res.writeHead(302);
    res.end();
  } else if (p.startsWith('/status/')) {
    res.writeHead(Number(p.split('/')[2]), { 'content-type': 'text/plain' });
    res.end('nope');
  } else if (p.startsWith('/bucket/')) {
    const kind = p.split('/')[2];
    const bodies: Record<string, [number, string]> = {
      s3: [403, '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Request has expired</Message><X-Amz-Expires>60</X-Amz-Expires><Expires>2024-01-01T00:01:00Z</Expires><ServerTime>2025-01-01T00:00:00Z</ServerTime></Error>'],
      gcs: [400, "<?xml version='1.0' encoding='UTF-8'?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message><Details>Request signature expired at: 2024-01-01T00:01:00+00:00</Details></Error>"],
      azure: [403, '\ufeff<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code><Message>Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.</Message><AuthenticationErrorDetail>Signature not valid in the specified time frame: Start [Mon, 01 Jan 2024 00:00:00 GMT] - Expiry [Mon, 01 Jan 2024 01:00:00 GMT] - Current [Wed, 01 Jan 2025 00:00:00 GMT]</AuthenticationErrorDetail></Error>'],
      denied: [403, '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'],
      bare: [403, ''],
    };
    const [status, body] = bodies[kind!]!;
    res.writeHead(status, { 'content-type': 'application/xml' });
    res.end(body);
  } else if (p === '/empty') {
    res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': 0 });
    res.end();
  } else if (p === '/empty-chunked') {
    res.writeHead(200, { 'content-type': 'image/jpeg' });
    res.end();
  } else if (p === '/big-declared') {
    res.writeHead(200, { 'content-length': jpg.length });
    res.end(jpg);
  } else if (p === '/big-streamed') {
    res.writeHead(200, { 'content-type': 'image/jpeg' });
    res.write(jpg.subarray(0, 60_000));
    setTimeout(() => res.end(jpg.subarray(60_000)), 50);
  } else if (p === '/hang') {
    held.set(p, res);
  } else if (p === '/stall-body') {
    res.writeHead(200, { 'content-type': 'image/jpeg' });
    res.write(jpg.subarray(0, 1000));
    held.set(p, res);
  } else if (p === '/trickle') {
    res.writeHead(200, { 'content-type': 'image/jpeg' });
    let i = 0;
    const t = setInterval(() => {
      if (res.destroyed || i >= 50) {
        clearInterval(t);
        res.end();
      } else res.write(jpg.subarray(i * 10, ++i * 10));
    }, 60);
  } else if (p.startsWith('/hold/')) {
    res.writeHead(200, { 'content-type': 'image/jpeg' });
    res.write(jpg.subarray(0, 100));
    held.set(p, res);
  } else {
    res.writeHead(404);
    res.end();
  }
}

/** Every connection the guard let through: the original host[:port] and the address actually dialled. */
const connects: { host: string; hostname: string }[] = [];

function config(overrides: Partial<FetchConfig> = {}): FetchConfig {
  const real = buildConnector({ ca: server.ca.caPem, timeout: 2000 });
  return {
    ...FETCH_DEFAULTS,
    urlAllow: ['files.test', 'other.test', 'slow.files.test'],
    dnsOverrides: {
      'files.test': '127.0.0.1',
      'other.test': '127.0.0.1',
      'slow.files.test': '127.0.0.1',
      'evil.test': '127.0.0.1',
      'localhost': '127.0.0.1',
      'private.test': '10.0.0.1',
      'metadata.test': '169.254.169.254',
      'v6.test': '::1',
      'mapped.test': '::ffff:127.0.0.1',
    },
    resolve: async (host) => {
      if (host === 'mixed.test') return ['93.184.216.34', '192.168.1.20'];
      if (host === 'mixed-loop.test') return ['93.184.216.34', '127.0.0.1'];
      if (host === 'servfail.test') throw Object.assign(new Error('servfail'), { code: 'EAI_AGAIN' });
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    },
    connector: (opts, cb) => {
      connects.push({ host: opts.host ?? '', hostname: opts.hostname });
      real(opts, cb);
    },
    connectTimeoutMs: 2000,
    headersTimeoutMs: 400,
    bodyTimeoutMs: 400,
    ...overrides,
  };
}

const server: TestHttpsServer = await startTestHttpsServer(route);
let fetcher: UrlFetcher;
let n = 0;
const dest = () => join(dir, `in-${++n}`);
const U = (host: string, path = '/files/photo.jpg') => server.url(host, path);

async function expectCode(p: Promise<unknown>, code: string, retryable: boolean, status = 400): Promise<ApiError> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ApiError, `expected ApiError ${code}, got ${String(err)}`);
  assert.equal(err.code, code, err.detail ?? '');
  assert.equal(err.status, status);
  assert.equal(err.extra.isRetryable, retryable, `isRetryable of ${code}`);
  return err;
}

function get(url: string, extra: Partial<{ maxBytes: number; accountId: string; sourceFormat: string; destPath: string }> = {}, f = fetcher) {
  return f.fetchToFile(url, { destPath: dest(), maxBytes: 10_000_000, accountId: 'acct', sourceFormat: 'jpg', ...extra });
}

before(async () => {
  [jpg, pdf] = await Promise.all([readFile(JPG), readFile(PDF)]);
  dir = await mkdtemp(join(tmpdir(), 'compressd-url-fetch-'));
  fetcher = new UrlFetcher(config());
});

after(async () => {
  for (const r of held.values()) r.destroy();
  await fetcher.close();
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

describe('downloads', () => {
  test('a file is streamed to disk byte for byte, named from the URL path', async () => {
    const destPath = dest();
    const r = await get(U('files.test'), { destPath });
    assert.equal(r.bytes, jpg.length);
    assert.equal(r.fileName, 'photo.jpg');
    assert.equal(r.contentType, 'image/jpeg');
    assert.equal(sha(await readFile(destPath)), sha(jpg));
    assert.equal(connects.at(-1)?.hostname, '127.0.0.1', 'dialled the vetted address');
  });

  test('Content-Disposition names the file (RFC 8187 form preferred)', async () => {
    const destPath = dest();
    const r = await get(U('files.test', '/download'), { destPath, sourceFormat: 'pdf' });
    assert.equal(r.fileName, 'Scan été.pdf');
    assert.equal(sha(await readFile(destPath)), sha(pdf));
  });

  test('a path without extension takes sourceFormat; one with another spelling is renamed to it', async () => {
    assert.equal((await get(U('files.test', '/o/abc123'), { sourceFormat: 'jpg' })).fileName, 'abc123.jpg');
    assert.equal((await get(U('files.test', '/o/photo.jpeg'))).fileName, 'photo.jpg');
  });

  test('no_filename when neither header nor path names a file; nothing is written', async () => {
    for (const path of ['/', '/dir/']) {
      const destPath = dest();
      await expectCode(get(U('files.test', path), { destPath }), 'url_fetch.no_filename', false);
      assert.equal(existsSync(destPath), false);
    }
  });

  test('the vetted address is pinned: one lookup per connection, the socket dials that address, TLS and Host keep the name', async () => {
    const answers = ['127.0.0.1', '10.0.0.9'];
    let lookups = 0;
    const rebinding = () => config({ urlAllow: ['127.0.0.0/8'], resolve: async () => [answers[Math.min(lookups++, 1)]!] });
    const f = new UrlFetcher(rebinding());
    try {
      const r = await get(server.url('rebind.files.test', '/files/photo.jpg'), {}, f);
      assert.equal(r.bytes, jpg.length);
      assert.equal(lookups, 1);
      assert.deepEqual(connects.at(-1), { host: `rebind.files.test:${server.port}`, hostname: '127.0.0.1' });
      assert.equal(server.requests.at(-1)?.host, `rebind.files.test:${server.port}`);
    } finally {
      await f.close();
    }
    // A new connection resolves again and meets the rebound (private) answer: refused, nothing dialled.
    const g = new UrlFetcher(rebinding());
    const dialled = connects.length;
    try {
      await expectCode(get(server.url('rebind.files.test', '/files/photo.jpg'), {}, g), 'url_fetch.private_ip', false);
      assert.equal(connects.length, dialled);
    } finally {
      await g.close();
    }
  });

  test('a CIDR entry of COMPRESSD_URL_ALLOW opens an IP literal', async () => {
    const f = new UrlFetcher(config({ urlAllow: ['127.0.0.0/8'] }));
    try {
      const r = await get(U('127.0.0.1'), {}, f);
      assert.equal(r.bytes, jpg.length);
    } finally {
      await f.close();
    }
  });
});

describe('redirects', () => {
  test('up to 3 hops are followed (301, 308, 307); the name comes from the final URL', async () => {
    const before = server.requests.length;
    const r = await get(U('files.test', '/chain/2'));
    assert.equal(r.bytes, jpg.length);
    assert.equal(r.fileName, 'photo.jpg');
    assert.equal(r.finalUrl, U('files.test'));
    assert.equal(server.requests.length - before, 4);
  });

  test('a 4th redirect is redirect_loop, and is not followed', async () => {
    const before = server.requests.length;
    await expectCode(get(U('files.test', '/chain/3')), 'url_fetch.redirect_loop', false);
    assert.equal(server.requests.length - before, 4);
  });

  test('a self-redirect is redirect_loop at once', async () => {
    const before = server.requests.length;
    await expectCode(get(U('files.test', '/loop')), 'url_fetch.redirect_loop', false);
    assert.equal(server.requests.length - before, 1);
  });

  test('across hosts: an allowed target is followed', async () => {
    const r = await get(U('files.test', `/to?u=${encodeURIComponent(U('other.test', '/download'))}`), { sourceFormat: 'pdf' });
    assert.equal(r.fileName, 'Scan été.pdf');
  });

  const denied: [string, string][] = [
    ['an IP literal on loopback', U('127.0.0.1')],
    ['a name that resolves to loopback', U('evil.test')],
    ['a name that resolves to 10/8', U('private.test')],
    ['the cloud metadata address', 'https://169.254.169.254/latest/meta-data/'],
    ['an IPv6 loopback', U('::1')],
    ['an IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]:443/x.jpg'],
    ['plain http', U('files.test').replace('https:', 'http:')],
    ['a file: URL', 'file:///etc/passwd'],
  ];
  for (const [what, target] of denied) {
    test(`redirect_denied for ${what}; the target gets nothing`, async () => {
      const targetHost = new URL(target).host;
      const before = server.requests.length;
      const dialled = connects.length;
      await expectCode(get(U('files.test', `/to?u=${encodeURIComponent(target)}`)), 'url_fetch.redirect_denied', false);
      assert.equal(server.requests.length - before, 1, 'only the redirecting request reached the server');
      assert.ok(!connects.slice(dialled).some((c) => c.host === targetHost), 'no connection to the target');
    });
  }

  test('a redirect without Location is an http_error', async () => {
    await expectCode(get(U('files.test', '/no-location')), 'url_fetch.http_error', false);
  });
});

describe('SSRF: refused before any connection', () => {
  const vectors: [string, string][] = [
    ['loopback literal', U('127.0.0.1')],
    ['localhost', U('localhost')],
    ['a name mapped to loopback but not allowed', U('evil.test')],
    ['decimal 2130706433', U('2130706433')],
    ['hex 0x7f000001', U('0x7f000001')],
    ['octal 0177.0.0.1', U('0177.0.0.1')],
    ['short 127.1', U('127.1')],
    ['mixed 0x7f.0.0.1', U('0x7f.0.0.1')],
    ['IPv6 loopback', U('::1')],
    ['IPv6 unspecified', U('::')],
    ['IPv4-mapped', 'https://[::ffff:127.0.0.1]/x.jpg'],
    ['IPv4-compatible', 'https://[::127.0.0.1]/x.jpg'],
    ['NAT64', 'https://[64:ff9b::127.0.0.1]/x.jpg'],
    ['6to4', 'https://[2002:7f00:1::1]/x.jpg'],
    ['Teredo', 'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/x.jpg'],
    ['10/8', 'https://10.0.0.1/x.jpg'],
    ['172.16/12', 'https://172.16.5.4/x.jpg'],
    ['192.168/16', 'https://192.168.1.1/x.jpg'],
    ['169.254 metadata', 'https://169.254.169.254/latest/meta-data/'],
    ['100.64/10', 'https://100.64.0.1/x.jpg'],
    ['0/8', 'https://0.0.0.0/x.jpg'],
    ['192.0.0/24', 'https://192.0.0.170/x.jpg'],
    ['198.18/15', 'https://198.18.0.1/x.jpg'],
    ['multicast', 'https://224.0.0.251/x.jpg'],
    ['240/4', 'https://240.0.0.1/x.jpg'],
    ['broadcast', 'https://255.255.255.255/x.jpg'],
    ['fc00::/7', 'https://[fd00::1]/x.jpg'],
    ['fe80::/10', 'https://[fe80::1]/x.jpg'],
    ['ff00::/8', 'https://[ff02::1]/x.jpg'],
    ['NAT64 of 10.0.0.1', 'https://[64:ff9b::a00:1]/x.jpg'],
    ['DNS → 10.0.0.1', 'https://private.test/x.jpg'],
    ['DNS → metadata', 'https://metadata.test/x.jpg'],
    ['DNS → ::1', 'https://v6.test/x.jpg'],
    ['DNS → ::ffff:127.0.0.1', 'https://mapped.test/x.jpg'],
    ['DNS → public + 192.168 (one bad record is enough)', 'https://mixed.test/x.jpg'],
    ['DNS → public + loopback', U('mixed-loop.test')],
  ];
  for (const [what, url] of vectors) {
    test(`${what}: private_ip`, async () => {
      const requests = server.requests.length;
      const accepted = server.connections();
      const dialled = connects.length;
      await expectCode(get(url), 'url_fetch.private_ip', false);
      assert.equal(connects.length, dialled, 'the connector was never called');
      assert.equal(server.connections(), accepted, 'the loopback server saw no connection');
      assert.equal(server.requests.length, requests);
    });
  }
});

describe('failures', () => {
  for (const [status, retryable] of [[404, false], [403, false], [410, false], [429, true], [500, true], [502, true], [503, true]] as const) {
    test(`HTTP ${status} → http_error, isRetryable ${retryable}`, async () => {
      const destPath = dest();
      await expectCode(get(U('other.test', `/status/${status}`), { destPath }), 'url_fetch.http_error', retryable);
      assert.equal(existsSync(destPath), false);
    });
  }

  for (const kind of ['s3', 'gcs', 'azure']) {
    test(`an expired ${kind} presigned URL → url_expired`, async () => {
      await expectCode(get(U('files.test', `/bucket/${kind}/a.jpg`)), 'url_fetch.url_expired', false);
    });
  }
  test('a bare 403 to a URL whose signature lifetime has passed → url_expired', async () => {
    await expectCode(get(U('files.test', '/bucket/bare/a.jpg?X-Amz-Date=20240101T000000Z&X-Amz-Expires=60&X-Amz-Signature=ab')), 'url_fetch.url_expired', false);
  });
  test('access denied on an unexpired URL stays http_error', async () => {
    await expectCode(get(U('files.test', '/bucket/denied/a.jpg')), 'url_fetch.http_error', false);
  });

  test('empty body → invalid_content, with or without Content-Length', async () => {
    for (const path of ['/empty', '/empty-chunked']) {
      const destPath = dest();
      await expectCode(get(U('files.test', path), { destPath }), 'url_fetch.invalid_content', false);
      assert.equal(existsSync(destPath), false);
    }
  });

  test('too_large from Content-Length, before the body is read', async () => {
    const destPath = dest();
    await expectCode(get(U('files.test', '/big-declared'), { destPath, maxBytes: 50_000 }), 'url_fetch.too_large', false);
    assert.equal(existsSync(destPath), false);
  });

  test('too_large while streaming; the partial file is removed', async () => {
    const destPath = dest();
    await expectCode(get(U('files.test', '/big-streamed'), { destPath, maxBytes: 100_000 }), 'url_fetch.too_large', false);
    assert.equal(existsSync(destPath), false);
  });

  test('exactly at the cap is fine', async () => {
    assert.equal((await get(U('files.test'), { maxBytes: jpg.length })).bytes, jpg.length);
  });

  test('headers too slow → timeout', async () => {
    await expectCode(get(U('slow.files.test', '/hang')), 'url_fetch.timeout', true);
  });

  test('body stalls → timeout, partial file removed', async () => {
    const destPath = dest();
    await expectCode(get(U('slow.files.test', '/stall-body'), { destPath }), 'url_fetch.timeout', true);
    assert.equal(existsSync(destPath), false);
  });

  test('a trickle that never stalls still hits the overall deadline', async () => {
    const f = new UrlFetcher(config({ totalTimeoutMs: 500 }));
    try {
      await expectCode(get(U('slow.files.test', '/trickle'), {}, f), 'url_fetch.timeout', true);
    } finally {
      await f.close();
    }
  });

  test('DNS failures → dns_failure (retryable only when transient)', async () => {
    await expectCode(get('https://nx.test/a.jpg'), 'url_fetch.dns_failure', false);
    await expectCode(get('https://servfail.test/a.jpg'), 'url_fetch.dns_failure', true);
  });

  test('connection refused → http_error, retryable', async () => {
    const f = new UrlFetcher(config({ urlAllow: ['closed.test'], dnsOverrides: { 'closed.test': '127.0.0.1' } }));
    try {
      // Port 1 on loopback: nothing listens there.
      await expectCode(get('https://closed.test:1/a.jpg', {}, f), 'url_fetch.http_error', true);
    } finally {
      await f.close();
    }
  });

  test('an untrusted certificate → http_error, not retryable', async () => {
    const f = new UrlFetcher({ ...config(), connector: undefined, ca: undefined });
    try {
      const e = await expectCode(get(U('files.test'), {}, f), 'url_fetch.http_error', false);
      assert.match(e.detail ?? '', /TLS/);
    } finally {
      await f.close();
    }
  });

  test('a caller abort is passed through, and the partial file removed', async () => {
    const ac = new AbortController();
    const destPath = dest();
    const p = fetcher.fetchToFile(U('slow.files.test', '/hold/abort'), { destPath, maxBytes: 1e7, accountId: 'abort', sourceFormat: 'jpg', signal: ac.signal });
    await waitUntil('the file server holds the request', () => held.has('/hold/abort'), { intervalMs: 10 });
    ac.abort(new Error('client went away'));
    await assert.rejects(p, /client went away/);
    assert.equal(existsSync(destPath), false);
  });
});

describe('limits', () => {
  test('per-account concurrent fetches: 429 rate_limited with Retry-After; other accounts unaffected', async () => {
    const f = new UrlFetcher(config({ maxConcurrentPerAccount: 1, bodyTimeoutMs: 5000 }));
    try {
      const first = get(U('slow.files.test', '/hold/rate'), { accountId: 'busy' }, f);
      await waitUntil('the file server holds the request', () => held.has('/hold/rate'), { intervalMs: 10 });
      const e = await expectCode(get(U('files.test'), { accountId: 'busy' }, f), 'url_fetch.rate_limited', true, 429);
      assert.equal(e.headers['Retry-After'], String(FETCH_DEFAULTS.rateLimitRetryAfterSeconds));
      assert.equal((await get(U('files.test'), { accountId: 'calm' }, f)).bytes, jpg.length);
      held.get('/hold/rate')!.end(jpg.subarray(100));
      assert.equal((await first).bytes, jpg.length);
      assert.equal((await get(U('files.test'), { accountId: 'busy' }, f)).bytes, jpg.length, 'the slot is released');
    } finally {
      await f.close();
    }
  });

  test('circuit breaker: repeated 5xx from one host open its circuit; no request reaches it while open', async () => {
    const f = new UrlFetcher(config({ circuitFailureThreshold: 3, circuitOpenMs: 60_000 }));
    try {
      for (let i = 0; i < 3; i++) await expectCode(get(U('other.test', '/status/503'), {}, f), 'url_fetch.http_error', true);
      const before = server.requests.length;
      const e = await expectCode(get(U('other.test', '/download'), {}, f), 'url_fetch.domain_circuit_open', true);
      assert.equal(e.headers['Retry-After'], '60');
      assert.equal(server.requests.length, before);
      assert.equal((await get(U('files.test'), {}, f)).bytes, jpg.length, 'other hosts are unaffected');
    } finally {
      await f.close();
    }
  });

  test('client errors (4xx) do not trip the breaker', async () => {
    const f = new UrlFetcher(config({ circuitFailureThreshold: 2 }));
    try {
      for (let i = 0; i < 4; i++) await expectCode(get(U('other.test', '/status/404'), {}, f), 'url_fetch.http_error', false);
      assert.equal((await get(U('other.test', '/download'), { sourceFormat: 'pdf' }, f)).bytes, pdf.length);
    } finally {
      await f.close();
    }
  });
});

describe('NODE_EXTRA_CA_CERTS', () => {
  test('a process started with it trusts the extra CA without FetchConfig.ca', async () => {
    const script = `
      const { fetchConfigFromEnv } = await import(${JSON.stringify(new URL('../src/fetch/config.ts', import.meta.url).href)});
      const { UrlFetcher } = await import(${JSON.stringify(new URL('../src/fetch/fetch-input.ts', import.meta.url).href)});
      const f = new UrlFetcher(fetchConfigFromEnv());
      try {
        const r = await f.fetchToFile(process.env.URL, { destPath: process.env.DEST, maxBytes: 1e7, accountId: 'a', sourceFormat: 'jpg' });
        console.log(JSON.stringify(r));
      } catch (e) { console.log(JSON.stringify({ error: e.code, detail: e.detail })); }
      await f.close();`;
    const run = (extraCa: boolean) =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: new URL('..', import.meta.url).pathname,
        env: {
          ...process.env,
          ...(extraCa ? { NODE_EXTRA_CA_CERTS: server.ca.caPath } : { NODE_EXTRA_CA_CERTS: '' }),
          COMPRESSD_URL_ALLOW: 'files.test',
          COMPRESSD_DNS_OVERRIDES: 'files.test=127.0.0.1',
          URL: U('files.test'),
          DEST: dest(),
        },
      });
    const [withCa, withoutCa] = await Promise.all([run(true), run(false)]);
    assert.deepEqual(JSON.parse(withCa.stdout).bytes, jpg.length, withCa.stdout + withCa.stderr);
    assert.equal(JSON.parse(withoutCa.stdout).error, 'url_fetch.http_error', withoutCa.stdout);
  });
});

