// Spec: "Authentication", "Versioning", "Errors" (envelope, unknown routes, rate limit), and the CLI's key management.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { waitUntil } from './helpers/poll.ts';
import { json, startTestServer, type TestServer } from './helpers/server.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { env: { ...process.env, COMPRESSD_DATA_DIR: '' } });

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.stop());

const INVALID = 'api_key.invalid_or_ip_not_allowed';

describe('API key', () => {
  const bad: [string, string | null][] = [
    ['missing', null],
    ['malformed', 'not-a-key'],
    ['unknown', 'cpd_0123456789ab_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
  ];
  for (const [what, key] of bad) {
    it(`answers 401 for a ${what} key, on every protected endpoint`, async () => {
      for (const [method, path] of [['GET', '/compress/compressors'], ['GET', '/compress/estimate/jpg'], ['POST', '/compress'], ['GET', '/compress/job/x'], ['GET', '/compress/entitlements/me']]) {
        const res = await s.api(path, { method, key });
        assert.equal(res.status, 401, `${method} ${path}`);
        assert.deepEqual(await json(res), { error: INVALID, detail: 'The API key is missing or invalid, or not allowed from this IP address.' });
      }
    });
  }

  it('refuses a key used from an address outside its allow list, identically', async () => {
    const key = s.newKey('restricted', { allowIps: '10.0.0.0/8, 2001:db8::/32' });
    const res = await s.api('/compress/compressors', { key });
    assert.equal(res.status, 401);
    assert.equal((await json(res)).error, INVALID);
    const loopbackKey = s.newKey('restricted', { allowIps: '127.0.0.0/8' });
    assert.equal((await s.api('/compress/compressors', { key: loopbackKey })).status, 200);
  });

  it('accepts a key created by the CLI while the server runs, and refuses it once revoked', async () => {
    // The server re-reads the registry the CLI appends to every 250 ms: each step polls for its effect.
    const balance = async () => {
      const res = await s.api('/compress/entitlements/me', { key });
      return res.status === 200 ? (await json(res)).balance : res.status;
    };
    const { stdout } = await cli('keys', 'create', '--data-dir', s.dataDir, '--account', 'cli-made', '--credits', '42');
    const key = stdout.trim().split('\n').pop()!;
    assert.equal(await balance(), 42, 'a new key works at once');

    await cli('credits', 'add', '--data-dir', s.dataDir, '--account', 'cli-made', '--amount', '8');
    await waitUntil('the grant reaches the server', async () => (await balance()) === 50, { timeoutMs: 10_000 });

    const list = (await cli('keys', 'list', '--data-dir', s.dataDir)).stdout;
    assert.match(list, /cli-made/);
    await cli('keys', 'revoke', '--data-dir', s.dataDir, key);
    await waitUntil('the revoke reaches the server', async () => (await balance()) === 401, { timeoutMs: 10_000 });
  });

  it('marks guest keys', async () => {
    const key = s.newKey('guesty', { guest: true });
    assert.equal((await json(await s.api('/compress/entitlements/me', { key }))).guest, true);
  });
});

describe('versioning', () => {
  const ok = ['/compress/compressors/v1', '/compress/compressors?version=1', '/compress/estimate/jpg/v1'];
  for (const path of ok) {
    it(`serves v1 at ${path}`, async () => assert.equal((await s.api(path)).status, 200));
  }
  it('accepts the version header', async () => {
    assert.equal((await s.api('/compress/compressors', { headers: { 'X-Service-Endpoint-Version': '1' } })).status, 200);
  });

  const bad: [string, Record<string, string>][] = [
    ['/compress/compressors/v2', {}],
    ['/compress/compressors?version=7', {}],
    ['/compress/compressors?version=abc', {}],
  ];
  for (const [path, headers] of bad) {
    it(`refuses an unknown version at ${path}`, async () => {
      const res = await s.api(path, { headers });
      assert.equal(res.status, 400);
      const body = await json(res);
      assert.equal(body.error, 'request.unsupported_version');
      assert.deepEqual(body.supportedVersions, [1]);
    });
  }
  it('refuses an unknown version header', async () => {
    const res = await s.api('/compress/compressors', { headers: { 'X-Service-Endpoint-Version': '3' } });
    assert.equal(res.status, 400);
  });
  it('gives the route suffix precedence over the query and the header', async () => {
    assert.equal((await s.api('/compress/compressors/v1?version=9', { headers: { 'X-Service-Endpoint-Version': '9' } })).status, 200);
    assert.equal((await s.api('/compress/compressors?version=1', { headers: { 'X-Service-Endpoint-Version': '9' } })).status, 200);
    assert.equal((await s.api('/compress/compressors/v9?version=1')).status, 400);
  });
});

describe('error envelope', () => {
  it('answers unknown routes with a 404 envelope', async () => {
    const res = await s.api('/compress/nothing/here/at/all');
    assert.equal(res.status, 404);
    const body = await json(res);
    assert.equal(body.error, 'route.not_found');
    assert.equal(typeof body.detail, 'string');
  });

  /** Any method, TRACE included (fetch refuses to send it). */
  const send = (method: string, path: string) =>
    new Promise<{ status: number; allow: string | undefined; body: Record<string, unknown> }>((resolve, reject) => {
      const req = request(s.url + path, { method, headers: { 'x-service-api-key': s.key } }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, allow: res.headers.allow, body: text ? JSON.parse(text) : {} }));
      });
      req.on('error', reject);
      req.end();
    });
  const wrongMethods: [method: string, path: string, allow: string][] = [
    ['TRACE', '/compress/compressors', 'GET, HEAD'],
    ['PUT', '/compress', 'GET, HEAD, POST'],
    ['DELETE', '/compress/schema', 'GET, HEAD'],
    ['PATCH', '/compress/job/1b4e28ba-2fa1-11d2-883f-0016d3cca427', 'DELETE, GET, HEAD'],
    ['GET', '/compress/jpg', 'POST'],
    ['OPTIONS', '/compress/job/x/cancel', 'POST'],
    ['POST', '/compress/compressors/v1', 'GET, HEAD'],
    ['DELETE', '/healthz', 'GET, HEAD'],
  ];
  for (const [method, path, allow] of wrongMethods) {
    it(`answers ${method} ${path} with 405 route.method_not_allowed and Allow: ${allow}`, async () => {
      const res = await send(method, path);
      assert.equal(res.status, 405);
      assert.equal(res.allow, allow);
      assert.equal(res.body.error, 'route.method_not_allowed');
      assert.equal(typeof res.body.detail, 'string');
    });
  }
  it('keeps 404 route.not_found for a path no method has', async () => {
    const res = await send('PUT', '/compress/nothing/here/at/all');
    assert.equal(res.status, 404);
    assert.equal(res.allow, undefined);
    assert.equal(res.body.error, 'route.not_found');
  });

  it('refuses cross-origin browser calls', async () => {
    const res = await s.api('/compress/compressors', { headers: { Origin: 'https://evil.example' } });
    assert.equal(res.status, 403);
    assert.equal((await json(res)).error, 'request.cross_origin');
  });
});

describe('IP rate limit', () => {
  it('answers 429 rate_limited with Retry-After past the limit', async () => {
    const limited = await startTestServer({ rateLimitPerMinute: '5' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 7; i++) statuses.push((await limited.api('/compress/schema', { key: null })).status);
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
      const res = await limited.api('/compress/schema', { key: null });
      assert.equal((await json(res)).error, 'rate_limited');
      assert.ok(Number(res.headers.get('retry-after')) >= 1);
      limited.clock.advance(45_000);
      const later = await limited.api('/compress/schema', { key: null });
      assert.equal(later.status, 429, 'the window lasts a minute by the service clock');
      const retry = Number(later.headers.get('retry-after'));
      assert.ok(retry >= 1 && retry <= 15, `Retry-After counts down with the clock: ${retry}`);
      limited.clock.advance(15_000);
      assert.equal((await limited.api('/compress/schema', { key: null })).status, 200, 'a new window once the clock passes the minute');
    } finally {
      await limited.stop();
    }
  });

  it('never limits the health and readiness probes of a busy address, nor counts them', async () => {
    const limited = await startTestServer({ rateLimitPerMinute: '3' });
    try {
      const probes = ['/healthz', '/readyz', '/healthz?version=1', '/readyz?version=1'];
      const before: number[] = [];
      for (let i = 0; i < 3; i++) for (const p of probes) before.push((await limited.api(p, { key: null })).status);
      assert.deepEqual(new Set(before), new Set([200]), 'probes do not use up the window');
      assert.equal((await limited.api('/compress/schema', { key: null })).status, 200);
      for (let i = 0; i < 3; i++) await limited.api('/compress/schema', { key: null });
      assert.equal((await limited.api('/compress/schema', { key: null })).status, 429, 'the address is over its limit');
      for (const p of probes) {
        const res = await limited.api(p, { key: null });
        assert.equal(res.status, 200, `${p} from a limited address`);
        assert.equal(res.headers.get('retry-after'), null);
      }
    } finally {
      await limited.stop();
    }
  });
});
