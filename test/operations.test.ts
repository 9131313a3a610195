// Operations (issue 12): health, readiness, metrics, request ids, OpenAPI, disk guard, configuration.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { resolveConfig, SETTINGS } from '../src/config.ts';
import { CORPUS, fileForm, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';

const run = promisify(execFile);
let s: TestServer;
before(async () => {
  s = await startTestServer({ metricsToken: 'metrics-secret-1' });
});
after(() => s.stop());

describe('health and readiness', () => {
  it('answers /healthz and /readyz without a key', async () => {
    assert.deepEqual(await json(await s.api('/healthz', { key: null })), { status: 'ok' });
    const ready = await s.api('/readyz', { key: null });
    assert.equal(ready.status, 200);
    assert.equal((await json(ready)).status, 'ready');
  });

  it('is not ready, and refuses new jobs with 503 server.insufficient_storage, when disk space is below the threshold', async () => {
    const full = await startTestServer({ minFreeDiskBytes: String(Number.MAX_SAFE_INTEGER) });
    try {
      const ready = await full.api('/readyz', { key: null });
      assert.equal(ready.status, 503);
      assert.match((await json(ready)).reasons.join(' '), /low disk space/);
      const res = await full.api('/compress', { method: 'POST', body: await fileForm(join(CORPUS, 'jpg/jpeg420exif.jpg')) });
      assert.equal(res.status, 503);
      const body = await json(res);
      assert.equal(body.error, 'server.insufficient_storage');
      // No figures: not "needs 0 MB; 0 MB are free" for a small upload, and no exact room to fill (issue 41).
      assert.equal(body.detail, 'Not enough free disk space for this upload now; try again later.');
      assert.ok(res.headers.get('retry-after'));
    } finally {
      await full.stop();
    }
  });
});

describe('metrics', () => {
  it('requires the bearer token when one is set', async () => {
    assert.equal((await s.api('/metrics', { key: null })).status, 401);
    assert.equal((await s.api('/metrics', { key: null, headers: { authorization: 'Bearer wrong' } })).status, 401);
  });

  it('counts jobs, bytes and requests in Prometheus text format', async () => {
    const accepted = await json(await s.api('/compress', { method: 'POST', body: await fileForm(join(CORPUS, 'jpg/jpeg420exif.jpg')) }));
    await waitForJob(s, accepted.id);
    const res = await s.api('/metrics', { key: null, headers: { authorization: 'Bearer metrics-secret-1' } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/plain/);
    const text = await res.text();
    assert.match(text, /compressd_jobs_total\{job_type="image.jpg-compress",status="Succeeded"\} 1/);
    assert.match(text, /compressd_input_bytes_total\{job_type="image.jpg-compress"\} \d+/);
    assert.match(text, /compressd_saved_bytes_total/);
    assert.match(text, /compressd_job_duration_seconds_bucket/);
    assert.match(text, /compressd_job_queue_wait_seconds_count 1/);
    assert.match(text, /compressd_jobs_queued 0/);
    assert.match(text, /compressd_http_requests_total\{method="POST",status="202"\} 1/);
  });
});

describe('request ids', () => {
  it('returns a request id on every answer, keeping a sane client one', async () => {
    const own = await s.api('/compress/compressors', { headers: { 'x-request-id': 'trace-123' } });
    assert.equal(own.headers.get('x-request-id'), 'trace-123');
    const made = await s.api('/compress/job/nope');
    assert.match(made.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
    const bad = await s.api('/compress/compressors', { headers: { 'x-request-id': 'has spaces and <tags>' } });
    assert.notEqual(bad.headers.get('x-request-id'), 'has spaces and <tags>');
  });
});

describe('OpenAPI', () => {
  it('documents every route the server has, with its error codes and the catalog schemas', async () => {
    const doc = await json(await s.api('/openapi.json', { key: null }));
    assert.equal(doc.openapi, '3.1.0');
    const documented = new Set(Object.entries(doc.paths).flatMap(([p, ops]: [string, any]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)));
    const served = s.service.routes().filter((r) => r.method !== 'ALL' && !r.path.includes('*')).map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`);
    for (const route of served) assert.ok(documented.has(route), `${route} is served but not documented`);
    assert.ok(doc.paths['/compress'].post.responses['402'].description.includes('entitlements.insufficient_credits'));
    assert.ok(doc.components.schemas.Options.properties.resize);
    assert.ok(doc.components.schemas['Options_image.png-compress'].properties.compression);
    const page = await s.api('/docs', { key: null });
    assert.equal(page.status, 200);
    assert.match(await page.text(), /openapi\.json/);
  });

  it('serves /docs with the page headers: no framing, no sniffing, and a CSP that allows only its own inline script and style', async () => {
    const page = await s.api('/docs', { key: null });
    const html = await page.text();
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
    const csp = Object.fromEntries(page.headers.get('content-security-policy')!.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...sources]) => [name, sources]));
    assert.deepEqual([csp['default-src'], csp['frame-ancestors'], csp['connect-src']], [["'none'"], ["'none'"], ["'self'"]]);
    const hashOf = (tag: string) => `'sha256-${createHash('sha256').update(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(html)![1]!).digest('base64')}'`;
    assert.deepEqual(csp['script-src'], [hashOf('script')], 'the inline script, by its hash');
    assert.deepEqual(csp['style-src'], [hashOf('style')]);
  });
});

describe('configuration', () => {
  it('lists every setting with its environment twin and default in serve --help', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--help']);
    for (const setting of SETTINGS) assert.match(stdout, new RegExp(`--${setting.flag}(?: \\S+)? +${setting.env}\\n(?: {8}.*\\n)*? {8}.*\\(default:`));
  });

  it('takes an account disk share above 0 and at most 1, and a body rate of 0 (no minimum)', () => {
    assert.equal(resolveConfig({}, { COMPRESSD_ACCOUNT_DISK_SHARE: '0.25' }).accountDiskShare, 0.25);
    assert.throws(() => resolveConfig({ 'account-disk-share': '1.5' }, {}), /--account-disk-share: expected a share of at most 1/);
    assert.throws(() => resolveConfig({ 'account-disk-share': '0' }, {}), /--account-disk-share: expected a number > 0/);
    assert.equal(resolveConfig({ 'body-min-bytes-per-second': '0' }, {}).bodyMinBytesPerSecond, 0);
  });

  it('takes a config file below flags and environment', async () => {
    const config = resolveConfig({ port: '9001' }, { COMPRESSD_RETENTION_SECONDS: '60' }, { port: 9000, retentionSeconds: 10, workers: 3 });
    assert.equal(config.port, 9001);
    assert.equal(config.retentionSeconds, 60);
    assert.equal(config.workers, 3);
    assert.throws(() => resolveConfig({}, {}, { colour: 'blue' }, 'my.json'), /my.json: unknown setting colour/);
  });

  const invalid: [string[], Record<string, string>, RegExp][] = [
    [['--port', 'abc'], {}, /--port: expected a whole number/],
    [[], { COMPRESSD_WEBHOOK_RETRY_DELAYS: '1,x' }, /COMPRESSD_WEBHOOK_RETRY_DELAYS: expected comma-separated seconds/],
    [['--no-such-flag'], {}, /Unknown option '--no-such-flag'/],
    [['--trust-proxy', 'maybe'], {}, /--trust-proxy: expected a hop count, proxy IPs\/CIDRs separated by commas, or true\/false, got "maybe"/],
    [[], { COMPRESSD_TRUST_PROXY: '10.0.0.0/99' }, /COMPRESSD_TRUST_PROXY: expected a hop count/],
  ];
  for (const [args, env, message] of invalid) {
    it(`stops start-up with one clear line for ${[...args, ...Object.keys(env)].join(' ')}`, async () => {
      const dir = await mkdtemp(join(tmpdir(), 'compressd-cfg-'));
      const res = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--data-dir', dir, ...args], { env: { ...process.env, ...env } }).catch((e) => e);
      assert.equal(res.code, 2);
      assert.match(res.stderr, message);
      assert.equal(res.stderr.trim().split('\n').length, 1);
    });
  }

  it('reads --config files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-cfg-'));
    const file = join(dir, 'bad.json');
    await writeFile(file, '{"port": "nope"}');
    const res = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--data-dir', dir, '--config', file]).catch((e) => e);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /bad.json: port: expected a whole number/);
  });
});
