// The adapter-conformance suite: what every backend behind src/jobs/backend.ts must do. Written
// once; test/backend-conformance.test.ts runs it against the files backend, and the cluster
// backend runs it unchanged.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { after, describe, it } from 'node:test';
import type { CreditSummary } from '../../src/accounts/credits.ts';
import type { Backend, ClaimLimits, MoveResult } from '../../src/jobs/backend.ts';
import { TRANSITIONS, type AdmissionLimits, type AdmissionRefusal, type Ending, type MoveName, type OwedWebhook } from '../../src/jobs/moves.ts';
import type { Job, JobStatus } from '../../src/jobs/types.ts';
import { newJob } from '../helpers/job-records.ts';
import { waitUntil } from '../helpers/poll.ts';
import { cancel, expire, finish, forget, until } from './moves.ts';

export interface BackendHarness {
  /** A new, empty state (a data dir, a database schema…), named by the returned token. */
  create(): Promise<string>;
  /**
   * Opens a backend over `state`, as a freshly started process would. `grants` are the accounts'
   * granted credits. With `crashAt`, the backend dies at that step of a move: the call throws and
   * the instance is abandoned (never closed), as a killed process leaves it.
   */
  open(state: string, opts: { grants: Record<string, number>; crashAt?: string }): Promise<Backend>;
  /** The steps between two writes of a move where this backend can be killed (none for a backend whose moves are single transactions). */
  crashSteps: readonly string[];
  /** Asserts what the backend keeps beside the job records agrees with them (cluster: the account counters); run after every move of the table's suite. */
  invariants?(b: Backend): Promise<void>;
  destroy(state: string): Promise<void>;
}

const NODE = 'node-a';
const OTHER = 'node-b';
const LEASE = 60_000;
const LIMITS: ClaimLimits = { maxRunningPerAccount: 6, maxRunningPerJobType: {} };
const GRANTS = { alice: 500, bob: 500, carol: 500, poor: 3 };
function owedFor(job: Job, event = 'job.succeeded'): OwedWebhook {
  return { eventId: `evt_${job.id}_${event}`, jobId: job.id, url: job.webhook!.url, secret: job.webhook!.secret, payload: { event, jobId: job.id } };
}

function succeeded(at = new Date()): Ending {
  return {
    status: 'Succeeded',
    completedAt: at.toISOString(),
    expiresAt: new Date(at.getTime() + 3_600_000).toISOString(),
    // The optional fields too, each stored as the runner gave it (the status view rounds, not the store).
    output: { format: 'jpg', contentType: 'image/jpeg', bytes: 10, width: 640, height: 480, perceivedQuality: 87.654321, sha256: 'ab'.repeat(32) },
    progress: { percent: 100, phase: 'done' },
  };
}

function failed(at = new Date()): Ending {
  return { status: 'Failed', completedAt: at.toISOString(), error: { code: 'image.truncated', detail: 'cut short' }, progress: { percent: 10, phase: null } };
}

async function admitted(b: Backend, job: Job): Promise<Job> {
  const r = await b.jobs.admit(job, { maxOpenPerAccount: 18 });
  assert.ok(r.ok, `admit ${job.id}: ${JSON.stringify(r)}`);
  return r.job;
}

/** Admits `job` and claims it (it must be the only startable one). */
async function running(b: Backend, job: Job, node = NODE): Promise<Job> {
  await admitted(b, job);
  const claimed = await b.jobs.claim(node, LIMITS, new Date(), LEASE);
  assert.equal(claimed?.id, job.id);
  return claimed!;
}

/** The ledger and outbox agree with the job records: what recovery must always leave behind. */
async function assertConsistent(b: Backend, jobs: Job[]): Promise<void> {
  const current = await Promise.all(jobs.map((j) => b.jobs.get(j.id)));
  const holds = new Set((await b.ledger.openHolds()).map((h) => h.jobId));
  for (const job of current) {
    if (!job) continue;
    const active = job.status === 'Queued' || job.status === 'Running';
    assert.equal(holds.has(job.id), active, `${job.id} is ${job.status}: its hold must be ${active ? 'open' : 'settled'}`);
  }
  for (const id of holds) assert.ok(current.some((j) => j?.id === id), `hold ${id} has no job`);
  const accounts = new Set(jobs.map((j) => j.account));
  for (const account of accounts) {
    const mine = current.filter((j): j is Job => j?.account === account);
    const sum = (statuses: JobStatus[]) => mine.filter((j) => statuses.includes(j.status)).reduce((n, j) => n + j.creditCost, 0);
    const s = await b.ledger.summary(account);
    assert.equal(s.spent, sum(['Succeeded']), `${account}: spent is what Succeeded jobs cost, once each`);
    assert.equal(s.reserved, sum(['Queued', 'Running']), `${account}: reserved is what open jobs hold`);
  }
}

export function backendConformance(name: string, harness: BackendHarness): void {
  const states: string[] = [];
  const opened: Backend[] = [];
  after(async () => {
    for (const b of opened) await b.close().catch(() => {});
    for (const s of states) await harness.destroy(s);
  });

  async function fresh(): Promise<{ state: string; b: Backend }> {
    const state = await harness.create();
    states.push(state);
    const b = await harness.open(state, { grants: GRANTS });
    opened.push(b);
    return { state, b };
  }

  async function reopen(state: string, b: Backend): Promise<Backend> {
    await b.close();
    const again = await harness.open(state, { grants: GRANTS });
    opened.push(again);
    return again;
  }

  describe(`${name} backend: admission`, () => {
    it('admits a Queued job with its credits held; a replayed admit holds nothing more', async () => {
      const { b } = await fresh();
      const job = newJob('alice', { creditCost: 4 });
      const first = await admitted(b, job);
      assert.equal(first.status, 'Queued');
      assert.deepEqual(await b.ledger.summary('alice'), { granted: 500, spent: 0, reserved: 4, available: 496 });
      const again = await b.jobs.admit(job, { maxOpenPerAccount: 18 });
      assert.ok(again.ok);
      assert.equal((await b.ledger.summary('alice')).reserved, 4);
      assert.deepEqual(await b.jobs.counts('alice'), { queued: 1, running: 0 });
    });

    it('concurrent admissions: exactly the per-account limit of open jobs, other accounts unaffected', async () => {
      const { b } = await fresh();
      const results = await Promise.all(Array.from({ length: 25 }, () => b.jobs.admit(newJob('alice'), { maxOpenPerAccount: 18 })));
      assert.equal(results.filter((r) => r.ok).length, 18);
      assert.ok(results.filter((r) => !r.ok).every((r) => !r.ok && r.refusal === 'queue.limit_exceeded'));
      assert.equal((await b.ledger.summary('alice')).reserved, 18, 'a refused admission holds nothing');
      assert.ok((await b.jobs.admit(newJob('bob'), { maxOpenPerAccount: 18 })).ok);
      // Running jobs count as open too.
      await b.jobs.claim(NODE, LIMITS, new Date(), LEASE);
      assert.equal((await b.jobs.admit(newJob('alice'), { maxOpenPerAccount: 18 })).ok, false);
    });

    it('concurrent admissions never overspend credits', async () => {
      const { b } = await fresh();
      const results = await Promise.all(Array.from({ length: 5 }, () => b.jobs.admit(newJob('poor'), { maxOpenPerAccount: 18 })));
      assert.equal(results.filter((r) => r.ok).length, 3);
      const refused = results.find((r) => !r.ok);
      assert.deepEqual(refused, { ok: false, refusal: 'entitlements.insufficient_credits', required: 1, available: 0 });
      assert.deepEqual(await b.ledger.summary('poor'), { granted: 3, spent: 0, reserved: 3, available: 0 });
    });
  });

  describe(`${name} backend: idempotency keys`, () => {
    const OPEN = { maxOpenPerAccount: 18 };
    const HOUR = 3_600_000;
    /** A job created at `at` (epoch ms): keys are remembered for 24 h from their job's creation. */
    const jobAt = (account: string, at: number, opts: Partial<Job> = {}) => newJob(account, { createdAt: new Date(at).toISOString(), ...opts });
    const accepted = (j: Job) => ({ id: j.id, fileName: j.fileName, format: j.format, jobType: j.jobType, createdAt: j.createdAt });

    it('a key binds in the admission; the same key again gets the first job, before limits and credits; accounts are independent', async () => {
      const { b } = await fresh();
      const now = Date.now();
      const first = jobAt('poor', now, { creditCost: 3 });
      assert.ok((await b.jobs.admit(first, OPEN, { key: 'k-1', fingerprint: 'f1' })).ok);
      const remembered = { account: 'poor', key: 'k-1', fingerprint: 'f1', job: accepted(first) };
      // The account has no credits left: a key already bound is still answered with its job.
      const again = await b.jobs.admit(jobAt('poor', now + 1), OPEN, { key: 'k-1', fingerprint: 'f2' });
      assert.deepEqual(again, { ok: false, refusal: 'idempotency.key_taken', remembered });
      assert.deepEqual(await b.jobs.rememberedKey('poor', 'k-1', new Date(now + 1000)), remembered);
      assert.equal(await b.jobs.rememberedKey('poor', 'k-2', new Date(now + 1000)), undefined);
      assert.equal(await b.jobs.rememberedKey('bob', 'k-1', new Date(now + 1000)), undefined);
      assert.ok((await b.jobs.admit(jobAt('bob', now + 2), OPEN, { key: 'k-1', fingerprint: 'f1' })).ok, 'another account’s key is another key');
      assert.deepEqual(await b.ledger.summary('poor'), { granted: 3, spent: 0, reserved: 3, available: 0 });
      assert.deepEqual(await b.jobs.counts('poor'), { queued: 1, running: 0 });
    });

    it('concurrent admissions with one key store one job and hold its credits once', async () => {
      const { b } = await fresh();
      const now = Date.now();
      const jobs = Array.from({ length: 8 }, (_, i) => jobAt('alice', now + i, { creditCost: 5 }));
      const results = await Promise.all(jobs.map((j) => b.jobs.admit(j, OPEN, { key: 'same', fingerprint: 'f' })));
      const won = results.filter((r) => r.ok);
      assert.equal(won.length, 1);
      const winner = won[0]!.ok ? won[0]!.job.id : '';
      for (const r of results) if (!r.ok) assert.ok(r.refusal === 'idempotency.key_taken' && r.remembered.job.id === winner);
      assert.equal((await b.ledger.summary('alice')).reserved, 5);
      assert.deepEqual(await b.jobs.counts('alice'), { queued: 1, running: 0 });
    });

    it('a refused admission leaves its key free', async () => {
      const { b } = await fresh();
      const now = Date.now();
      const refused = await b.jobs.admit(jobAt('poor', now, { creditCost: 10 }), OPEN, { key: 'k', fingerprint: 'f' });
      assert.equal(!refused.ok && refused.refusal, 'entitlements.insufficient_credits');
      assert.equal(await b.jobs.rememberedKey('poor', 'k', new Date(now)), undefined);
      const job = jobAt('poor', now + 1, { creditCost: 1 });
      assert.ok((await b.jobs.admit(job, OPEN, { key: 'k', fingerprint: 'f' })).ok);
      assert.equal((await b.jobs.rememberedKey('poor', 'k', new Date(now + 2)))?.job.id, job.id);
    });

    it('keys survive restarts and the forgetting of their job; after 24 h a key is free and the sweep deletes it', async () => {
      const { state, b } = await fresh();
      const now = Date.now();
      const job = jobAt('alice', now);
      assert.ok((await b.jobs.admit(job, OPEN, { key: 'kept', fingerprint: 'f' })).ok);
      await cancel(b, job.id, new Date(now));
      assert.equal(await forget(b, job.id), true);
      const remembered = { account: 'alice', key: 'kept', fingerprint: 'f', job: accepted(job) };
      assert.deepEqual(await b.jobs.rememberedKey('alice', 'kept', new Date(now + HOUR)), remembered);
      let again = await reopen(state, b);
      assert.deepEqual(await again.jobs.rememberedKey('alice', 'kept', new Date(now + HOUR)), remembered, 'after a restart');
      again = await reopen(state, again);
      assert.deepEqual(await again.jobs.rememberedKey('alice', 'kept', new Date(now + HOUR)), remembered, 'after a second restart');

      const later = now + 24 * HOUR + 1;
      assert.equal(await again.jobs.rememberedKey('alice', 'kept', new Date(later)), undefined, 'past 24 h the key is not remembered');
      const next = jobAt('alice', later);
      assert.ok((await again.jobs.admit(next, OPEN, { key: 'kept', fingerprint: 'g' })).ok, 'past 24 h the key binds anew');
      assert.equal((await again.jobs.rememberedKey('alice', 'kept', new Date(later)))?.job.id, next.id);
      assert.equal(await again.jobs.forgetKeys(new Date(later)), 0, 'a key younger than the cutoff stays');
      assert.equal(await again.jobs.forgetKeys(new Date(later + 1)), 1);
      assert.equal(await again.jobs.rememberedKey('alice', 'kept', new Date(later)), undefined);
    });

    if (harness.crashSteps.includes('admit.held')) {
      it('a crash between the hold and the job record leaves neither the job nor its key', async () => {
        const state = await harness.create();
        states.push(state);
        const dying = await harness.open(state, { grants: GRANTS, crashAt: 'admit.held' });
        const job = jobAt('alice', Date.now(), { creditCost: 2 });
        await assert.rejects(dying.jobs.admit(job, OPEN, { key: 'crash', fingerprint: 'f' }));
        const b = await harness.open(state, { grants: GRANTS });
        opened.push(b);
        await b.recover();
        assert.equal(await b.jobs.get(job.id), undefined);
        assert.equal(await b.jobs.rememberedKey('alice', 'crash', new Date()), undefined);
        assert.equal((await b.ledger.summary('alice')).reserved, 0);
        assert.ok((await b.jobs.admit(jobAt('alice', Date.now()), OPEN, { key: 'crash', fingerprint: 'f' })).ok);
      });
    }
  });

  describe(`${name} backend: claiming`, () => {
    it('claims fairly: least recently served account first, FIFO within an account', async () => {
      const { b } = await fresh();
      const a = [newJob('alice'), newJob('alice'), newJob('alice'), newJob('alice')];
      const bb = [newJob('bob'), newJob('bob')];
      const c = [newJob('carol')];
      for (const j of [...a, ...bb, ...c]) await admitted(b, j);
      const order: string[] = [];
      for (let job = await b.jobs.claim(NODE, LIMITS, new Date(), LEASE); job; job = await b.jobs.claim(NODE, LIMITS, new Date(), LEASE)) order.push(job.id);
      assert.deepEqual(order, [a[0], bb[0], c[0], a[1], bb[1], a[2], a[3]].map((j) => j!.id));
    });

    it('claims respect the running limits per account and per job type', async () => {
      const { b } = await fresh();
      for (let i = 0; i < 4; i++) await admitted(b, newJob('alice'));
      await admitted(b, newJob('alice', { jobType: 'document.pdf-compress', format: 'pdf' }));
      const limits: ClaimLimits = { maxRunningPerAccount: 3, maxRunningPerJobType: { 'image.jpg-compress': 2 } };
      const claimed = [];
      for (let job = await b.jobs.claim(NODE, limits, new Date(), LEASE); job; job = await b.jobs.claim(NODE, limits, new Date(), LEASE)) claimed.push(job.jobType);
      assert.deepEqual(claimed, ['image.jpg-compress', 'image.jpg-compress', 'document.pdf-compress']);
      assert.deepEqual(await b.jobs.counts('alice'), { queued: 2, running: 3 });
    });

    it('concurrent claims never hand out one job twice; a claim sets attempt, lease and startedAt', async () => {
      const { b } = await fresh();
      for (let i = 0; i < 4; i++) await admitted(b, newJob(['alice', 'bob'][i % 2]!));
      const claims = await Promise.all(Array.from({ length: 8 }, () => b.jobs.claim(NODE, LIMITS, new Date(), LEASE)));
      const got = claims.filter((j): j is Job => j !== null);
      assert.equal(got.length, 4);
      assert.equal(new Set(got.map((j) => j.id)).size, 4);
      for (const j of got) {
        assert.equal(j.status, 'Running');
        assert.equal(j.attempts, 1);
        assert.equal(j.lease?.nodeId, NODE);
        assert.ok(Date.parse(j.lease!.expiresAt) > Date.now());
        assert.ok(j.startedAt);
      }
    });
  });

  describe(`${name} backend: finishing`, () => {
    it('a finish charges the hold and owes the webhook in one step; a replayed finish charges and owes nothing more', async () => {
      const { b } = await fresh();
      const job = await running(b, newJob('alice', { creditCost: 3 }));
      const owed = owedFor(job);
      const first = await finish(b, job.id, NODE, 1, succeeded(), owed);
      assert.ok(first.ok);
      assert.equal(first.job.status, 'Succeeded');
      assert.equal(first.job.lease, null);
      assert.equal((await b.ledger.summary('alice')).spent, 3);
      assert.equal(await b.outbox.pendingCount(), 1);
      const replay = await finish(b, job.id, NODE, 1, succeeded(), owed);
      assert.ok(replay.ok, 'a replay is answered as the first finish was');
      assert.deepEqual(await b.ledger.summary('alice'), { granted: 500, spent: 3, reserved: 0, available: 497 });
      assert.equal(await b.outbox.pendingCount(), 1);
      await b.ledger.settle(job.id, 'charge');
      await b.ledger.settle(job.id, 'release');
      assert.equal((await b.ledger.summary('alice')).spent, 3, 'the ledger is idempotent by job id');
    });

    it('a finish replayed from another node is refused, and one of another status too: one rule for every backend', async () => {
      const { b } = await fresh();
      const job = await running(b, newJob('alice', { creditCost: 2 }));
      assert.ok((await finish(b, job.id, NODE, 1, succeeded(), owedFor(job))).ok);
      const stored = await b.jobs.get(job.id);
      const elsewhere = await finish(b, job.id, OTHER, 1, succeeded(), owedFor(job));
      assert.deepEqual([elsewhere.ok, !elsewhere.ok && elsewhere.refusal], [false, 'not_running']);
      const otherEnd = await finish(b, job.id, NODE, 1, failed(), owedFor(job, 'job.failed'));
      assert.deepEqual([otherEnd.ok, !otherEnd.ok && otherEnd.refusal], [false, 'not_running']);
      const same = await finish(b, job.id, NODE, 1, succeeded(), owedFor(job));
      assert.deepEqual([same.ok, same.ok && same.replay], [true, true]);
      assert.deepEqual(await b.jobs.get(job.id), stored);
      assert.deepEqual(await b.ledger.summary('alice'), { granted: 500, spent: 2, reserved: 0, available: 498 });
      assert.equal(await b.outbox.pendingCount(), 1);
    });

    it('a failure releases the hold and owes the failed webhook', async () => {
      const { b } = await fresh();
      const job = await running(b, newJob('alice', { creditCost: 2 }));
      const r = await finish(b, job.id, NODE, 1, failed(), owedFor(job, 'job.failed'));
      assert.ok(r.ok);
      assert.deepEqual(r.job.error, { code: 'image.truncated', detail: 'cut short' });
      assert.deepEqual(await b.ledger.summary('alice'), { granted: 500, spent: 0, reserved: 0, available: 500 });
      assert.equal(await b.outbox.pendingCount(), 1);
    });

    it('the attempt number fences a node whose lease expired: its renew and finish are refused', async () => {
      const { b } = await fresh();
      const job = await admitted(b, newJob('alice'));
      const t0 = new Date();
      const stale = await b.jobs.claim(NODE, LIMITS, t0, 1_000);
      assert.equal(stale?.attempts, 1);
      assert.deepEqual(await b.jobs.nextLeaseExpiry(OTHER), until(1_000, t0), 'another node watches the lease');
      assert.equal(await b.jobs.nextLeaseExpiry(NODE), null, 'its own node does not');
      assert.deepEqual(await b.jobs.requeueInterrupted(until(999, t0)), [], 'a live lease stays');
      const requeued = await b.jobs.requeueInterrupted(until(1_001, t0));
      assert.deepEqual(requeued.map((j) => [j.id, j.status, j.attempts, j.lease, j.crashes]), [[job.id, 'Queued', 1, null, 1]], 'a run whose lease expired counts as a crash');
      assert.equal(await b.jobs.nextLeaseExpiry(OTHER), null);
      assert.equal((await b.ledger.summary('alice')).reserved, 1, 'a requeued job keeps its hold');
      const fresh2 = await b.jobs.claim(OTHER, LIMITS, new Date(), LEASE);
      assert.equal(fresh2?.attempts, 2);
      assert.equal(await b.jobs.renew(job.id, NODE, 1, until(LEASE)), false);
      const late = await finish(b, job.id, NODE, 1, succeeded(), owedFor(job));
      assert.deepEqual([late.ok, !late.ok && late.refusal], [false, 'fenced']);
      assert.equal(await b.jobs.renew(job.id, OTHER, 2, until(LEASE)), true);
      assert.ok((await finish(b, job.id, OTHER, 2, succeeded(), owedFor(job))).ok);
      assert.equal((await b.ledger.summary('alice')).spent, 1, 'charged once');
      assert.equal(await b.outbox.pendingCount(), 1);
    });

    it('a live lease is not requeued, unless its node restarted', async () => {
      const { b } = await fresh();
      const job = await running(b, newJob('alice'));
      assert.deepEqual(await b.jobs.requeueInterrupted(new Date()), []);
      assert.deepEqual(await b.jobs.requeueInterrupted(new Date(), OTHER), []);
      const requeued = await b.jobs.requeueInterrupted(new Date(), NODE);
      assert.deepEqual(requeued.map((j) => j.id), [job.id]);
      assert.equal((await b.jobs.claim(NODE, LIMITS, new Date(), LEASE))?.attempts, 2);
    });
  });

  describe(`${name} backend: cancel`, () => {
    it('cancels Queued and Running jobs, releasing their holds and telling every listener; ended jobs refuse', async () => {
      const { b } = await fresh();
      const heard: string[] = [];
      const off = b.jobs.onCancel((id) => heard.push(id));
      // A backend that hears cancels over a connection of its own says when it listens (a loaded machine may take seconds).
      await (b.jobs as { listeningReady?(): Promise<void> }).listeningReady?.();
      const runningJob = await running(b, newJob('alice'));
      const queued = await admitted(b, newJob('alice'));
      for (const job of [queued, runningJob]) {
        const canceled = await cancel(b, job.id, new Date());
        assert.equal(canceled?.status, 'Canceled');
        assert.equal(canceled?.lease, null);
        assert.ok(canceled?.completedAt);
      }
      assert.equal(await cancel(b, queued.id, new Date()), undefined);
      assert.equal(await b.jobs.renew(runningJob.id, NODE, 1, until(LEASE)), false, 'the running node learns at its next renew');
      const late = await finish(b, runningJob.id, NODE, 1, succeeded(), owedFor(runningJob));
      assert.deepEqual([late.ok, !late.ok && late.refusal], [false, 'not_running']);
      await waitUntil('both cancels heard', () => heard.length >= 2, { timeoutMs: 10_000, intervalMs: 20 }).catch(() => undefined);
      assert.deepEqual(heard.sort(), [queued.id, runningJob.id].sort());
      off();
      assert.deepEqual(await b.ledger.summary('alice'), { granted: 500, spent: 0, reserved: 0, available: 500 });
      assert.equal(await b.outbox.pendingCount(), 0, 'a canceled job owes no webhook');
    });
  });

  describe(`${name} backend: the transition table`, () => {
    /** A job in each status, for trying every move on; each of a job type of its own (see `start`). */
    async function oneOfEach(b: Backend): Promise<Record<JobStatus, Job>> {
      const r = await running(b, newJob('bob', { jobType: 'type.running' }));
      const s = await running(b, newJob('carol', { creditCost: 2, jobType: 'type.succeeded' }));
      await finish(b, s.id, NODE, 1, succeeded(), null);
      const f = await running(b, newJob('carol', { creditCost: 3, jobType: 'type.failed' }));
      await finish(b, f.id, NODE, 1, failed(), null);
      const c = await admitted(b, newJob('carol', { creditCost: 4, jobType: 'type.canceled' }));
      await cancel(b, c.id, new Date());
      const q = await admitted(b, newJob('alice', { creditCost: 5, jobType: 'type.queued' }));
      const get = async (j: Job) => structuredClone((await b.jobs.get(j.id))!);
      // Running first: requeueInterrupted moves every job of the node at once.
      return { Running: await get(r), Queued: await get(q), Succeeded: await get(s), Failed: await get(f), Canceled: await get(c) };
    }

    const AT = new Date(Date.UTC(2026, 5, 1));
    /** Each move tried on one job: whether it was made, and the refusal when it was not. */
    const tries: Record<Exclude<MoveName, 'admit'>, (b: Backend, job: Job) => Promise<{ done: boolean; refusal?: string }>> = {
      // Claims limited to the job's own type: only that job may be picked.
      start: async (b, job) => ({ done: (await b.jobs.claim(NODE, onlyType(job.jobType), AT, LEASE))?.id === job.id }),
      succeed: (b, job) => answer(finish(b, job.id, NODE, job.attempts, succeeded(AT), owedFor(job))),
      fail: (b, job) => answer(finish(b, job.id, NODE, job.attempts, failed(AT), owedFor(job, 'job.failed'))),
      cancel: (b, job) => answer(b.jobs.move(job.id, { move: 'cancel', at: AT })),
      requeueInterrupted: async (b, job) => ({ done: (await b.jobs.requeueInterrupted(AT, NODE)).some((j) => j.id === job.id) }),
      crash: async (b, job) => ({
        done: (await b.jobs.requeueInterrupted(AT, NODE, (j) => ({ move: 'crash', ending: failed(AT) as Extract<Ending, { status: 'Failed' }>, owed: owedFor(j, 'job.failed') }))).some((j) => j.id === job.id),
      }),
      handBack: (b, job) => answer(b.jobs.move(job.id, { move: 'handBack', nodeId: NODE, attempt: job.attempts })),
      requeue: (b, job) => answer(b.jobs.move(job.id, { move: 'requeue' })),
      expire: (b, job) => answer(b.jobs.move(job.id, { move: 'expire' })),
      forget: (b, job) => answer(b.jobs.move(job.id, { move: 'forget' })),
    };
    const TYPES = ['type.running', 'type.queued', 'type.succeeded', 'type.failed', 'type.canceled'];
    const onlyType = (jobType: string): ClaimLimits => ({ maxRunningPerAccount: 6, maxRunningPerJobType: Object.fromEntries(TYPES.map((t) => [t, t === jobType ? 6 : 0])) });
    async function answer(r: Promise<MoveResult>): Promise<{ done: boolean; refusal?: string }> {
      const got = await r;
      return got.ok ? { done: !got.replay } : { done: false, refusal: got.refusal };
    }

    /** The fields a move leaves, by the table's `to`, beyond what its own arguments set. */
    function expectFields(move: MoveName, before: Job, after: Job | undefined): void {
      const t = TRANSITIONS[move];
      if (t.to === 'gone') return assert.equal(after, undefined, `${move} deletes the record`);
      assert.ok(after);
      assert.equal(after.status, t.to === 'same' ? before.status : t.to);
      assert.equal(after.lease === null, after.status !== 'Running', 'a lease exactly while Running');
      assert.equal(after.attempts, before.attempts + (move === 'start' ? 1 : 0), 'only start counts an attempt');
      assert.equal(after.crashes, before.crashes + (move === 'requeueInterrupted' || move === 'crash' ? 1 : 0), 'only a run that ended with its process counts a crash');
      if (move === 'start') assert.deepEqual([after.startedAt, after.lease?.nodeId, after.lease?.expiresAt], [AT.toISOString(), NODE, new Date(AT.getTime() + LEASE).toISOString()]);
      if (t.to === 'Queued') assert.deepEqual(after.progress, { percent: 0, phase: null });
      if (t.to === 'Canceled') assert.deepEqual([after.completedAt, after.progress.phase], [AT.toISOString(), null]);
      if (t.to === 'Succeeded') assert.deepEqual([after.completedAt, after.output, after.error], [AT.toISOString(), (succeeded(AT) as Extract<Ending, { status: 'Succeeded' }>).output, null]);
      if (t.to === 'Failed') assert.deepEqual([after.completedAt, after.output, after.error], [AT.toISOString(), null, (failed(AT) as Extract<Ending, { status: 'Failed' }>).error]);
      if (move === 'expire') assert.equal(after.expired, true);
    }

    /** The ledger moves exactly as the table's credit effect says, for the job's cost. */
    function expectCredits(move: MoveName, job: Job, before: CreditSummary, after: CreditSummary): void {
      const c = job.creditCost;
      const expected = {
        hold: { spent: before.spent, reserved: before.reserved + c },
        charge: { spent: before.spent + c, reserved: before.reserved - c },
        release: { spent: before.spent, reserved: before.reserved - c },
        none: { spent: before.spent, reserved: before.reserved },
      }[TRANSITIONS[move].credits];
      assert.deepEqual({ spent: after.spent, reserved: after.reserved }, expected, `${move}: credits ${TRANSITIONS[move].credits}`);
    }

    for (const [move, attempt] of Object.entries(tries) as [Exclude<MoveName, 'admit'>, (b: Backend, job: Job) => Promise<{ done: boolean; refusal?: string }>][]) {
      const t = TRANSITIONS[move];
      it(`${move}: allowed exactly from ${t.from.join(', ')}; fields → ${t.to}, credits ${t.credits}, webhook ${t.owesWebhook ? 'owed' : 'none'}; refused as ${t.refusal}`, async () => {
        const { b } = await fresh();
        const jobs = await oneOfEach(b);
        await harness.invariants?.(b);
        for (const [status, job] of Object.entries(jobs) as [JobStatus, Job][]) {
          const credits = await b.ledger.summary(job.account);
          const pending = await b.outbox.pendingCount();
          const got = await attempt(b, job);
          await harness.invariants?.(b);
          const allowedHere = t.from.includes(status);
          assert.equal(got.done, allowedHere, `${move} from ${status}`);
          const after = await b.jobs.get(job.id);
          if (!allowedHere) {
            if (got.refusal !== undefined) assert.equal(got.refusal, t.refusal, `${move} from ${status}: the move's named refusal`);
            assert.deepEqual(after, job, `a refused ${move} from ${status} changes nothing`);
            assert.deepEqual(await b.ledger.summary(job.account), credits);
            assert.equal(await b.outbox.pendingCount(), pending);
            continue;
          }
          expectFields(move, job, after);
          expectCredits(move, job, credits, await b.ledger.summary(job.account));
          assert.equal(await b.outbox.pendingCount(), pending + (t.owesWebhook ? 1 : 0), `${move}: webhook ${t.owesWebhook ? 'owed' : 'not owed'}`);
        }
      });
    }

    it(`admit: creates a ${TRANSITIONS.admit.to} job, credits ${TRANSITIONS.admit.credits}, webhook none; its id again is a replay`, async () => {
      const { b } = await fresh();
      const before = await b.ledger.summary('alice');
      const job = await admitted(b, newJob('alice', { creditCost: 7 }));
      await harness.invariants?.(b);
      assert.equal(job.status, TRANSITIONS.admit.to);
      expectCredits('admit', job, before, await b.ledger.summary('alice'));
      assert.equal(await b.outbox.pendingCount(), 0);
      const again = await b.jobs.admit(job, { maxOpenPerAccount: 18 });
      assert.deepEqual([again.ok, again.ok && again.job.id], [true, job.id]);
      expectCredits('admit', job, before, await b.ledger.summary('alice'));
    });

    /** For each of the table's admission checks, an account that fails exactly that one (a new check needs its entry here). */
    const failing: Record<AdmissionRefusal, (b: Backend) => Promise<{ job: Job; limits: AdmissionLimits }>> = {
      'queue.limit_exceeded': async (b) => {
        await admitted(b, newJob('alice'));
        return { job: newJob('alice'), limits: { maxOpenPerAccount: 1 } };
      },
      'entitlements.insufficient_credits': async () => ({ job: newJob('poor', { creditCost: GRANTS.poor + 1 }), limits: { maxOpenPerAccount: 18 } }),
    };

    for (const check of TRANSITIONS.admit.checks ?? []) {
      it(`admit: refused as ${check} when the account fails that check, writing nothing`, async () => {
        const { b } = await fresh();
        const { job, limits } = await failing[check](b);
        const [credits, counts] = [await b.ledger.summary(job.account), await b.jobs.counts(job.account)];
        const r = await b.jobs.admit(job, limits);
        assert.equal(!r.ok && r.refusal, check);
        assert.equal(await b.jobs.get(job.id), undefined);
        assert.deepEqual(await b.ledger.summary(job.account), credits);
        assert.deepEqual(await b.jobs.counts(job.account), counts);
        await harness.invariants?.(b);
      });
    }

    it('a finish from a node that does not hold the lease is fenced, whatever the attempt', async () => {
      const { b } = await fresh();
      const job = await running(b, newJob('alice'));
      for (const [node, attempt] of [[OTHER, 1], [NODE, 2], [OTHER, 2]] as const) {
        const r = await finish(b, job.id, node, attempt, succeeded(), owedFor(job));
        assert.deepEqual([r.ok, !r.ok && r.refusal], [false, 'fenced'], `${node} attempt ${attempt}`);
      }
      assert.deepEqual(await b.jobs.get(job.id), job);
      await harness.invariants?.(b);
    });
  });

  describe(`${name} backend: durability and recovery`, () => {
    it('a reopened backend has every job, hold and owed webhook', async () => {
      const { state, b } = await fresh();
      const r = await running(b, newJob('bob'));
      const s = await running(b, newJob('carol', { creditCost: 5 }));
      await finish(b, s.id, NODE, 1, succeeded(), owedFor(s));
      const q = await admitted(b, newJob('alice', { creditCost: 2 }));
      const again = await reopen(state, b);
      assert.equal((await again.jobs.get(q.id))?.status, 'Queued');
      assert.equal((await again.jobs.get(r.id))?.status, 'Running');
      assert.equal((await again.jobs.get(s.id))?.status, 'Succeeded');
      assert.deepEqual((await again.jobs.get(s.id))?.output, (succeeded() as Extract<Ending, { status: 'Succeeded' }>).output);
      assert.equal(await again.outbox.pendingCount(), 1);
      await assertConsistent(again, [q, r, s]);
      assert.deepEqual(await again.jobs.requeueInterrupted(new Date(), NODE).then((js) => js.map((j) => j.id)), [r.id]);
    });

    for (const step of harness.crashSteps) {
      it(`a crash at ${step} leaves a state that recovery completes`, async () => {
        const state = await harness.create();
        states.push(state);
        const dying = await harness.open(state, { grants: GRANTS, crashAt: step });
        const jobs = [newJob('alice', { creditCost: 2 }), newJob('bob', { creditCost: 3 }), newJob('carol', { creditCost: 4 })];
        let crashed = false;
        try {
          const [win, lose, drop] = jobs as [Job, Job, Job];
          await running(dying, win);
          await finish(dying, win.id, NODE, 1, succeeded(), owedFor(win));
          await running(dying, lose);
          await finish(dying, lose.id, NODE, 1, failed(), owedFor(lose, 'job.failed'));
          await admitted(dying, drop);
          await cancel(dying, drop.id, new Date());
        } catch {
          crashed = true;
        }
        assert.ok(crashed, `the backend was to die at ${step}`);
        const b = await harness.open(state, { grants: GRANTS });
        opened.push(b);
        await b.recover();
        await assertConsistent(b, jobs);
        const ended = await Promise.all(jobs.map((j) => b.jobs.get(j.id)));
        const owing = ended.filter((j) => j?.status === 'Succeeded' || j?.status === 'Failed').length;
        assert.equal(await b.outbox.pendingCount(), owing, 'every ended job owes its webhook once');
        assert.deepEqual(await b.recover(), { charged: 0, released: 0, webhooksEnqueued: 0, blobsDeleted: 0 }, 'recovery is idempotent');
        // What the crash interrupted can go on: open jobs still finish.
        await b.jobs.requeueInterrupted(new Date(), NODE);
        for (let job = await b.jobs.claim(NODE, LIMITS, new Date(), LEASE); job; job = await b.jobs.claim(NODE, LIMITS, new Date(), LEASE)) {
          assert.ok((await finish(b, job.id, NODE, job.attempts, succeeded(), owedFor(job))).ok);
        }
        await assertConsistent(b, jobs);
      });
    }
  });

  describe(`${name} backend: retention and forgetting`, () => {
    it('lists ended jobs by completion; expire and forget delete records; recovery deletes the blobs they leave', async () => {
      const { b } = await fresh();
      const old = await running(b, newJob('alice'));
      await finish(b, old.id, NODE, 1, succeeded(new Date(Date.now() - 7_200_000)), null);
      const recent = await running(b, newJob('alice'));
      await finish(b, recent.id, NODE, 1, succeeded(), null);
      const queued = await admitted(b, newJob('alice'));
      for (const j of [old, recent, queued]) await b.blobs.put(j.id, 'input', Readable.from([Buffer.from(`in ${j.id}`)]));

      const cutoff = new Date(Date.now() - 3_600_000);
      assert.deepEqual((await b.jobs.ended({ completedBefore: cutoff, unexpired: true, limit: 10 })).map((j) => j.id), [old.id]);
      assert.equal((await expire(b, old.id))?.expired, true);
      assert.equal((await expire(b, old.id))?.expired, true, 'expire is idempotent');
      assert.deepEqual(await b.jobs.ended({ completedBefore: cutoff, unexpired: true, limit: 10 }), []);
      assert.deepEqual((await b.jobs.ended({ completedBefore: cutoff, unexpired: false, limit: 10 })).map((j) => j.id), [old.id]);
      assert.equal(await forget(b, queued.id), false, 'an open job is not forgotten');
      assert.equal(await forget(b, recent.id), true);
      assert.equal(await b.jobs.get(recent.id), undefined);
      assert.equal(await forget(b, recent.id), true, 'forgetting is idempotent');

      const report = await b.recover();
      assert.equal(report.blobsDeleted, 2, 'the expired job and the forgotten one lose their blobs');
      assert.deepEqual(await b.blobs.ids(), [queued.id]);
    });
  });

  describe(`${name} backend: blobs`, () => {
    it('stores, streams (whole or a byte range), measures and deletes a job’s input and output', async () => {
      const { b } = await fresh();
      assert.equal(await b.blobs.put('blob-1', 'input', Readable.from([Buffer.from('hello '), Buffer.from('world')])), 11);
      assert.equal(await b.blobs.size('blob-1', 'input'), 11);
      assert.equal(await b.blobs.size('blob-1', 'output'), null);
      assert.equal(await b.blobs.get('blob-1', 'output'), null);
      const got = await b.blobs.get('blob-1', 'input');
      assert.equal(got?.size, 11);
      assert.equal(await text(got!.body), 'hello world');
      const part = await b.blobs.get('blob-1', 'input', { start: 6, end: 9 });
      assert.equal(part?.size, 11, 'a range still reports the whole size');
      assert.equal(await text(part!.body), 'worl');
      assert.deepEqual(await b.blobs.ids(), ['blob-1']);
      await b.blobs.delete('blob-1');
      await b.blobs.delete('blob-1');
      assert.equal(await b.blobs.get('blob-1', 'input'), null);
      assert.deepEqual(await b.blobs.ids(), []);
    });
  });

  describe(`${name} backend: outbox`, () => {
    const claim = (now: number, limit = 10) => ({ now: new Date(now), limit, ttlMs: 1_000, retryDelaysMs: [0, 100, 200] });

    it('enqueue is idempotent; a claim starts an attempt number once; settle schedules the next or ends it', async () => {
      const { b } = await fresh();
      const owed = owedFor(newJob('alice'));
      assert.equal(await b.outbox.enqueue(owed), true);
      assert.equal(await b.outbox.enqueue(owed), false);
      const t = Date.now();
      const [first, ...none] = await b.outbox.claimDue(NODE, claim(t));
      assert.deepEqual(none, []);
      assert.equal(first?.attempt, 1);
      assert.deepEqual(first?.payload, owed.payload);
      assert.deepEqual(await b.outbox.claimDue(OTHER, claim(t)), [], 'an attempt in flight is not claimed again');
      await b.outbox.settle(owed.eventId, 1, { outcome: 'retry', status: 500, error: null }, t + 100);
      assert.deepEqual(await b.outbox.claimDue(NODE, claim(t + 50)), [], 'not due yet');
      assert.equal(await b.outbox.nextDueAt(), t + 100);
      assert.deepEqual((await b.outbox.claimDue(OTHER, claim(t + 100))).map((d) => d.attempt), [2]);
      await b.outbox.settle(owed.eventId, 1, { outcome: 'delivered', status: 200, error: null }, null);
      assert.equal(await b.outbox.pendingCount(), 1, 'a stale attempt settles nothing');
      await b.outbox.settle(owed.eventId, 2, { outcome: 'delivered', status: 200, error: null }, null);
      assert.equal(await b.outbox.pendingCount(), 0);
      assert.equal(await b.outbox.nextDueAt(), null);
    });

    it('an attempt whose node died counts as spent: the next number is due on the schedule', async () => {
      const { b } = await fresh();
      const owed = owedFor(newJob('alice'));
      await b.outbox.enqueue(owed);
      const t = Date.now();
      assert.equal((await b.outbox.claimDue(NODE, claim(t)))[0]?.attempt, 1);
      assert.deepEqual(await b.outbox.claimDue(OTHER, claim(t + 500)), [], 'within the claim ttl');
      // Spent at its start + ttl; due again at its start + the delay before the next attempt.
      assert.deepEqual((await b.outbox.claimDue(OTHER, claim(t + 1_100))).map((d) => d.attempt), [2]);
      assert.deepEqual((await b.outbox.claimDue(NODE, claim(t + 2_200))).map((d) => d.attempt), [3]);
      assert.deepEqual(await b.outbox.claimDue(OTHER, claim(t + 3_300)), [], 'past the schedule it is abandoned');
      assert.equal(await b.outbox.pendingCount(), 0);
    });
  });
}
