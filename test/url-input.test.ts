// Spec: "Submit a job" with URL input — end to end through the real server and a real HTTPS file server.
import assert from 'node:assert/strict';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CORPUS, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const JPG = join(CORPUS, 'jpg/jpeg420exif.jpg');
let files: TestHttpsServer;
let s: TestServer;

before(async () => {
  files = await startTestHttpsServer((req, res) => {
    if (req.url === '/photos/beach.jpg' || req.url === '/o/abc123') {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      createReadStream(JPG).pipe(res);
    } else if (req.url === '/moved') {
      res.writeHead(302, { location: '/photos/beach.jpg' });
      res.end();
    } else if (req.url === '/to-private') {
      res.writeHead(302, { location: 'https://10.1.2.3/x.jpg' });
      res.end();
    } else {
      res.writeHead(503);
      res.end();
    }
  });
  s = await startTestServer({ urlAllow: 'files.test', dnsOverrides: 'files.test=127.0.0.1' }, { ca: files.ca.caPem });
});
after(async () => {
  await s.stop();
  await new Promise((r) => files.server.close(r));
});

const submitUrl = (body: Record<string, unknown>, path = '/compress') =>
  s.api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('URL input', () => {
  it('downloads the file during the request and compresses it like an upload', async () => {
    const res = await submitUrl({ inputUrl: files.url('files.test', '/photos/beach.jpg'), sourceFormat: 'jpg', options: { resize: { enabled: false } } });
    assert.equal(res.status, 202, JSON.stringify(await res.clone().json()));
    const accepted = await json(res);
    assert.equal(accepted.fileName, 'beach');
    assert.equal(accepted.format, 'jpg');
    const job = await waitForJob(s, accepted.id);
    assert.equal(job.status, 'Succeeded');
    assert.equal(job.metrics.inputBytes, (await stat(JPG)).size);
  });

  it('takes the multipart inputUrl field and follows a redirect', async () => {
    const form = new FormData();
    form.set('inputUrl', files.url('files.test', '/moved'));
    form.set('sourceFormat', 'jpg');
    const res = await s.api('/compress', { method: 'POST', body: form });
    assert.equal(res.status, 202);
    assert.equal((await waitForJob(s, (await json(res)).id)).status, 'Succeeded');
  });

  it('names an extensionless URL from sourceFormat', async () => {
    const res = await submitUrl({ inputUrl: files.url('files.test', '/o/abc123'), sourceFormat: 'jpg' }, '/compress/jpg');
    assert.equal(res.status, 202);
    assert.equal((await json(res)).fileName, 'abc123');
  });

  const refusals: [string, () => Record<string, unknown>, number, string, boolean][] = [
    ['a private address', () => ({ inputUrl: 'https://192.168.1.10/x.jpg', sourceFormat: 'jpg' }), 400, 'url_fetch.private_ip', false],
    ['loopback written in decimal', () => ({ inputUrl: 'https://2130706433/x.jpg', sourceFormat: 'jpg' }), 400, 'url_fetch.private_ip', false],
    ['IPv6 loopback', () => ({ inputUrl: 'https://[::1]/x.jpg', sourceFormat: 'jpg' }), 400, 'url_fetch.private_ip', false],
    ['a redirect to a private address', () => ({ inputUrl: files.url('files.test', '/to-private'), sourceFormat: 'jpg' }), 400, 'url_fetch.redirect_denied', false],
    ['a server error', () => ({ inputUrl: files.url('files.test', '/broken.jpg'), sourceFormat: 'jpg' }), 400, 'url_fetch.http_error', true],
    ['the PNG path with a JPG source', () => ({ inputUrl: files.url('files.test', '/photos/beach.jpg'), sourceFormat: 'jpg' }), 400, 'compress.png.validation.unsupported_format', false],
  ];
  for (const [name, body, status, code, retryable] of refusals) {
    it(`refuses ${name} with ${code}`, async () => {
      const res = await submitUrl(body(), code.startsWith('compress.png') ? '/compress/png' : '/compress');
      assert.equal(res.status, status);
      const err = await json(res);
      assert.equal(err.error, code);
      if (code.startsWith('url_fetch.')) assert.equal(err.isRetryable, retryable);
    });
  }
});
