// Spec: "Submit a job" with URL input — end to end through the real server and a real HTTPS file server.
import assert from 'node:assert/strict';
import { createReadStream } from 'node:fs';
import { readdir, stat, statfs } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CORPUS, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const JPG = join(CORPUS, 'jpg/jpeg420exif.jpg');
let files: TestHttpsServer;
let s: TestServer;
const MB = 1024 * 1024;
/** Bytes each large answer of the file server got written to its socket before the client let go. */
const sent = new Map<string, number>();

/** Answers `length` bytes (with a Content-Length, or chunked without one) as fast as the client reads them. */
async function large(res: ServerResponse, path: string, length: number, declare: boolean) {
  res.writeHead(200, { 'content-type': 'image/jpeg', ...(declare ? { 'content-length': String(length) } : {}) });
  const piece = Buffer.alloc(64 * 1024);
  let closed = false;
  res.on('close', () => (closed = true));
  sent.set(path, 0);
  while (!closed && sent.get(path)! < length) {
    sent.set(path, sent.get(path)! + piece.length);
    if (!res.write(piece)) await new Promise((r) => (res.once('drain', r), res.once('close', r)));
  }
  res.end();
}

before(async () => {
  files = await startTestHttpsServer((req, res) => {
    if (req.url === '/photos/beach.jpg' || req.url === '/o/abc123') {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      createReadStream(JPG).pipe(res);
    } else if (req.url?.startsWith('/large/')) {
      const [, , kind, megabytes] = req.url.split('/');
      void large(res, req.url, Number(megabytes) * MB, kind === 'declared');
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

const submitUrlTo = (server: TestServer, body: Record<string, unknown>, path = '/compress', key?: string) =>
  server.api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), key });
const submitUrl = (body: Record<string, unknown>, path = '/compress', key?: string) => submitUrlTo(s, body, path, key);

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

  const spool = (server: TestServer) => readdir(join(server.dataDir, 'spool')).catch((): string[] => []);

  it('answers 402 before the body when the remote length costs more than the account has, and stops a longer body with no length at its first unpaid byte', async () => {
    const key = s.newKey('one-credit', { credits: 1 });
    const before = await spool(s);
    for (const kind of ['declared', 'chunked']) {
      const url = files.url('files.test', `/large/${kind}/64/photo.jpg`);
      const res = await submitUrl({ inputUrl: url, sourceFormat: 'jpg' }, undefined, key);
      assert.equal(res.status, 402, kind);
      const body = await json(res);
      assert.equal(body.error, 'entitlements.insufficient_credits');
      const path = new URL(url).pathname;
      // What the sockets between the two hold at most; before, the whole 64 MB came in first.
      assert.ok(sent.get(path)! < 32 * MB, `${kind}: ${sent.get(path)} bytes were sent`);
    }
    assert.deepEqual((await spool(s)).filter((id) => !before.includes(id)), [], 'nothing kept');
  });

  it('holds the remote length on the disk before writing a byte: one longer than the room is 503 and nothing is written', async () => {
    const { bavail, bsize } = await statfs(tmpdir());
    // 256 MB of room above the threshold; the file is 384 MB.
    const tight = await startTestServer(
      { urlAllow: 'files.test', dnsOverrides: 'files.test=127.0.0.1', minFreeDiskBytes: String(bavail * bsize - 256 * MB) },
      { ca: files.ca.caPem },
    );
    try {
      const url = files.url('files.test', '/large/declared/384/photo.jpg');
      const res = await tight.api('/compress', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputUrl: url, sourceFormat: 'jpg' }) });
      assert.equal(res.status, 503);
      const body = await json(res);
      assert.equal(body.error, 'server.insufficient_storage');
      assert.doesNotMatch(body.detail, /\d/, 'no figures to aim at');
      assert.ok(sent.get(new URL(url).pathname)! < 32 * MB);
      assert.deepEqual(await spool(tight), []);
      assert.equal((await submitUrlTo(tight, { inputUrl: files.url('files.test', '/large/declared/1/photo.jpg'), sourceFormat: 'jpg' })).status, 202, 'a small file still fits');
      // No length: held in steps as it arrives, not as the 1 GiB size limit the room could not hold.
      assert.equal((await submitUrlTo(tight, { inputUrl: files.url('files.test', '/photos/beach.jpg'), sourceFormat: 'jpg' })).status, 202, 'a file of unknown length fits');
    } finally {
      await tight.stop();
    }
  });
});
