import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { appendFile, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Stripe from 'stripe';
import type { Dispatcher } from 'undici';
import { guardedDispatcher } from '../src/fetch/egress.ts';
import type { EgressConfig } from '../src/fetch/config.ts';
import { WebhookOutbox, type AttemptReport, type OutboxOptions, type SettledReport } from '../src/webhooks/outbox.ts';
import type { JobOutcome } from '../src/webhooks/payload.ts';
import { DEFAULT_RETRY_DELAYS_SEC } from '../src/webhooks/policy.ts';
import { validateWebhook, type WebhookConfig } from '../src/webhooks/validate.ts';
import { TestClock } from './helpers/clock.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const SECRET = 'whsec_test_secret_0123456789';
/** Every outbox here schedules by it: tests move it to a retry's due time instead of waiting the spec's delays. */
const clock = new TestClock();

type Reply = { status: number; delayMs?: number; location?: string } | 'hang';
interface Received {
  headers: IncomingHttpHeaders;
  raw: string;
  body: Record<string, unknown>;
  attempt: number;
}
interface Route {
  script: (attempt: number) => Reply;
  onRequest?: (r: Received) => void;
  received: Received[];
  active: number;
  maxActive: number;
}

const routes = new Map<string, Route>();
let server: TestHttpsServer;
let egress: EgressConfig;
let dispatcher: Dispatcher;
const outboxes: WebhookOutbox[] = [];
const dirs: string[] = [];

before(async () => {
  server = await startTestHttpsServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const route = routes.get(new URL(req.url ?? '/', 'https://x').pathname);
      if (!route) {
        res.writeHead(404).end();
        return;
      }
      const raw = Buffer.concat(chunks).toString('utf8');
      const r: Received = { headers: req.headers, raw, body: JSON.parse(raw), attempt: Number(req.headers['x-service-delivery-attempt']) };
      route.received.push(r);
      route.active++;
      route.maxActive = Math.max(route.maxActive, route.active);
      res.on('close', () => route.active--);
      route.onRequest?.(r);
      const reply = route.script(r.attempt);
      if (reply === 'hang') return;
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(reply.status, reply.location ? { location: reply.location } : {}).end('{"ok":true}');
      }, reply.delayMs ?? 0);
    });
  });
  egress = {
    urlAllow: ['hooks.test'],
    dnsOverrides: { 'hooks.test': '127.0.0.1', 'webhooks.test': '127.0.0.1' },
    connectTimeoutMs: 2_000,
    ca: server.ca.caPem,
  };
  dispatcher = guardedDispatcher(egress);
});

after(async () => {
  for (const o of outboxes) await o.stop();
  await dispatcher.close();
  await server.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

function route(path: string, script: Route['script'], onRequest?: Route['onRequest']): Route {
  const r: Route = { script, onRequest, received: [], active: 0, maxActive: 0 };
  routes.set(path, r);
  return r;
}

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'compressd-outbox-'));
  dirs.push(d);
  return d;
}

/**
 * A started outbox on the spec's retry schedule and the test clock. Unless `follow` is false, each
 * retry's due time is reached at once: the clock is moved to it and the outbox woken.
 */
async function outbox(opts: Partial<OutboxOptions> & { dataDir: string; follow?: boolean }): Promise<WebhookOutbox> {
  const { follow = true, ...rest } = opts;
  const o = new WebhookOutbox({ retryDelaysSec: DEFAULT_RETRY_DELAYS_SEC, site: 'compressd-test', dispatcher, timeoutMs: 2_000, clock: clock.now, ...rest });
  if (follow) o.on('attempt', (a) => a.nextAttemptAt !== null && dueNow(o, a.nextAttemptAt));
  outboxes.push(o);
  await o.start();
  return o;
}

/** Moves the clock to `at` and has the outbox look at once; resolves when that look is over. */
function dueNow(o: WebhookOutbox, at: number): Promise<void> {
  clock.reach(at);
  return o.wake();
}

function webhook(path: string, events?: string, host = 'hooks.test'): WebhookConfig {
  const config = validateWebhook({ webhookUrl: server.url(host, path), webhookSecret: SECRET, webhookEvents: events });
  assert.ok(config);
  return config;
}

function succeeded(jobId: string): JobOutcome {
  return {
    jobId,
    status: 'Succeeded',
    completedAt: new Date(),
    output: {
      fileName: 'photo.jpg',
      contentType: 'image/jpeg',
      fileCount: 1,
      downloadUrl: `https://compressd.example.com/api/compress/job/${jobId}/download?token=t0k3n`,
      expiresAt: new Date(Date.now() + 3_600_000),
    },
    metrics: { inputBytes: 2_000_000, outputBytes: 600_000, creditCost: 1, processingTimeMs: 420 },
  };
}

function failed(jobId: string): JobOutcome {
  return {
    jobId,
    status: 'Failed',
    completedAt: new Date(),
    error: { code: 'jobs.timeout', detail: 'processing exceeded its time limit' },
    metrics: { inputBytes: 2_000_000, outputBytes: null, creditCost: 0, processingTimeMs: null },
  };
}

function settled(o: WebhookOutbox, jobId: string): Promise<SettledReport> {
  return new Promise((resolve) => {
    const listener = (s: SettledReport) => {
      if (s.jobId !== jobId) return;
      o.off('settled', listener);
      resolve(s);
    };
    o.on('settled', listener);
  });
}

function nextAttempt(o: WebhookOutbox, jobId: string, attempt: number): Promise<AttemptReport> {
  return new Promise((resolve) => {
    const listener = (a: AttemptReport) => {
      if (a.jobId !== jobId || a.attempt !== attempt) return;
      o.off('attempt', listener);
      resolve(a);
    };
    o.on('attempt', listener);
  });
}

function attempts(o: WebhookOutbox, jobId: string): AttemptReport[] {
  const seen: AttemptReport[] = [];
  o.on('attempt', (a) => {
    if (a.jobId === jobId) seen.push(a);
  });
  return seen;
}

/** The signature's time (unix seconds). */
const signedAt = (r: Received) => Number(/^t=(\d+),/.exec(String(r.headers['x-service-signature']))![1]);

/** The receiver's side of the spec's verification recipe, done by hand. */
function verifyByHand(r: Received): void {
  const header = String(r.headers['x-service-signature']);
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  assert.ok(match, `signature header ${header}`);
  const expected = createHmac('sha256', SECRET).update(`${match[1]}.${r.raw}`).digest();
  assert.ok(timingSafeEqual(expected, Buffer.from(match[2]!, 'hex')));
  assert.ok(Math.abs(Number(match[1]) - clock.now().getTime() / 1000) < 60, 'fresh timestamp, by the outbox clock');
}

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/;
const stripe = new Stripe('sk_test_unused');

describe('webhook delivery over HTTPS', () => {
  test('job.succeeded: every header, field and type; signature checked by hand and by stripe', async () => {
    const r = route('/hook/success', () => ({ status: 200 }));
    const o = await outbox({ dataDir: await tempDir() });
    const done = settled(o, 'job_ok');
    assert.equal(await o.enqueue(webhook('/hook/success'), succeeded('job_ok')), true);
    assert.deepEqual(await done, { eventId: r.received[0]!.body.eventId, jobId: 'job_ok', event: 'job.succeeded', delivered: true, attempts: 1 });

    assert.equal(r.received.length, 1);
    const [got] = r.received;
    assert.equal(got!.headers['content-type'], 'application/json');
    assert.equal(got!.headers['x-service-event-id'], got!.body.eventId);
    assert.equal(got!.headers['x-service-delivery-attempt'], '1');
    verifyByHand(got!);
    const event = stripe.webhooks.constructEvent(got!.raw, String(got!.headers['x-service-signature']), SECRET) as unknown;
    assert.deepEqual(event, got!.body);

    const b = got!.body as Record<string, any>;
    assert.deepEqual(Object.keys(b), ['event', 'eventId', 'jobId', 'jobType', 'site', 'status', 'deliveryAttempt', 'output', 'metrics', 'completedAt']);
    assert.equal(b.event, 'job.succeeded');
    assert.equal(typeof b.eventId, 'string');
    assert.equal(b.jobId, 'job_ok');
    assert.equal(b.jobType, 'compress');
    assert.equal(b.site, 'compressd-test');
    assert.equal(b.status, 'Succeeded');
    assert.equal(b.deliveryAttempt, 1);
    assert.deepEqual(Object.keys(b.output), ['fileName', 'contentType', 'fileCount', 'downloadUrl', 'expiresAt']);
    assert.equal(b.output.fileName, 'photo.jpg');
    assert.equal(b.output.contentType, 'image/jpeg');
    assert.ok(Number.isInteger(b.output.fileCount));
    assert.match(b.output.downloadUrl, /^https:\/\/compressd\.example\.com\/api\/compress\/job\/job_ok\/download\?token=/);
    assert.match(b.output.expiresAt, ISO_UTC);
    assert.deepEqual(b.metrics, { inputBytes: 2_000_000, outputBytes: 600_000, creditCost: 1, processingTimeMs: 420 });
    assert.match(b.completedAt, ISO_UTC);
    assert.equal(o.pendingCount, 0);
  });

  test('job.failed payload: error, no output, null outputBytes', async () => {
    const r = route('/hook/failed', () => ({ status: 204 }));
    const o = await outbox({ dataDir: await tempDir() });
    const done = settled(o, 'job_bad');
    await o.enqueue(webhook('/hook/failed'), failed('job_bad'));
    assert.equal((await done).delivered, true);
    const b = r.received[0]!.body as Record<string, any>;
    assert.deepEqual(Object.keys(b), ['event', 'eventId', 'jobId', 'jobType', 'site', 'status', 'deliveryAttempt', 'error', 'metrics', 'completedAt']);
    assert.equal(b.event, 'job.failed');
    assert.equal(b.status, 'Failed');
    assert.deepEqual(b.error, { code: 'jobs.timeout', detail: 'processing exceeded its time limit' });
    assert.deepEqual(b.metrics, { inputBytes: 2_000_000, outputBytes: null, creditCost: 0, processingTimeMs: null });
    stripe.webhooks.constructEvent(r.received[0]!.raw, String(r.received[0]!.headers['x-service-signature']), SECRET);
  });

  test('500 then 429 then 200: three attempts, one eventId, each signed afresh', async () => {
    const r = route('/hook/flaky', (n) => ({ status: n === 1 ? 500 : n === 2 ? 429 : 200 }));
    const o = await outbox({ dataDir: await tempDir() });
    const seen = attempts(o, 'job_flaky');
    const done = settled(o, 'job_flaky');
    await o.enqueue(webhook('/hook/flaky'), succeeded('job_flaky'));
    assert.deepEqual(await done, { eventId: r.received[0]!.body.eventId, jobId: 'job_flaky', event: 'job.succeeded', delivered: true, attempts: 3 });
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2, 3]);
    assert.deepEqual(r.received.map((x) => x.body.deliveryAttempt), [1, 2, 3]);
    assert.equal(new Set(r.received.map((x) => x.body.eventId)).size, 1);
    assert.equal(new Set(r.received.map((x) => x.headers['x-service-event-id'])).size, 1);
    assert.equal(new Set(r.received.map((x) => x.headers['x-service-signature'])).size, 3);
    const times = r.received.map(signedAt);
    assert.ok(times[1]! - times[0]! >= 1 && times[2]! - times[1]! >= 5, `signed 1 s then 5 s apart by the clock (spec schedule): ${times}`);
    for (const x of r.received) {
      verifyByHand(x);
      stripe.webhooks.constructEvent(x.raw, String(x.headers['x-service-signature']), SECRET);
    }
    assert.deepEqual(seen.map((a) => [a.attempt, a.outcome, a.status]), [[1, 'retry', 500], [2, 'retry', 429], [3, 'delivered', 200]]);
  });

  test('a retry is due by the outbox clock: not sent before its due time, sent once the clock reaches it', async () => {
    const r = route('/hook/due', (n) => ({ status: n === 1 ? 503 : 200 }));
    const o = await outbox({ dataDir: await tempDir(), retryDelaysSec: [0, 600], follow: false });
    const firstDone = nextAttempt(o, 'job_due', 1);
    const done = settled(o, 'job_due');
    await o.enqueue(webhook('/hook/due'), failed('job_due'));
    const first = await firstDone;
    assert.equal(first.outcome, 'retry');
    const due = first.nextAttemptAt!;
    assert.ok(due >= signedAt(r.received[0]!) * 1000 + 600_000, 'due 600 s after the first attempt, by the clock');

    await dueNow(o, due - 60_000);
    assert.equal(o.pendingCount, 1);
    await dueNow(o, due);
    assert.deepEqual([(await done).delivered, (await done).attempts], [true, 2]);
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2]);
    assert.ok(signedAt(r.received[1]!) * 1000 > due - 1_000, 'the second attempt was sent (and signed) once the clock reached its due time');
  });

  test('400 is terminal; a redirect is terminal and not followed', async () => {
    const r400 = route('/hook/reject', () => ({ status: 400 }));
    const r302 = route('/hook/moved', () => ({ status: 302, location: '/hook/elsewhere' }));
    const elsewhere = route('/hook/elsewhere', () => ({ status: 200 }));
    const o = await outbox({ dataDir: await tempDir() });
    const done400 = settled(o, 'job_400');
    const done302 = settled(o, 'job_302');
    await o.enqueue(webhook('/hook/reject'), succeeded('job_400'));
    await o.enqueue(webhook('/hook/moved'), succeeded('job_302'));
    assert.deepEqual([(await done400).delivered, (await done400).attempts], [false, 1]);
    assert.deepEqual([(await done302).delivered, (await done302).attempts], [false, 1]);
    assert.equal(r400.received.length, 1);
    assert.equal(r302.received.length, 1);
    assert.equal(elsewhere.received.length, 0);
  });

  test('a receiver that keeps failing gets exactly the configured number of attempts', async () => {
    const r = route('/hook/down', () => ({ status: 503 }));
    const o = await outbox({ dataDir: await tempDir() });
    const done = settled(o, 'job_down');
    await o.enqueue(webhook('/hook/down'), failed('job_down'));
    assert.deepEqual([(await done).delivered, (await done).attempts], [false, 5]);
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2, 3, 4, 5]);
  });

  test('a slow receiver times out and is retried', async () => {
    const r = route('/hook/slow', (n) => (n === 1 ? { status: 200, delayMs: 1_500 } : { status: 200 }));
    const o = await outbox({ dataDir: await tempDir(), timeoutMs: 300 });
    const seen = attempts(o, 'job_slow');
    const done = settled(o, 'job_slow');
    await o.enqueue(webhook('/hook/slow'), succeeded('job_slow'));
    assert.deepEqual([(await done).delivered, (await done).attempts], [true, 2]);
    assert.equal(seen[0]!.outcome, 'retry');
    assert.equal(seen[0]!.status, null);
    assert.match(seen[0]!.error ?? '', /did not answer within 300 ms/);
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2]);
  });

  test('connection refused is retried', async () => {
    const closed = await startTestHttpsServer(() => {});
    const url = closed.url('hooks.test', '/gone');
    await closed.close();
    const o = await outbox({ dataDir: await tempDir(), retryDelaysSec: [0, 30] });
    const seen = attempts(o, 'job_refused');
    const done = settled(o, 'job_refused');
    await o.enqueue({ url, secret: SECRET, events: ['succeeded', 'failed'] }, succeeded('job_refused'));
    assert.deepEqual([(await done).delivered, (await done).attempts], [false, 2]);
    assert.deepEqual(seen.map((a) => [a.outcome, a.status]), [['retry', null], ['retry', null]]);
    assert.match(seen[0]!.error ?? '', /ECONNREFUSED/);
  });

  test('the egress guard is applied at delivery time', async () => {
    const r = route('/hook/private', () => ({ status: 200 }));
    const o = await outbox({ dataDir: await tempDir(), retryDelaysSec: [0, 30] });
    const seen = attempts(o, 'job_private');
    const done = settled(o, 'job_private');
    // webhooks.test passed submission checks but now resolves to 127.0.0.1, which is not allowed.
    await o.enqueue(webhook('/hook/private', undefined, 'webhooks.test'), succeeded('job_private'));
    assert.deepEqual([(await done).delivered, (await done).attempts], [false, 2]);
    assert.match(seen[0]!.error ?? '', /not a public address/);
    assert.equal(r.received.length, 0);
  });

  test('event filter: unselected events send nothing; a pending event is not queued twice', async () => {
    const r = route('/hook/filtered', () => ({ status: 200 }));
    const o = await outbox({ dataDir: await tempDir() });
    assert.equal(await o.enqueue(webhook('/hook/filtered', 'failed'), succeeded('job_f1')), false);
    assert.equal(await o.enqueue(webhook('/hook/filtered', 'succeeded'), failed('job_f2')), false);
    assert.equal(o.pendingCount, 0);
    const done = settled(o, 'job_f3');
    assert.equal(await o.enqueue(webhook('/hook/filtered', 'succeeded'), succeeded('job_f3')), true);
    assert.equal(await o.enqueue(webhook('/hook/filtered', 'succeeded'), succeeded('job_f3')), false);
    await done;
    assert.deepEqual(r.received.map((x) => x.body.jobId), ['job_f3']);
  });

  test('bounded concurrency; every delivery arrives', async () => {
    const r = route('/hook/busy', () => ({ status: 200, delayMs: 100 }));
    const o = await outbox({ dataDir: await tempDir(), concurrency: 2 });
    const ids = Array.from({ length: 6 }, (_, i) => `job_busy_${i}`);
    const all = Promise.all(ids.map((id) => settled(o, id)));
    for (const id of ids) await o.enqueue(webhook('/hook/busy'), succeeded(id));
    assert.ok((await all).every((s) => s.delivered));
    assert.deepEqual(r.received.map((x) => x.body.jobId).sort(), ids);
    assert.ok(r.maxActive <= 2, `at most 2 in flight, saw ${r.maxActive}`);
  });
});

describe('webhook outbox durability', () => {
  test('a restart in the middle of the retry schedule resumes at the next attempt', async () => {
    const r = route('/hook/restart', (n) => ({ status: n <= 2 ? 500 : 200 }));
    const dataDir = await tempDir();
    const first = await outbox({ dataDir, follow: false });
    const firstDone = nextAttempt(first, 'job_restart', 1);
    const secondDone = nextAttempt(first, 'job_restart', 2);
    await first.enqueue(webhook('/hook/restart'), succeeded('job_restart'));
    await dueNow(first, (await firstDone).nextAttemptAt!);
    const afterSecond = await secondDone;
    await first.stop();
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2]);

    const journal = join(dataDir, 'webhooks', 'outbox.jsonl');
    assert.equal((await stat(journal)).mode & 0o777, 0o600);
    assert.match(await readFile(journal, 'utf8'), /"op":"result","id":"[^"]+","n":2,"outcome":"retry"/);

    const second = await outbox({ dataDir });
    assert.equal(second.pendingCount, 1);
    const resumed = settled(second, 'job_restart');
    await dueNow(second, afterSecond.nextAttemptAt!);
    const done = await resumed;
    assert.deepEqual([done.delivered, done.attempts], [true, 3]);
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2, 3]);
    assert.equal(new Set(r.received.map((x) => x.body.eventId)).size, 1);
    await second.stop();

    const third = await outbox({ dataDir });
    assert.equal(third.pendingCount, 0);
    assert.equal((await stat(journal)).size, 0, 'compacted on start');
  });

  test('a torn last journal line (crash mid-append) is dropped on start', async () => {
    const r = route('/hook/torn', (n) => ({ status: n === 1 ? 500 : 200 }));
    const dataDir = await tempDir();
    const delays = [0, 30];
    const first = await outbox({ dataDir, retryDelaysSec: delays, follow: false });
    const firstDone = nextAttempt(first, 'job_torn', 1);
    await first.enqueue(webhook('/hook/torn'), failed('job_torn'));
    const { nextAttemptAt } = await firstDone;
    await first.stop();
    await appendFile(join(dataDir, 'webhooks', 'outbox.jsonl'), '{"op":"start","id":"evt_');

    const second = await outbox({ dataDir, retryDelaysSec: delays });
    assert.equal(second.pendingCount, 1);
    const resumed = settled(second, 'job_torn');
    await dueNow(second, nextAttemptAt!);
    const done = await resumed;
    assert.deepEqual([done.delivered, done.attempts], [true, 2]);
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2]);
  });

  test('a process killed during an attempt never sends that attempt number again', async () => {
    const dataDir = await tempDir();
    let child: ReturnType<typeof spawn> | undefined;
    const r = route(
      '/hook/crash',
      (n) => (n === 1 ? 'hang' : { status: 200 }),
      (req) => {
        if (req.attempt === 1) child?.kill('SIGKILL');
      },
    );
    const config = {
      dataDir,
      delays: DEFAULT_RETRY_DELAYS_SEC,
      egress,
      webhook: webhook('/hook/crash'),
      job: succeeded('job_crash'),
    };
    const code = `
      import { WebhookOutbox } from ${JSON.stringify(new URL('../src/webhooks/outbox.ts', import.meta.url).href)};
      import { guardedDispatcher } from ${JSON.stringify(new URL('../src/fetch/egress.ts', import.meta.url).href)};
      const cfg = JSON.parse(process.env.OUTBOX_CHILD);
      const o = new WebhookOutbox({ dataDir: cfg.dataDir, retryDelaysSec: cfg.delays, site: 'compressd-test',
        dispatcher: guardedDispatcher(cfg.egress), timeoutMs: 60000 });
      await o.start();
      await o.enqueue(cfg.webhook, cfg.job);
      setInterval(() => {}, 1000);
    `;
    child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      env: { ...process.env, OUTBOX_CHILD: JSON.stringify(config) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const [exitCode, signal] = await once(child, 'exit');
    assert.equal(signal, 'SIGKILL', `child exited with ${exitCode}`);
    assert.deepEqual(r.received.map((x) => x.attempt), [1]);

    const o = await outbox({ dataDir });
    const resumed = settled(o, 'job_crash');
    // The killed attempt counts as spent: the next is due a second (the schedule's) after it started.
    clock.advance(1_000);
    await o.wake();
    const done = await resumed;
    assert.deepEqual([done.delivered, done.attempts], [true, 2]);
    assert.deepEqual(r.received.map((x) => x.attempt), [1, 2]);
    assert.equal(r.received[0]!.body.eventId, r.received[1]!.body.eventId);
  });
});
