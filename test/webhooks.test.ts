import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Stripe from 'stripe';
import { ApiError } from '../src/errors.ts';
import { DownloadTokens, presignedDownloadUrl } from '../src/webhooks/download-token.ts';
import { bodyForAttempt, buildPayload, eventIdFor, type JobOutcome } from '../src/webhooks/payload.ts';
import { classifyStatus, parseRetryDelays } from '../src/webhooks/policy.ts';
import { sign } from '../src/webhooks/sign.ts';
import { validateWebhook } from '../src/webhooks/validate.ts';

const SECRET = 'whsec_0123456789abcdef';
const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'compressd-webhooks-'));
  dirs.push(d);
  return d;
}

function rejects(fields: Parameters<typeof validateWebhook>[0], why: RegExp): void {
  assert.throws(
    () => validateWebhook(fields),
    (err: unknown) =>
      err instanceof ApiError && err.code === 'compress.invalid_webhook' && err.status === 400 && why.test(err.detail ?? ''),
  );
}

describe('validateWebhook', () => {
  test('no webhook fields (or empty form fields) means no webhook', () => {
    assert.equal(validateWebhook({}), null);
    assert.equal(validateWebhook({ webhookUrl: '', webhookSecret: '', webhookEvents: '' }), null);
  });

  test('a valid webhook, events defaulting to both', () => {
    assert.deepEqual(validateWebhook({ webhookUrl: 'https://hooks.example.com/in?x=1', webhookSecret: SECRET }), {
      url: 'https://hooks.example.com/in?x=1',
      secret: SECRET,
      events: ['succeeded', 'failed'],
    });
    assert.deepEqual(
      validateWebhook({ webhookUrl: 'https://a.example.com/', webhookSecret: SECRET, webhookEvents: ' failed ' })?.events,
      ['failed'],
    );
    assert.deepEqual(
      validateWebhook({ webhookUrl: 'https://a.example.com/', webhookSecret: SECRET, webhookEvents: 'failed,succeeded' })?.events,
      ['succeeded', 'failed'],
    );
  });

  test('URL rules: https, host name not IP, length, reserved domains', () => {
    const ok = { webhookSecret: SECRET };
    rejects({ ...ok, webhookUrl: 'http://hooks.example.com/' }, /https/);
    rejects({ ...ok, webhookUrl: 'ftp://hooks.example.com/' }, /https/);
    rejects({ ...ok, webhookUrl: 'not a url' }, /valid URL/);
    rejects({ ...ok, webhookUrl: 42 }, /string/);
    for (const ip of ['https://93.184.216.34/', 'https://[2606:2800:220:1::]/', 'https://2130706433/', 'https://0x7f.1/']) {
      rejects({ ...ok, webhookUrl: ip }, /not an IP/);
    }
    for (const host of ['printer.local', 'db.internal', 'localhost', 'app.localhost', 'x.LOCAL.', 'internal']) {
      rejects({ ...ok, webhookUrl: `https://${host}/hook` }, /not allowed/);
    }
    const base = 'https://hooks.example.com/';
    assert.ok(validateWebhook({ ...ok, webhookUrl: base + 'a'.repeat(2048 - base.length) }));
    rejects({ ...ok, webhookUrl: base + 'a'.repeat(2049 - base.length) }, /2048/);
    assert.ok(validateWebhook({ ...ok, webhookUrl: 'https://local.example.com/' }), 'only the .local domain itself is reserved');
  });

  test('secret: required with the URL, 16-256 characters', () => {
    const url = 'https://hooks.example.com/';
    rejects({ webhookUrl: url }, /required/);
    rejects({ webhookUrl: url, webhookSecret: 'x'.repeat(15) }, /16-256/);
    rejects({ webhookUrl: url, webhookSecret: 'x'.repeat(257) }, /16-256/);
    rejects({ webhookUrl: url, webhookSecret: 1234567890123456 }, /string/);
    assert.ok(validateWebhook({ webhookUrl: url, webhookSecret: 'x'.repeat(16) }));
    assert.ok(validateWebhook({ webhookUrl: url, webhookSecret: 'x'.repeat(256) }));
  });

  test('events: a subset of succeeded,failed; secret or events without a URL', () => {
    const ok = { webhookUrl: 'https://hooks.example.com/', webhookSecret: SECRET };
    rejects({ ...ok, webhookEvents: 'canceled' }, /webhookEvents/);
    rejects({ ...ok, webhookEvents: 'succeeded,' }, /webhookEvents/);
    rejects({ ...ok, webhookEvents: ['succeeded'] }, /webhookEvents/);
    rejects({ webhookSecret: SECRET }, /need a webhookUrl/);
    rejects({ webhookEvents: 'failed' }, /need a webhookUrl/);
  });
});

describe('sign', () => {
  test('Stripe scheme, byte for byte what stripe would compute', () => {
    const body = JSON.stringify({ event: 'job.succeeded', note: 'é ✓' });
    const header = sign(SECRET, body, 1_700_000_000);
    assert.match(header, /^t=1700000000,v1=[0-9a-f]{64}$/);
    const stripe = new Stripe('sk_test_unused');
    assert.equal(header, stripe.webhooks.generateTestHeaderString({ payload: body, secret: SECRET, timestamp: 1_700_000_000 }));
    const now = Math.floor(Date.now() / 1000);
    const event = stripe.webhooks.constructEvent(body, sign(SECRET, body, now), SECRET);
    assert.equal((event as unknown as { note: string }).note, 'é ✓');
    assert.throws(() => stripe.webhooks.constructEvent(body, sign('another-secret-of-16', body, now), SECRET));
  });
});

describe('payload', () => {
  const success: JobOutcome = {
    jobId: 'job_1',
    status: 'Succeeded',
    completedAt: new Date('2025-01-02T03:04:05.678Z'),
    output: {
      fileName: 'photo.jpg',
      contentType: 'image/jpeg',
      fileCount: 1,
      downloadUrl: 'https://c.example.com/api/compress/job/job_1/download?token=abc',
      expiresAt: new Date('2025-01-02T04:04:05.678Z'),
    },
    metrics: { inputBytes: 1000, outputBytes: 400, creditCost: 1, processingTimeMs: 12.6 },
  };

  test('success: exact fields in the spec order', () => {
    const body = bodyForAttempt(buildPayload(success, 'compressd-test'), 2);
    assert.deepEqual(Object.keys(body), ['event', 'eventId', 'jobId', 'jobType', 'site', 'status', 'deliveryAttempt', 'output', 'metrics', 'completedAt']);
    assert.deepEqual(body, {
      event: 'job.succeeded',
      eventId: eventIdFor('job_1', 'job.succeeded'),
      jobId: 'job_1',
      jobType: 'compress',
      site: 'compressd-test',
      status: 'Succeeded',
      deliveryAttempt: 2,
      output: {
        fileName: 'photo.jpg',
        contentType: 'image/jpeg',
        fileCount: 1,
        downloadUrl: 'https://c.example.com/api/compress/job/job_1/download?token=abc',
        expiresAt: '2025-01-02T04:04:05.678Z',
      },
      metrics: { inputBytes: 1000, outputBytes: 400, creditCost: 1, processingTimeMs: 13 },
      completedAt: '2025-01-02T03:04:05.678Z',
    });
  });

  test('failure: error with detail cut to 256 characters, null outputBytes, no output', () => {
    const long = '✓'.repeat(100) + '😀'.repeat(200);
    const payload = buildPayload(
      {
        jobId: 'job_2',
        status: 'Failed',
        completedAt: '2025-01-02T03:04:05Z',
        error: { code: 'jobs.timeout', detail: long },
        metrics: { inputBytes: 5, outputBytes: 99, creditCost: 0, processingTimeMs: null },
      },
      'site',
    );
    const body = bodyForAttempt(payload, 1);
    assert.deepEqual(Object.keys(body), ['event', 'eventId', 'jobId', 'jobType', 'site', 'status', 'deliveryAttempt', 'error', 'metrics', 'completedAt']);
    assert.equal(body.event, 'job.failed');
    assert.equal(body.status, 'Failed');
    assert.equal(body.error?.code, 'jobs.timeout');
    assert.ok(body.error!.detail.length <= 256);
    assert.ok(body.error!.detail.endsWith('…'));
    assert.ok(!/[\uD800-\uDBFF]…$/.test(body.error!.detail), 'no split surrogate pair');
    assert.deepEqual(body.metrics, { inputBytes: 5, outputBytes: null, creditCost: 0, processingTimeMs: null });
    assert.equal(body.completedAt, '2025-01-02T03:04:05.000Z');
    assert.equal(buildPayload({ ...success, status: 'Failed', error: { code: 'x', detail: 'short' } }, 's').error?.detail, 'short');
  });

  test('eventId: stable per job and event, distinct otherwise', () => {
    assert.equal(buildPayload(success, 'a').eventId, buildPayload(success, 'b').eventId);
    assert.notEqual(eventIdFor('job_1', 'job.succeeded'), eventIdFor('job_1', 'job.failed'));
    assert.notEqual(eventIdFor('job_1', 'job.succeeded'), eventIdFor('job_2', 'job.succeeded'));
  });
});

describe('policy', () => {
  test('status classes and the delay list', () => {
    assert.deepEqual([200, 204, 299].map(classifyStatus), ['delivered', 'delivered', 'delivered']);
    assert.deepEqual([429, 500, 503, 599].map(classifyStatus), ['retry', 'retry', 'retry', 'retry']);
    assert.deepEqual([301, 302, 400, 401, 404, 410].map(classifyStatus), Array(6).fill('terminal'));
    assert.deepEqual(parseRetryDelays('0,1,5,30,120'), [0, 1, 5, 30, 120]);
    assert.deepEqual(parseRetryDelays(' 0, 0.05 ,0.1 '), [0, 0.05, 0.1]);
    assert.throws(() => parseRetryDelays(''));
    assert.throws(() => parseRetryDelays('0,-1'));
    assert.throws(() => parseRetryDelays('0,soon'));
  });
});

describe('DownloadTokens', () => {
  test('round trip, reusable, expiry, and the key kept private in the data dir', async () => {
    const dir = await tempDir();
    const tokens = await DownloadTokens.open(dir);
    const expiresAt = new Date(Date.now() + 3_600_000);
    const token = tokens.create('job_ünïcode-42', expiresAt);
    assert.match(token, /^[A-Za-z0-9_-]+$/);
    assert.ok(!token.includes('job'), 'the job id is not readable in the token');
    assert.deepEqual(tokens.verify(token), { jobId: 'job_ünïcode-42', expiresAt });
    assert.deepEqual(tokens.verify(token), { jobId: 'job_ünïcode-42', expiresAt });
    assert.equal(tokens.verify(token, new Date(expiresAt.getTime() + 1)), null);
    assert.equal(tokens.verify(tokens.create('job', new Date(Date.now() - 1))), null);
    assert.notEqual(tokens.create('job', expiresAt), tokens.create('job', expiresAt), 'fresh IV per token');

    assert.deepEqual(await readdir(dir), ['download-token.key']);
    const info = await stat(join(dir, 'download-token.key'));
    assert.equal(info.mode & 0o777, 0o600);
    assert.equal(info.size, 32);
    const reopened = await DownloadTokens.open(dir);
    assert.equal(reopened.verify(token)?.jobId, 'job_ünïcode-42', 'the key survives a restart');
  });

  test('forged, altered, truncated or foreign tokens are refused', async () => {
    const tokens = await DownloadTokens.open(await tempDir());
    const other = await DownloadTokens.open(await tempDir());
    const token = tokens.create('job_a', new Date(Date.now() + 60_000));
    const raw = Buffer.from(token, 'base64url');
    for (let i = 0; i < raw.length; i += 7) {
      const flipped = Buffer.from(raw);
      flipped[i]! ^= 0x01;
      assert.equal(tokens.verify(flipped.toString('base64url')), null, `bit flipped at byte ${i}`);
    }
    assert.equal(other.verify(token), null);
    assert.equal(tokens.verify(token.slice(0, -2)), null);
    assert.equal(tokens.verify(`${token}=`), null);
    assert.equal(tokens.verify(''), null);
    assert.equal(tokens.verify('a'.repeat(60)), null);
    assert.equal(tokens.verify('../../etc/passwd'), null);
  });

  test('concurrent first opens agree on one key; a damaged key file is an error', async () => {
    const dir = await tempDir();
    const opened = await Promise.all(Array.from({ length: 8 }, () => DownloadTokens.open(dir)));
    const token = opened[0]!.create('job', new Date(Date.now() + 60_000));
    for (const t of opened) assert.equal(t.verify(token)?.jobId, 'job');
    assert.deepEqual(await readdir(dir), ['download-token.key']);
    const broken = await tempDir();
    await writeFile(join(broken, 'download-token.key'), 'short');
    await assert.rejects(DownloadTokens.open(broken), /32-byte key/);
  });

  test('presigned URL form', () => {
    assert.equal(
      presignedDownloadUrl('https://c.example.com/base/', 'job 1', 'tok'),
      'https://c.example.com/base/api/compress/job/job%201/download?token=tok',
    );
  });
});
