// Spec: "Events" and "Presigned download URL" — a job's end reaches a real HTTPS receiver, signed, with a working download link.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Stripe from 'stripe';
import { waitUntil } from './helpers/poll.ts';
import { CORPUS, fileForm, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const SECRET = 'whsec_test_secret_0123456789';
const received: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];
let hooks: TestHttpsServer;
let s: TestServer;

before(async () => {
  hooks = await startTestHttpsServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      // /flaky refuses every first attempt.
      res.writeHead(req.url === '/flaky' && req.headers['x-service-delivery-attempt'] === '1' ? 503 : 200);
      res.end();
    });
  });
  s = await startTestServer(
    { urlAllow: 'hooks.test', dnsOverrides: 'hooks.test=127.0.0.1', publicUrl: 'https://compress.example.org', webhookRetryDelays: '0,600' },
    { ca: hooks.ca.caPem },
  );
});
after(async () => {
  await s.stop();
  await new Promise((r) => hooks.server.close(r));
});

function delivery(jobId: string, attempt = 1) {
  const hit = () => received.find((r) => JSON.parse(r.body).jobId === jobId && r.headers['x-service-delivery-attempt'] === String(attempt));
  return waitUntil(`webhook attempt ${attempt} for ${jobId}`, hit, { timeoutMs: 10_000 });
}

describe('webhooks', () => {
  it('posts a signed job.succeeded whose download URL works without a key', async () => {
    const form = await fileForm(join(CORPUS, 'jpg/jpeg420exif.jpg'), { webhookUrl: hooks.url('hooks.test', '/hook'), webhookSecret: SECRET });
    const accepted = await json(await s.api('/compress', { method: 'POST', body: form }));
    const job = await waitForJob(s, accepted.id);
    const hit = await delivery(accepted.id);

    const event = new Stripe('sk_test_unused').webhooks.constructEvent(hit.body, String(hit.headers['x-service-signature']), SECRET) as unknown as Record<string, any>;
    assert.equal(event.event, 'job.succeeded');
    assert.equal(hit.headers['x-service-event-id'], event.eventId);
    assert.equal(hit.headers['x-service-delivery-attempt'], '1');
    assert.equal(event.jobType, 'compress');
    assert.equal(event.status, 'Succeeded');
    assert.equal(event.metrics.inputBytes, job.metrics.inputBytes);
    assert.equal(event.metrics.outputBytes, job.metrics.outputBytes);
    assert.equal(event.metrics.creditCost, 1);
    assert.equal(typeof event.metrics.processingTimeMs, 'number');
    assert.equal(event.output.fileName, 'jpeg420exif.jpg');
    assert.equal(event.output.expiresAt, job.expiresAt);

    const link = new URL(event.output.downloadUrl);
    assert.equal(link.origin, 'https://compress.example.org');
    assert.match(link.pathname, new RegExp(`^/api/compress/job/${accepted.id}/download$`));
    const viaLink = await s.api(link.pathname + link.search, { key: null });
    assert.equal(viaLink.status, 200);
    const viaKey = await s.api(`/compress/job/${accepted.id}/download`);
    assert.deepEqual(Buffer.from(await viaLink.arrayBuffer()), Buffer.from(await viaKey.arrayBuffer()));
    const plainPath = await s.api(`/compress/job/${accepted.id}/download${link.search}`, { key: null });
    assert.equal(plainPath.status, 200);

    // One character changed where every bit counts (the last base64url characters carry padding bits,
    // so replacing them could decode to the same bytes).
    const token = link.searchParams.get('token')!;
    const at = token.length - 5;
    const forgedToken = token.slice(0, at) + (token[at] === 'A' ? 'B' : 'A') + token.slice(at + 1);
    const forged = await s.api(`${link.pathname}?token=${forgedToken}`, { key: null });
    assert.equal(forged.status, 401);
    const otherJob = await s.api(`/api/compress/job/someone-else/download${link.search}`, { key: null });
    assert.equal(otherJob.status, 401);
  });

  it('posts job.failed with an error code, and only the selected events', async () => {
    // The job whose event is not selected ends first: a delivery for it would arrive before the one that follows.
    const unselected = await fileForm(join(CORPUS, 'jpg/jpeg420exif.jpg'), { webhookUrl: hooks.url('hooks.test', '/hook'), webhookSecret: SECRET, webhookEvents: 'failed' });
    const b = await json(await s.api('/compress', { method: 'POST', body: unselected }));
    assert.equal((await waitForJob(s, b.id)).status, 'Succeeded');
    const failing = await fileForm(join(CORPUS, 'bad/actually-pdf.jpg'), { webhookUrl: hooks.url('hooks.test', '/hook'), webhookSecret: SECRET, webhookEvents: 'failed' });
    const a = await json(await s.api('/compress', { method: 'POST', body: failing }));
    const job = await waitForJob(s, a.id);
    assert.equal(job.status, 'Failed');
    const event = JSON.parse((await delivery(a.id)).body);
    assert.equal(event.event, 'job.failed');
    assert.equal(event.error.code, job.error.code);
    assert.equal(event.metrics.creditCost, 0);
    assert.equal(event.metrics.outputBytes, null);
    assert.equal(event.output, undefined);
    assert.ok(!received.some((r) => JSON.parse(r.body).jobId === b.id), 'nothing was sent for the unselected job.succeeded');
  });

  it('retries by the service clock: the second attempt follows once the clock passes the 600 s delay', async () => {
    // An input that fails at once: the job ends quickly and owes job.failed.
    const form = await fileForm(join(CORPUS, 'bad/actually-pdf.jpg'), { webhookUrl: hooks.url('hooks.test', '/flaky'), webhookSecret: SECRET });
    const accepted = await json(await s.api('/compress', { method: 'POST', body: form }));
    assert.equal((await waitForJob(s, accepted.id)).status, 'Failed');
    const signedAt = (hit: (typeof received)[number]) => Number(/^t=(\d+),/.exec(String(hit.headers['x-service-signature']))![1]);
    const first = await delivery(accepted.id);
    s.clock.advance(600_000);
    const second = await delivery(accepted.id, 2);
    assert.equal(JSON.parse(second.body).eventId, JSON.parse(first.body).eventId);
    assert.ok(signedAt(second) - signedAt(first) >= 600, 'signed at the time of the clock that scheduled it');
  });
});
