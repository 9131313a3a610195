// The job engine in process: the lifecycle's moves over the files backend, with a fake runner
// (no worker threads, no HTTP). Spec: "States and transitions", "Limits"; DESIGN "Flow of a job".
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { ApiError } from '../src/errors.ts';
import type { Runner, RunOutcome, RunRequest } from '../src/jobs/backend.ts';
import { JobEngine } from '../src/jobs/engine.ts';
import { openFilesBackend, type FilesBackend, type FilesStep } from '../src/jobs/files/index.ts';
import { Lifecycle } from '../src/jobs/lifecycle.ts';
import { LocalSpool } from '../src/jobs/spool.ts';
import type { Job, Submission } from '../src/jobs/types.ts';
import { webhookNotifier } from '../src/webhooks/notify.ts';
import { ManualClock } from './helpers/clock.ts';
import { waitUntil } from './helpers/poll.ts';

type Script = (req: RunRequest, signal: AbortSignal) => Promise<RunOutcome>;

/** A runner whose jobs do what the test says; each run is recorded. */
class FakeRunner implements Runner {
  readonly runs: { req: RunRequest; signal: AbortSignal }[] = [];
  script: Script = async (req) => FakeRunner.output(req, 'small');

  constructor(readonly slots: number) {}

  run(req: RunRequest, signal: AbortSignal, progress: (percent: number, phase: string) => void): Promise<RunOutcome> {
    this.runs.push({ req, signal });
    progress(50, 'encoding');
    return this.script(req, signal);
  }

  static async output(req: RunRequest, bytes: string): Promise<RunOutcome> {
    const path = join(req.outDir, 'result.jpg');
    await writeFile(path, bytes);
    return { ok: true, output: { path, format: 'jpg', contentType: 'image/jpeg' } };
  }

  /** Runs until the engine aborts it. */
  // The engine may abort before the runner is reached (a time limit shorter than the set-up on a loaded machine).
  static untilAborted: Script = (_req, signal) =>
    new Promise((resolve) => {
      const stopped = () => resolve({ ok: false, failure: { code: 'jobs.aborted', detail: 'stopped' } });
      if (signal.aborted) stopped();
      else signal.addEventListener('abort', stopped, { once: true });
    });
}

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface Rig {
  dir: string;
  backend: FilesBackend;
  engine: JobEngine;
  runner: FakeRunner;
  ended: Job[];
  started: string[];
  /** The lifecycle's clock: tests move it forward instead of waiting. */
  clock: ManualClock;
  submit(account?: string, opts?: Partial<Submission>): Promise<Job>;
  /** Resolves once `n` jobs have ended (in all). */
  endings(n: number): Promise<Job[]>;
  close(): Promise<void>;
}

let seq = 0;

async function rig(
  opts: { slots?: number; timeoutSeconds?: number; grants?: Record<string, number>; dir?: string; step?: (step: FilesStep) => void } = {},
): Promise<Rig> {
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'compressd-engine-')));
  if (!opts.dir) dirs.push(dir);
  const grants = opts.grants ?? {};
  // The journals' durability is the conformance suite's subject; here fsyncs would only cost time.
  const backend = await openFilesBackend(dir, { granted: (a) => grants[a] ?? 100, sync: false, step: (step) => opts.step?.(step) });
  const notifier = webhookNotifier({ site: 'test', downloadUrl: (id) => `https://c.example.com/api/compress/job/${id}/download?token=t` });
  const clock = new ManualClock();
  const lifecycle = new Lifecycle(backend, notifier, {
    clock: clock.now,
    nodeId: 'local',
    retentionSeconds: 3600,
    admission: { maxOpenPerAccount: 18 },
    claim: { maxRunningPerAccount: 6, maxRunningPerJobType: {} },
    leaseMs: 30_000,
  });
  const runner = new FakeRunner(opts.slots ?? 2);
  const spool = new LocalSpool(backend.blobs.root);
  const engine = new JobEngine({ lifecycle, backend, runner, spool }, { jobTimeoutSeconds: opts.timeoutSeconds ?? 60, retentionSeconds: 3600, recordRetentionSeconds: 3600 });
  const ended: Job[] = [];
  const started: string[] = [];
  const waiters: { n: number; resolve: (jobs: Job[]) => void }[] = [];
  lifecycle.on('started', (job) => started.push(job.id));
  lifecycle.on('ended', (job) => {
    ended.push(structuredClone(job));
    for (const w of waiters.filter((w) => ended.length >= w.n)) w.resolve(ended);
  });
  await engine.start();
  return {
    dir,
    backend,
    engine,
    runner,
    ended,
    started,
    clock,
    async submit(account = 'alice', extra = {}) {
      const id = `job-${++seq}`;
      await backend.blobs.put(id, 'input', Readable.from([Buffer.from('input bytes')]));
      return engine.submit({ id, account, jobType: 'image.jpg-compress', format: 'jpg', fileName: 'photo', options: {}, inputBytes: 11, creditCost: 1, webhook: null, ...extra });
    },
    endings(n) {
      if (ended.length >= n) return Promise.resolve(ended);
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    async close() {
      await engine.stop();
      await backend.close();
    },
  };
}

const WEBHOOK = { url: 'https://hooks.example.com/in', secret: 'whsec_0123456789abcdef', events: ['succeeded', 'failed'] as ('succeeded' | 'failed')[] };
/** In process, a condition holds within moments: look often. */
const SOON = { intervalMs: 2 };

describe('engine moves', () => {
  it('requeue by an operator: a Running job goes back to the queue with its hold, the old attempt is fenced, it runs again', async () => {
    const r = await rig();
    let release!: () => void;
    r.runner.script = (req) => new Promise((resolve) => (release = () => resolve(FakeRunner.output(req, 'small'))));
    const job = await r.submit('alice', { webhook: WEBHOOK, creditCost: 3 });
    await waitUntil('one run started', () => r.runner.runs.length === 1, SOON);
    const requeued = await r.engine.lifecycle.requeue(job.id);
    assert.ok('status' in requeued);
    assert.deepEqual([requeued.status, requeued.lease, requeued.attempts], ['Queued', null, 1]);
    assert.deepEqual(await r.engine.lifecycle.requeue(job.id), { refusal: 'not_running' }, 'a queued job is not requeued');
    assert.deepEqual(await r.engine.lifecycle.requeue('job-none'), { refusal: 'not_found' });
    assert.equal((await r.backend.ledger.summary('alice')).reserved, 3, 'the hold stays');
    release();
    await waitUntil('a second run started', () => r.runner.runs.length === 2, SOON);
    release();
    const [done] = await r.endings(1);
    assert.deepEqual([done!.status, done!.attempts], ['Succeeded', 2]);
    assert.deepEqual(await r.backend.ledger.summary('alice'), { granted: 100, spent: 3, reserved: 0, available: 97 });
    assert.equal(await r.backend.outbox.pendingCount(), 1, 'one webhook');
    await r.close();
  });

  it('reads time from the lifecycle clock: a lease expires and retention passes when the clock moves, without waiting', async () => {
    const r = await rig();
    let release!: () => void;
    r.runner.script = (req) => new Promise((resolve) => (release = () => resolve(FakeRunner.output(req, 'small'))));
    const job = await r.submit('alice');
    await waitUntil('one run started', () => r.runner.runs.length === 1, SOON);
    const running = (await r.engine.get(job.id))!;
    assert.equal(Date.parse(running.lease!.expiresAt), r.clock.at + 30_000, 'the lease runs from the clock');
    r.clock.advance(30_001);
    const requeued = await r.engine.lifecycle.requeueInterrupted(false);
    assert.deepEqual(requeued.map((j) => [j.id, j.status, j.attempts]), [[job.id, 'Queued', 1]]);
    release();
    await waitUntil('a second run started', () => r.runner.runs.length === 2, SOON);
    release();
    const [done] = await r.endings(1);
    assert.equal(done!.attempts, 2, 'the requeued job ran again; the first attempt was fenced');
    assert.equal(done!.completedAt, r.clock.now().toISOString());
    assert.equal(await r.engine.isExpired(done!), false);
    r.clock.advance(3_600_000);
    assert.equal(await r.engine.isExpired(done!), true, 'retention is over by the clock');
    assert.equal((await r.engine.get(job.id))?.expired, true);
    assert.deepEqual(await r.backend.blobs.ids(), []);
    await r.close();
  });

  it('admit → start → succeed: output stored, credits charged, webhook owed, events', async () => {
    const r = await rig();
    const queued = await r.submit('alice', { webhook: WEBHOOK, creditCost: 2 });
    assert.equal(queued.status, 'Queued', 'a submission answers with the job as admitted');
    const [done] = await r.endings(1);
    assert.equal(done!.status, 'Succeeded');
    assert.deepEqual(done!.progress, { percent: 100, phase: 'done' });
    // The output's SHA-256 is taken once as it is stored: the download's ETag.
    assert.deepEqual(done!.output, { format: 'jpg', contentType: 'image/jpeg', bytes: 5, sha256: createHash('sha256').update('small').digest('hex') });
    assert.equal(Date.parse(done!.expiresAt!) - Date.parse(done!.completedAt!), 3_600_000);
    assert.deepEqual(r.started, [queued.id]);
    assert.equal(r.runner.runs[0]!.req.inputPath, join(r.dir, 'spool', queued.id, 'input'));
    assert.equal(await readFile(join(r.dir, 'spool', queued.id, 'output'), 'utf8'), 'small');
    assert.deepEqual(await r.backend.ledger.summary('alice'), { granted: 100, spent: 2, reserved: 0, available: 98 });
    assert.equal(await r.backend.outbox.pendingCount(), 1);
    const [delivery] = await r.backend.outbox.claimDue('local', { now: new Date(), limit: 1, ttlMs: 1000, retryDelaysMs: [0] });
    assert.equal(delivery!.payload.event, 'job.succeeded');
    assert.match(String((delivery!.payload.output as { downloadUrl: string }).downloadUrl), new RegExp(`/job/${queued.id}/download`));
    await r.close();
  });

  it('a submission answers the job as admitted even when a worker claimed it before admission resolved', async () => {
    // The claim comes between the admission's credit hold and its journal write: the job is queued
    // in memory, its record not yet durable, as when the pump of another job's end finds it there.
    let claim = false;
    let r!: Rig;
    r = await rig({ step: (step) => step === 'admit.held' && claim && void r.engine.lifecycle.start() });
    let release!: () => void;
    r.runner.script = (req) => new Promise((resolve) => (release = () => resolve(FakeRunner.output(req, 'small'))));
    claim = true;
    const admitted = await r.submit('alice');
    claim = false;
    assert.equal((await r.engine.get(admitted.id))?.status, 'Running', 'the claim came first');
    assert.equal(admitted.status, 'Queued', 'the answer is the admitted job, not the live one');
    assert.equal(admitted.startedAt, null);
    await r.engine.lifecycle.requeue(admitted.id);
    await waitUntil('one run started', () => r.runner.runs.length === 1, SOON);
    release();
    await r.endings(1);
    await r.close();
  });

  it('fail: the compressor’s code, the detail cut whole (no split surrogate), credits released, files deleted', async () => {
    const r = await rig();
    r.runner.script = async () => ({ ok: false, failure: { code: 'image.truncated', detail: `${'x'.repeat(254)}😀😀` } });
    const job = await r.submit('alice', { webhook: WEBHOOK });
    const [failed] = await r.endings(1);
    assert.equal(failed!.status, 'Failed');
    assert.equal(failed!.error!.code, 'image.truncated');
    assert.equal(failed!.error!.detail, `${'x'.repeat(254)}…`);
    assert.ok(failed!.error!.detail.length <= 256);
    assert.deepEqual(await r.backend.ledger.summary('alice'), { granted: 100, spent: 0, reserved: 0, available: 100 });
    assert.deepEqual(await r.backend.blobs.ids(), []);
    assert.equal(await r.backend.outbox.pendingCount(), 1, 'a failure owes the failed webhook');
    assert.equal((await r.engine.get(job.id))?.status, 'Failed');
    await r.close();
  });

  it('cancel a queued job: Canceled, released, files deleted, never run', async () => {
    const r = await rig({ slots: 1 });
    r.runner.script = FakeRunner.untilAborted;
    const first = await r.submit();
    const second = await r.submit();
    await waitUntil('the job started', () => r.started.length === 1, SOON);
    const canceled = await r.engine.cancel(second.id);
    assert.equal(canceled?.status, 'Canceled');
    assert.equal(await r.backend.blobs.size(second.id, 'input'), null);
    assert.deepEqual(r.runner.runs.map((x) => x.req.jobId), [first.id]);
    assert.equal((await r.backend.ledger.summary('alice')).reserved, 1);
    await r.close();
  });

  it('cancel a running job: its worker is stopped with jobs.canceled, then its files go', async () => {
    const r = await rig();
    r.runner.script = FakeRunner.untilAborted;
    const job = await r.submit('alice', { webhook: WEBHOOK });
    await waitUntil('one run started', () => r.runner.runs.length === 1, SOON);
    assert.equal((await r.engine.cancel(job.id))?.status, 'Canceled');
    assert.equal(r.runner.runs[0]!.signal.reason, 'jobs.canceled');
    await waitUntil('no blobs left', async () => (await r.backend.blobs.ids()).length === 0, SOON);
    assert.deepEqual(await r.backend.blobs.ids(), []);
    assert.equal((await r.engine.get(job.id))?.status, 'Canceled');
    assert.deepEqual(await r.backend.ledger.summary('alice'), { granted: 100, spent: 0, reserved: 0, available: 100 });
    assert.equal(await r.backend.outbox.pendingCount(), 0, 'a cancel owes no webhook');
    await r.close();
  });

  it('expire and forget: files go at retention, the record later; an active job is not deleted', async () => {
    const r = await rig();
    r.runner.script = FakeRunner.untilAborted;
    const active = await r.submit();
    assert.equal(await r.engine.remove(active.id), false);
    r.runner.script = async (req) => FakeRunner.output(req, 'out');
    await r.engine.cancel(active.id);
    const done = await r.submit();
    await r.endings(2);
    const job = (await r.engine.get(done.id))!;
    assert.equal(await r.engine.isExpired(job), false);
    await r.engine.lifecycle.expire(done.id);
    assert.equal((await r.engine.get(done.id))?.expired, true);
    assert.equal(await r.backend.blobs.size(done.id, 'output'), null);
    assert.equal(await r.engine.remove(done.id), true);
    assert.equal(await r.engine.get(done.id), undefined);
    await r.close();
  });

  it('delete right after the job ended (its worker still clearing up) is not refused', async () => {
    const r = await rig();
    r.runner.script = async (req) => FakeRunner.output(req, 'out');
    const job = await r.submit();
    const removed = new Promise<boolean>((resolve) => r.engine.lifecycle.once('ended', () => resolve(r.engine.remove(job.id))));
    assert.equal(await removed, true);
    assert.equal(await r.engine.get(job.id), undefined);
    await r.close();
  });
});

describe('engine refusals', () => {
  it('429 past 18 open jobs, 402 past the credits, 409-style undefined for a second cancel', async () => {
    const r = await rig({ slots: 1, grants: { poor: 1 } });
    r.runner.script = FakeRunner.untilAborted;
    for (let i = 0; i < 18; i++) await r.submit('busy');
    await assert.rejects(r.submit('busy'), (e: unknown) => e instanceof ApiError && e.code === 'queue.limit_exceeded' && e.status === 429 && e.headers['Retry-After'] === '5');
    await assert.rejects(r.engine.assertQueueRoom('busy'), (e: unknown) => e instanceof ApiError && e.status === 429);
    await r.submit('poor');
    await assert.rejects(r.submit('poor'), (e: unknown) => e instanceof ApiError && e.code === 'entitlements.insufficient_credits' && e.status === 402);
    const queued = await r.submit('carol');
    await r.engine.cancel(queued.id);
    assert.equal(await r.engine.cancel(queued.id), undefined);
    assert.equal(await r.engine.cancel('no-such-job'), undefined);
    await r.close();
  });

  it('a finish after the job was canceled is refused: nothing is charged or owed', async () => {
    const r = await rig();
    let release!: () => void;
    r.runner.script = (req) => new Promise((resolve) => (release = () => resolve(FakeRunner.output(req, 'late'))));
    const job = await r.submit('alice', { webhook: WEBHOOK });
    await waitUntil('one run started', () => r.runner.runs.length === 1, SOON);
    const running = (await r.engine.get(job.id))!;
    await r.backend.jobs.move(job.id, { move: 'cancel', at: new Date() });
    assert.equal(await r.engine.lifecycle.fail(running, { code: 'jobs.internal_error', detail: 'x' }), undefined);
    release();
    await waitUntil('no blobs left', async () => (await r.backend.blobs.ids()).length === 0, SOON);
    assert.equal((await r.engine.get(job.id))?.status, 'Canceled');
    assert.deepEqual(await r.backend.ledger.summary('alice'), { granted: 100, spent: 0, reserved: 0, available: 100 });
    assert.equal(await r.backend.outbox.pendingCount(), 0);
    await r.close();
  });
});

describe('engine races, limits and ends', () => {
  for (const first of ['finish', 'cancel'] as const) {
    it(`cancel racing finish (${first} first): exactly one end, credits settled once`, async () => {
      const r = await rig();
      let release!: () => void;
      r.runner.script = (req, signal) =>
        new Promise((resolve) => {
          let output: Promise<RunOutcome> | undefined;
          // After an abort the worker is gone: a late finish of it writes nothing.
          release = () => signal.aborted || resolve((output ??= FakeRunner.output(req, 'done')));
          signal.addEventListener('abort', () => resolve({ ok: false, failure: { code: 'jobs.aborted', detail: 'stopped' } }), { once: true });
        });
      const job = await r.submit('alice', { webhook: WEBHOOK });
      await waitUntil('one run started', () => r.runner.runs.length === 1, SOON);
      if (first === 'finish') release();
      const canceled = await r.engine.cancel(job.id);
      if (first === 'cancel') release();
      await waitUntil('the job ended', () => r.ended.length >= 1, SOON);
      await new Promise((res) => setTimeout(res, 20));
      const final = (await r.engine.get(job.id))!;
      assert.equal(r.ended.length, 1, 'one end');
      assert.equal(final.status, canceled ? 'Canceled' : 'Succeeded');
      const credits = await r.backend.ledger.summary('alice');
      assert.equal(credits.reserved, 0);
      assert.equal(credits.spent, final.status === 'Succeeded' ? 1 : 0);
      assert.equal(await r.backend.outbox.pendingCount(), final.status === 'Succeeded' ? 1 : 0);
      await r.close();
    });
  }

  it('a job past the time limit fails with jobs.timeout and its worker is stopped', async () => {
    const r = await rig({ timeoutSeconds: 0.02 });
    r.runner.script = FakeRunner.untilAborted;
    await r.submit();
    const [failed] = await r.endings(1);
    assert.equal(r.runner.runs[0]!.signal.reason, 'jobs.timeout');
    assert.equal(failed!.status, 'Failed');
    assert.deepEqual(failed!.error, { code: 'jobs.timeout', detail: 'Processing exceeded the 0.02 s time limit.' });
    assert.equal((await r.backend.ledger.summary('alice')).available, 100);
    await r.close();
  });

  it('claims fairly across accounts and never more than the runner’s slots', async () => {
    const r = await rig({ slots: 1 });
    const releases: (() => void)[] = [];
    r.runner.script = (req) => new Promise((resolve) => releases.push(() => resolve(FakeRunner.output(req, 'ok'))));
    const a = [await r.submit('alice'), await r.submit('alice'), await r.submit('alice')];
    const b = await r.submit('bob');
    for (let i = 0; i < 4; i++) {
      await waitUntil('the run released', () => releases.length === i + 1, SOON);
      assert.equal(r.runner.runs.length, i + 1, 'one slot: one job at a time');
      releases[i]!();
    }
    await r.endings(4);
    assert.deepEqual(r.started, [a[0]!.id, b.id, a[1]!.id, a[2]!.id]);
    await r.close();
  });

  it('shutdown hands a running job back to the queue, not counted as a crash; the next start runs it again and charges it once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-engine-'));
    dirs.push(dir);
    const r = await rig({ dir });
    r.runner.script = FakeRunner.untilAborted;
    const job = await r.submit('alice', { creditCost: 3 });
    await waitUntil('one run started', () => r.runner.runs.length === 1, SOON);
    await r.close();
    assert.equal(r.runner.runs[0]!.signal.reason, 'server.shutting_down');
    await assert.rejects(r.engine.submit({ id: 'late', account: 'alice', jobType: 'image.jpg-compress', format: 'jpg', fileName: 'x', options: {}, inputBytes: 1, creditCost: 1, webhook: null }), (e: unknown) => e instanceof ApiError && e.status === 503);

    const again = await rig({ dir });
    const [done] = await again.endings(1);
    assert.equal(done!.id, job.id);
    assert.equal(done!.status, 'Succeeded');
    assert.equal(done!.attempts, 2);
    assert.equal(done!.crashes, 0, 'a graceful stop is no crash');
    assert.deepEqual(await again.backend.ledger.summary('alice'), { granted: 100, spent: 3, reserved: 0, available: 97 });
    await again.close();
  });
});
