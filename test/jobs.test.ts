// Spec: "States and transitions", "Job endpoints", "Job status response", "Limits" — the job lifecycle on real corpus files; downloads resume and revalidate (issue 42).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { DownloadTokens } from '../src/webhooks/download-token.ts';
import { picturesPdf, scannedPages } from './helpers/made-files.ts';
import { waitUntil } from './helpers/poll.ts';
import { CORPUS, fileForm, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';

const run = promisify(execFile);
const JPG_DIR = join(CORPUS, 'jpg');
const PHONE = join(JPG_DIR, 'phone-IMG_20180725_163423.jpg');
const SMALL = join(JPG_DIR, 'jpeg420exif.jpg');
const PNG = join(CORPUS, 'png', 'density_plot.png');
const NOT_A_JPG = join(CORPUS, 'bad', 'actually-pdf.jpg');

let s: TestServer;
before(async () => {
  s = await startTestServer({ workers: '1' });
});
after(() => s.stop());

const submit = async (server: TestServer, path: string, init: { key?: string; fields?: Record<string, string> } = {}) =>
  server.api('/compress', { method: 'POST', body: await fileForm(path, init.fields), key: init.key });

describe('lifecycle on real JPGs', () => {
  for (const name of ['jpeg420exif.jpg', 'canon-dslr.jpg', 'baiona_cmyk.jpg']) {
    it(`compresses ${name}: status, metrics, download`, async () => {
      const path = join(JPG_DIR, name);
      const inputBytes = (await stat(path)).size;
      const accepted = await json(await submit(s, path));
      const job = await waitForJob(s, accepted.id);
      assert.equal(job.status, 'Succeeded', JSON.stringify(job.error));
      assert.equal(job.format, 'jpg');
      assert.deepEqual(job.progress, { percent: 100, phase: 'done' });
      assert.equal(job.error, null);
      assert.equal(job.metrics.inputBytes, inputBytes);
      assert.ok(job.metrics.outputBytes > 0 && job.metrics.outputBytes <= inputBytes);
      assert.equal(job.metrics.compressionRatio, Math.round((job.metrics.outputBytes / inputBytes) * 1e4) / 1e4);
      assert.ok(Math.abs(job.metrics.savingsPercent - (1 - job.metrics.outputBytes / inputBytes) * 100) < 0.01);
      assert.equal(job.metrics.creditCost, 1);
      assert.deepEqual(job.output, { fileName: name.replace('.jpg', '.jpg'), contentType: 'image/jpeg', fileCount: 1 });

      const res = await s.api(`/compress/job/${accepted.id}/download`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/jpeg');
      assert.equal(Number(res.headers.get('content-length')), job.metrics.outputBytes);
      assert.match(res.headers.get('content-disposition')!, new RegExp(`attachment; filename="${name.replace('.', '\\.')}"`));
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(bytes.length, job.metrics.outputBytes);
      assert.deepEqual([...bytes.subarray(0, 3)], [0xff, 0xd8, 0xff]);
    });
  }

  it('charges credits on success', async () => {
    const key = s.newKey('charged', { credits: 10 });
    const accepted = await json(await submit(s, SMALL, { key }));
    await waitForJob(s, accepted.id, undefined, 60_000, key);
    const me = await json(await s.api('/compress/entitlements/me', { key }));
    assert.deepEqual(me.credits, { granted: 10, spent: 1, reserved: 0, available: 9 });
  });
});

describe('job endpoints', () => {
  it('answers 404 jobs.not_found with a null detail', async () => {
    for (const [method, suffix] of [['GET', ''], ['GET', '/download'], ['POST', '/cancel'], ['DELETE', '']]) {
      const res = await s.api(`/compress/job/does-not-exist${suffix}`, { method });
      assert.equal(res.status, 404);
      assert.deepEqual(await json(res), { error: 'jobs.not_found', detail: null });
    }
  });

  it("answers 403 jobs.forbidden for another account's job", async () => {
    const accepted = await json(await submit(s, SMALL));
    const other = s.newKey('someone-else');
    for (const [method, suffix] of [['GET', ''], ['GET', '/download'], ['POST', '/cancel'], ['DELETE', '']]) {
      const res = await s.api(`/compress/job/${accepted.id}${suffix}`, { method, key: other });
      assert.equal(res.status, 403, `${method} ${suffix}`);
      assert.equal((await json(res)).error, 'jobs.forbidden');
    }
    await waitForJob(s, accepted.id);
  });

  it('cancels a queued job (409 not_ready before), releases its credits, then refuses a second cancel', async () => {
    const key = s.newKey('canceller', { credits: 20 });
    const first = await json(await submit(s, PHONE, { key }));
    const second = await json(await submit(s, PHONE, { key }));
    const download = await s.api(`/compress/job/${second.id}/download`, { key });
    assert.equal(download.status, 409);
    assert.equal((await json(download)).error, 'jobs.not_ready');
    const deleting = await s.api(`/compress/job/${second.id}`, { method: 'DELETE', key });
    assert.equal(deleting.status, 409);
    assert.equal((await json(deleting)).error, 'jobs.not_deletable');

    const res = await s.api(`/compress/job/${second.id}/cancel`, { method: 'POST', key });
    assert.equal(res.status, 200);
    const canceled = await json(res);
    assert.equal(canceled.status, 'Canceled');
    assert.equal(canceled.metrics.creditCost, 0);
    const again = await s.api(`/compress/job/${second.id}/cancel`, { method: 'POST', key });
    assert.equal(again.status, 409);
    assert.equal((await json(again)).error, 'jobs.not_cancellable');
    const compare = await s.api(`/compress/job/${second.id}/compare`, { key });
    assert.equal(compare.status, 409);
    assert.equal((await json(compare)).error, 'compare.not_ready');

    await waitForJob(s, first.id, undefined, 60_000, key);
    const me = await json(await s.api('/compress/entitlements/me', { key }));
    assert.equal(me.credits.spent, 1);
    assert.equal(me.credits.reserved, 0);
  });

  it('cancels a running job by aborting its worker', async () => {
    const accepted = await json(await submit(s, PHONE));
    await waitForJob(s, accepted.id, ['Running', 'Succeeded', 'Failed']);
    const res = await s.api(`/compress/job/${accepted.id}/cancel`, { method: 'POST' });
    assert.equal(res.status, 200);
    assert.equal((await json(res)).status, 'Canceled');
    assert.equal((await json(await s.api(`/compress/job/${accepted.id}`))).status, 'Canceled');
    // The pool carries on with the next job.
    const next = await json(await submit(s, SMALL));
    assert.equal((await waitForJob(s, next.id)).status, 'Succeeded');
  });

  it('deletes a finished job and its files', async () => {
    const accepted = await json(await submit(s, SMALL));
    await waitForJob(s, accepted.id);
    const res = await s.api(`/compress/job/${accepted.id}`, { method: 'DELETE' });
    assert.equal(res.status, 200);
    assert.equal((await s.api(`/compress/job/${accepted.id}`)).status, 404);
    assert.ok(!(await readdir(join(s.dataDir, 'spool'))).includes(accepted.id));
  });
});

describe('download: byte ranges and validators', () => {
  let id: string;
  let whole: Buffer;
  let etag: string;
  let lastModified: string;
  before(async () => {
    id = (await json(await submit(s, SMALL))).id;
    const job = await waitForJob(s, id);
    whole = Buffer.from(await (await s.api(`/compress/job/${id}/download`)).arrayBuffer());
    etag = `"${createHash('sha256').update(whole).digest('hex')}"`;
    lastModified = new Date(job.completedAt).toUTCString();
  });

  type Expect = { status: number; bytes?: [number, number] | 'none'; contentRange?: (size: number) => string; error?: string };
  const cases: [string, () => Record<string, string>, Expect, string?][] = [
    ['full GET', () => ({}), { status: 200 }],
    ['the first 100 bytes', () => ({ range: 'bytes=0-99' }), { status: 206, bytes: [0, 100], contentRange: (n) => `bytes 0-99/${n}` }],
    ['the last 100 bytes (suffix)', () => ({ range: 'bytes=-100' }), { status: 206, bytes: [-100, 0], contentRange: (n) => `bytes ${n - 100}-${n - 1}/${n}` }],
    ['from byte 100 on (open range)', () => ({ range: 'bytes=100-' }), { status: 206, bytes: [100, 0], contentRange: (n) => `bytes 100-${n - 1}/${n}` }],
    ['a last byte past the end, cut to the size', () => ({ range: 'bytes=10-99999999' }), { status: 206, bytes: [10, 0], contentRange: (n) => `bytes 10-${n - 1}/${n}` }],
    ['a range past the end (416)', () => ({ range: `bytes=${whole.length}-` }), { status: 416, bytes: 'none', contentRange: (n) => `bytes */${n}`, error: 'download.range_not_satisfiable' }],
    ['several ranges: the whole file', () => ({ range: 'bytes=0-9,20-29' }), { status: 200 }],
    ['another unit: the whole file', () => ({ range: 'items=0-9' }), { status: 200 }],
    ['If-None-Match with the ETag (304)', () => ({ 'if-none-match': etag }), { status: 304, bytes: 'none' }],
    ['If-None-Match with its weak form (304)', () => ({ 'if-none-match': `"x", W/${etag}` }), { status: 304, bytes: 'none' }],
    ['If-None-Match with another tag', () => ({ 'if-none-match': '"0000"' }), { status: 200 }],
    ['If-Modified-Since the completion (304)', () => ({ 'if-modified-since': lastModified }), { status: 304, bytes: 'none' }],
    ['If-Range with the ETag', () => ({ range: 'bytes=0-99', 'if-range': etag }), { status: 206, bytes: [0, 100], contentRange: (n) => `bytes 0-99/${n}` }],
    ['If-Range with the Last-Modified date', () => ({ range: 'bytes=0-99', 'if-range': lastModified }), { status: 206, bytes: [0, 100], contentRange: (n) => `bytes 0-99/${n}` }],
    ['If-Range with another tag: the whole file', () => ({ range: 'bytes=0-99', 'if-range': '"0000"' }), { status: 200 }],
    ['If-Range with a weak tag: the whole file', () => ({ range: 'bytes=0-99', 'if-range': `W/${etag}` }), { status: 200 }],
    ['HEAD: the same headers, no body', () => ({}), { status: 200, bytes: 'none' }, 'HEAD'],
  ];
  for (const [name, headers, expect, method = 'GET'] of cases) {
    it(`${method} ${name} → ${expect.status}`, async () => {
      const res = await s.api(`/compress/job/${id}/download`, { method, headers: { 'accept-encoding': 'gzip, br', ...headers() } });
      const body = Buffer.from(await res.arrayBuffer());
      assert.equal(res.status, expect.status);
      assert.equal(res.headers.get('content-encoding'), null, 'an output is sent as stored, never compressed');
      if (expect.status === 416) {
        assert.equal((JSON.parse(body.toString()) as { error: string }).error, expect.error);
        assert.equal(res.headers.get('content-range'), expect.contentRange!(whole.length));
        return;
      }
      assert.equal(res.headers.get('etag'), etag);
      assert.equal(res.headers.get('last-modified'), lastModified);
      if (expect.status === 304) return assert.equal(body.length, 0);
      assert.equal(res.headers.get('accept-ranges'), 'bytes');
      assert.equal(res.headers.get('content-range'), expect.contentRange?.(whole.length) ?? null);
      const [from, to] = expect.bytes === undefined || expect.bytes === 'none' ? [0, whole.length] : [expect.bytes[0], expect.bytes[1] || whole.length];
      const want = whole.subarray(from < 0 ? whole.length + from : from, to);
      assert.equal(Number(res.headers.get('content-length')), want.length);
      assert.deepEqual(body, expect.bytes === 'none' ? Buffer.alloc(0) : want);
    });
  }

  it('serves a presigned link the same way', async () => {
    const tokens = await DownloadTokens.open(s.dataDir);
    const token = tokens.create(id, new Date(Date.now() + 600_000));
    const res = await fetch(`${s.url}/api/compress/job/${id}/download?token=${encodeURIComponent(token)}`, { headers: { range: 'bytes=-10' } });
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('etag'), etag);
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), whole.subarray(-10));
  });

  it('lets `curl -C -` resume a cut-off download', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-resume-'));
    try {
      const file = join(dir, 'out.jpg');
      await writeFile(file, whole.subarray(0, 1000));
      const { stdout } = await run('curl', ['-sS', '-f', '-C', '-', '-o', file, '-w', '%{http_code}', '-H', `x-service-api-key: ${s.key}`, `${s.url}/compress/job/${id}/download`]);
      assert.equal(stdout, '206');
      assert.deepEqual(await readFile(file), whole);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('perceived quality (metrics.perceivedQuality)', () => {
  const LOSSLESS = { options: JSON.stringify({ compression: { mode: 'lossless' } }) };
  const cases: { name: string; path: string; fields?: Record<string, string>; cancel?: boolean; status: string; quality: 'measured' | null }[] = [
    { name: 'a JPG encoded lossily', path: SMALL, status: 'Succeeded', quality: 'measured' },
    { name: 'a PNG compressed losslessly', path: PNG, fields: LOSSLESS, status: 'Succeeded', quality: null },
    { name: 'a Failed job', path: NOT_A_JPG, status: 'Failed', quality: null },
    { name: 'a Canceled job', path: PHONE, cancel: true, status: 'Canceled', quality: null },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.quality ?? 'null'}`, async () => {
      const accepted = await json(await submit(s, c.path, { fields: c.fields }));
      if (c.cancel) assert.equal((await s.api(`/compress/job/${accepted.id}/cancel`, { method: 'POST' })).status, 200);
      const job = await waitForJob(s, accepted.id);
      assert.equal(job.status, c.status, JSON.stringify(job.error));
      const q = job.metrics.perceivedQuality;
      if (c.quality === null) return assert.equal(q, null);
      assert.equal(typeof q, 'number');
      assert.ok(q > 0 && q <= 100, `${q} out of (0, 100]`);
      assert.equal(q, Math.round(q * 10) / 10, `${q} has one decimal`);
    });
  }

  it('survives a restart', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'jobs-quality-restart-'));
    try {
      const first = await startTestServer({ dataDir, workers: '1' });
      let before: Record<string, any>;
      try {
        before = await waitForJob(first, (await json(await submit(first, SMALL))).id);
      } finally {
        await first.stop();
      }
      assert.equal(before.status, 'Succeeded');
      assert.equal(typeof before.metrics.perceivedQuality, 'number');
      const second = await startTestServer({ dataDir, workers: '1' });
      try {
        const after = await json(await second.api(`/compress/job/${before.id}`));
        assert.deepEqual([after.status, after.metrics.perceivedQuality], ['Succeeded', before.metrics.perceivedQuality]);
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('bad inputs', () => {
  for (const name of ['actually-pdf.jpg', 'truncated.jpg', 'bad-crc.png', 'huge-dimensions.png', 'empty.jpg', 'zip-bomb.docx']) {
    it(`${name} gets a 4xx or a Failed job with a code, never a 5xx`, async () => {
      const res = await submit(s, join(CORPUS, 'bad', name));
      assert.ok(res.status < 500);
      if (res.status !== 202) {
        assert.ok(res.status >= 400);
        assert.equal(typeof (await json(res)).error, 'string');
        return;
      }
      const job = await waitForJob(s, (await json(res)).id);
      assert.ok(['Failed', 'Succeeded'].includes(job.status));
      if (job.status === 'Failed') {
        assert.equal(typeof job.error.code, 'string');
        assert.ok(job.error.detail.length <= 256);
        assert.equal(job.metrics.creditCost, 0);
      }
    });
  }
});

describe('time limit and retention', () => {
  it('fails a job past COMPRESSD_JOB_TIMEOUT_SECONDS with jobs.timeout and releases its credits', async () => {
    const t = await startTestServer({ workers: '1', jobTimeoutSeconds: '0.05' });
    try {
      const accepted = await json(await submit(t, PHONE));
      const job = await waitForJob(t, accepted.id);
      assert.equal(job.status, 'Failed');
      assert.equal(job.error.code, 'jobs.timeout');
      assert.equal(job.metrics.creditCost, 0);
      assert.equal((await json(await t.api('/compress/entitlements/me'))).credits.available, 500);
    } finally {
      await t.stop();
    }
  });

  it('a document job still working on its pictures at the time limit fails with jobs.timeout and holds no credit', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'jobs-timeout-'));
    const t = await startTestServer({ workers: '1', jobTimeoutSeconds: '1' });
    try {
      // Twelve scanned pages: several seconds of picture work on any machine.
      const pdf = await picturesPdf(join(dir, 'scan.pdf'), await scannedPages(12, 100));
      const job = await waitForJob(t, (await json(await submit(t, pdf))).id);
      assert.equal(job.status, 'Failed');
      assert.deepEqual(job.error, { code: 'jobs.timeout', detail: 'Processing exceeded the 1 s time limit.' });
      assert.equal(job.metrics.creditCost, 0);
      assert.deepEqual((await json(await t.api('/compress/entitlements/me'))).credits, { granted: 500, spent: 0, reserved: 0, available: 500 });
    } finally {
      await t.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('deletes outputs after COMPRESSD_RETENTION_SECONDS: download 410 jobs.expired, status says expired', async () => {
    const r = await startTestServer({ workers: '1', retentionSeconds: '1' });
    try {
      const accepted = await json(await submit(r, SMALL));
      const job = await waitForJob(r, accepted.id);
      assert.equal(job.status, 'Succeeded');
      assert.ok(Date.parse(job.expiresAt) - Date.parse(job.completedAt) === 1000);
      r.clock.advance(1600);
      const res = await r.api(`/compress/job/${accepted.id}/download`);
      assert.equal(res.status, 410);
      assert.equal((await json(res)).error, 'jobs.expired');
      const after = await json(await r.api(`/compress/job/${accepted.id}`));
      assert.equal(after.status, 'Succeeded');
      assert.equal(after.expired, true);
      assert.equal(after.output.fileCount, 0);
      // The retention sweep the clock set off may have marked the job expired first: its files are
      // deleted just after that mark, and the download answered from the mark.
      await waitUntil(`spool entry ${accepted.id} deleted`, async () => !(await readdir(join(r.dataDir, 'spool'))).includes(accepted.id));
    } finally {
      await r.stop();
    }
  });
});

describe('per-account limits', () => {
  it('accepts 18 of 25 quick submissions (429 queue.limit_exceeded + Retry-After), never running more than 6', async () => {
    const l = await startTestServer({ workers: '8' });
    try {
      // A 3 MP photo: long enough for the running jobs to be seen together, short enough for two waves to pass quickly.
      const body = await readFile(join(JPG_DIR, 'jpeg420exif.jpg'));
      // All at once, so that no job can finish (and make room) while the burst is being admitted.
      const responses = await Promise.all(
        Array.from({ length: 25 }, (_, i) => {
          const form = new FormData();
          form.set('file', new Blob([body]), `p${i}.jpg`);
          return l.api('/compress', { method: 'POST', body: form });
        }),
      );
      const statuses = responses.map((r) => r.status);
      const ids: string[] = [];
      for (const res of responses) if (res.status === 202) ids.push((await json(res)).id);
      const limited = responses.find((r) => r.status === 429);
      assert.equal(statuses.filter((x) => x === 202).length, 18);
      assert.equal(statuses.filter((x) => x === 429).length, 7);
      assert.equal((await json(limited!)).error, 'queue.limit_exceeded');
      assert.ok(Number(limited!.headers.get('retry-after')) >= 1);
      // Watch until a second wave has started (8 done), then cancel the rest to keep the suite short.
      let maxRunning = 0;
      for (;;) {
        const jobs = await Promise.all(ids.map(async (id) => json(await l.api(`/compress/job/${id}`))));
        maxRunning = Math.max(maxRunning, jobs.filter((j) => j.status === 'Running').length);
        if (jobs.filter((j) => ['Succeeded', 'Failed'].includes(j.status)).length >= 8) break;
        await new Promise((res) => setTimeout(res, 50));
      }
      assert.ok(maxRunning <= 6 && maxRunning >= 2, `max running ${maxRunning}`);
      await Promise.all(ids.map((id) => l.api(`/compress/job/${id}/cancel`, { method: 'POST' })));
    } finally {
      await l.stop();
    }
  });
});
