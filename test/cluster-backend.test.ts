// Cluster mode's backend on real servers: the adapter-conformance suite unchanged, then what only
// several nodes sharing PostgreSQL and an S3 bucket can get wrong.
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { PgAccountRegistry } from '../src/accounts/pg-registry.ts';
import { ApiError } from '../src/errors.ts';
import type { ClaimLimits } from '../src/jobs/backend.ts';
import type { Ending, OwedWebhook } from '../src/jobs/moves.ts';
import { migrate, openPool, SCHEMA_VERSION } from '../src/jobs/cluster/database.ts';
import { openClusterBackend, type ClusterBackend } from '../src/jobs/cluster/index.ts';
import { Lifecycle } from '../src/jobs/lifecycle.ts';
import type { Job } from '../src/jobs/types.ts';
import { s3ClientFromEnv, S3BlobStore } from '../src/storage/s3.ts';
import { backendConformance } from './conformance/backend.ts';
import { cancel, expire, finish, forget, until } from './conformance/moves.ts';
import { ManualClock } from './helpers/clock.ts';
import { scratchDir } from './helpers/daemons.ts';
import { newJob } from './helpers/job-records.ts';
import { startPostgres, type TestPostgres } from './helpers/pg.ts';
import { waitUntil } from './helpers/poll.ts';
import { startSwift, type TestSwift } from './helpers/swift.ts';

const run = promisify(execFile);

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function drain(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const LIMITS: ClaimLimits = { maxRunningPerAccount: 6, maxRunningPerJobType: {} };
const OPEN = { maxOpenPerAccount: 18 };

function succeeded(): Ending {
  const now = new Date();
  return {
    status: 'Succeeded',
    completedAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + 3600_000).toISOString(),
    output: { format: 'jpg', contentType: 'image/jpeg', bytes: 500 },
    progress: { percent: 100, phase: 'done' },
  };
}

function owed(job: Job): OwedWebhook {
  return { eventId: `${job.id}.succeeded`, jobId: job.id, url: job.webhook!.url, secret: 's', payload: { jobId: job.id, status: 'Succeeded' } };
}

let db: TestPostgres;
let swift: TestSwift;
let s3: S3Client;
before(async () => {
  [db, swift] = await Promise.all([startPostgres(), startSwift()]);
  // The SDK reads endpoint and keys from the process environment, as a node does.
  Object.assign(process.env, swift.env);
  s3 = s3ClientFromEnv();
  await s3.send(new CreateBucketCommand({ Bucket: 'jobs' }));
});
after(async () => {
  await Promise.all([db?.stop(), swift?.stop()]);
});

let states = 0;
backendConformance('cluster', {
  // A state is a database of its own and a prefix of its own in the shared bucket.
  async create() {
    states++;
    return JSON.stringify({ url: await db.createDatabase(`conformance_${states}`), prefix: `conformance-${states}/` });
  },
  async open(state, { grants }) {
    const { url, prefix } = JSON.parse(state) as { url: string; prefix: string };
    const backend = await openClusterBackend(url, new S3BlobStore(s3, { bucket: 'jobs', prefix }, 0));
    for (const [account, credits] of Object.entries(grants)) {
      await backend.pool.query('INSERT INTO accounts (name, granted) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET granted = EXCLUDED.granted', [account, credits]);
    }
    return backend;
  },
  crashSteps: [],
  // The account counters a move adjusts agree with the job rows after every move.
  async invariants(b) {
    const { rows } = await (b as ClusterBackend).pool.query<{ name: string; open_jobs: number; running_jobs: number; open: number; running: number }>(
      `SELECT a.name, a.open_jobs, a.running_jobs,
         (SELECT count(*)::int FROM jobs j WHERE j.account = a.name AND j.status IN ('Queued', 'Running')) AS open,
         (SELECT count(*)::int FROM jobs j WHERE j.account = a.name AND j.status = 'Running') AS running
       FROM accounts a`,
    );
    for (const r of rows) assert.deepEqual([r.name, r.open_jobs, r.running_jobs], [r.name, r.open, r.running], `${r.name}: open_jobs / running_jobs = COUNT(*) of its job rows`);
  },
  async destroy() {},
});

describe('cluster backend on PostgreSQL', () => {
  /** Two nodes' backends on one fresh database, and an account registry on it. */
  async function twoNodes(): Promise<{ a: ClusterBackend; b: ClusterBackend; accounts: PgAccountRegistry; url: string; close(): Promise<void> }> {
    const url = await db.createDatabase(`t_${randomUUID().replaceAll('-', '')}`);
    const blobs = new S3BlobStore(s3, { bucket: 'jobs', prefix: `${randomUUID()}/` }, 0);
    const [a, b] = await Promise.all([openClusterBackend(url, blobs), openClusterBackend(url, blobs)]);
    return { a, b, url, accounts: new PgAccountRegistry(a.pool), close: async () => void (await Promise.all([a.close(), b.close()])) };
  }

  test('PostgreSQL 15; the schema migrates once when several nodes start together, and again is a no-op', async () => {
    const url = await db.createDatabase('migrations');
    const pools = [openPool(url), openPool(url), openPool(url)];
    try {
      const results = await Promise.all(pools.map((p) => migrate(p)));
      assert.equal(results.filter((r) => r.from === 0).length, 1, 'one node applies the schema');
      assert.ok(results.every((r) => r.to === SCHEMA_VERSION));
      const { rows } = await pools[0]!.query('SELECT version FROM compressd_schema ORDER BY version');
      assert.deepEqual(rows.map((r) => r.version), Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
      assert.deepEqual(await migrate(pools[1]!), { from: SCHEMA_VERSION, to: SCHEMA_VERSION });
      const { rows: v } = await pools[0]!.query("SELECT current_setting('server_version_num')::int / 10000 AS major");
      assert.equal(v[0].major, 15);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  test('a newer schema than this compressd knows is refused', async () => {
    const url = await db.createDatabase('newer');
    const pool = openPool(url);
    try {
      await migrate(pool);
      await pool.query('INSERT INTO compressd_schema (version) VALUES ($1)', [SCHEMA_VERSION + 1]);
      await assert.rejects(migrate(pool), /newer than this compressd \S+ uses/);
    } finally {
      await pool.end();
    }
  });

  test('18 open jobs per account hold across nodes under concurrent submits, and credits are never overspent', async () => {
    const { a, b, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('busy', 1000);
      await accounts.ensureAccount('poor', 50);
      const busy = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).jobs.admit(newJob('busy', { creditCost: 2 }), OPEN)));
      assert.equal(busy.filter((r) => r.ok).length, 18);
      assert.ok(busy.filter((r) => !r.ok).every((r) => !r.ok && r.refusal === 'queue.limit_exceeded'));
      assert.deepEqual(await a.ledger.summary('busy'), { granted: 1000, spent: 0, reserved: 36, available: 964 });
      assert.deepEqual(await b.jobs.counts('busy'), { queued: 18, running: 0 });

      const poor = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).jobs.admit(newJob('poor', { creditCost: 10 }), OPEN)));
      assert.equal(poor.filter((r) => r.ok).length, 5);
      const refused = poor.find((r) => !r.ok);
      assert.deepEqual(refused, { ok: false, refusal: 'entitlements.insufficient_credits', required: 10, available: 0 });
      assert.equal((await a.ledger.summary('poor')).available, 0);

      const again = busy.find((r) => r.ok)!;
      assert.ok(again.ok);
      const replay = await b.jobs.admit({ ...again.job, status: 'Queued' }, OPEN);
      assert.ok(replay.ok && replay.job.id === again.job.id, 'admitting a known id again returns the stored job');
      assert.equal((await a.ledger.summary('busy')).reserved, 36, 'and holds nothing more');
    } finally {
      await close();
    }
  });

  test('an account at its queue limit is refused for the queue, never for credits it has, while jobs end beside the admissions', async () => {
    const { a, b, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('full', 10_000);
      const open: Job[] = [];
      for (let i = 0; i < 18; i++) {
        const r = await a.jobs.admit(newJob('full'), OPEN);
        assert.ok(r.ok);
        open.push(r.job);
      }
      // Each admission that finds the queue full races a cancel that frees a place.
      const results = await Promise.all([
        ...Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).jobs.admit(newJob('full'), OPEN)),
        ...open.map((job, i) => cancel(i % 2 ? b : a, job.id, new Date())),
      ]);
      const refusals = results.flatMap((r) => (r && 'ok' in r && !r.ok ? [r.refusal] : []));
      assert.deepEqual([...new Set(refusals)].filter((r) => r !== 'queue.limit_exceeded'), [], 'with 9,964 credits available no admission is refused for credits');
    } finally {
      await close();
    }
  });

  test('6 running per account across nodes, no job claimed twice, fair order across accounts', async () => {
    const { a, b, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('first', 100);
      await accounts.ensureAccount('second', 100);
      const t0 = Date.now() - 60_000;
      // `first` submitted 8 jobs before `second` submitted its 8.
      for (let i = 0; i < 8; i++) assert.ok((await a.jobs.admit(newJob('first', { createdAt: new Date(t0 + i).toISOString() }), OPEN)).ok);
      for (let i = 0; i < 8; i++) assert.ok((await b.jobs.admit(newJob('second', { createdAt: new Date(t0 + 100 + i).toISOString() }), OPEN)).ok);
      const order: string[] = [];
      for (let i = 0; i < 4; i++) order.push((await (i % 2 ? a : b).jobs.claim(`node-${i % 2}`, LIMITS, new Date(), 30_000))!.account);
      assert.deepEqual(order, ['first', 'second', 'first', 'second'], 'accounts take turns although first queued all its jobs earlier');

      const claims = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 ? a : b).jobs.claim(`node-${i % 2}`, LIMITS, new Date(), 30_000)));
      const claimed = claims.filter((j): j is Job => j !== null);
      const ids = claimed.map((j) => j.id);
      assert.equal(new Set(ids).size, ids.length, 'no job is claimed twice');
      assert.deepEqual(await a.jobs.counts('first'), { queued: 2, running: 6 });
      assert.deepEqual(await a.jobs.counts('second'), { queued: 2, running: 6 });
      assert.equal(await a.jobs.claim('node-0', LIMITS, new Date(), 30_000), null);
      assert.ok(claimed.every((j) => j.status === 'Running' && j.attempts === 1 && j.lease?.nodeId.startsWith('node-')));

      const typeLimited = await a.jobs.claim('node-0', { maxRunningPerAccount: 10, maxRunningPerJobType: { 'image.jpg-compress': 6 } }, new Date(), 30_000);
      assert.equal(typeLimited, null, 'the per-job-type limit holds too');
    } finally {
      await close();
    }
  });

  test('a dead node’s lease expires, another node reruns the job, the late finish is fenced, one charge, one webhook', async () => {
    const { a, b, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('acct', 100);
      const job = newJob('acct', { creditCost: 7 });
      assert.ok((await a.jobs.admit(job, OPEN)).ok);
      const t0 = new Date();
      const onA = (await a.jobs.claim('A', LIMITS, t0, 300))!;
      assert.equal(onA.attempts, 1);
      assert.deepEqual(await b.jobs.requeueInterrupted(until(299, t0)), [], 'a live lease is left alone');
      // B's clock is past A's lease: no waiting, the lease is compared with the time each call is given.
      const requeued = await b.jobs.requeueInterrupted(until(400, t0));
      assert.deepEqual(requeued.map((j) => [j.id, j.status, j.lease]), [[job.id, 'Queued', null]]);
      assert.equal(await a.jobs.renew(job.id, 'A', 1, until(300)), false, 'the old node learns it lost the job');

      const onB = (await b.jobs.claim('B', LIMITS, new Date(), 30_000))!;
      assert.equal(onB.id, job.id);
      assert.equal(onB.attempts, 2);
      const late = await finish(a, job.id, 'A', 1, succeeded(), owed(job));
      assert.equal(late.ok, false);
      assert.equal(!late.ok && late.refusal, 'fenced');

      const done = await finish(b, job.id, 'B', 2, succeeded(), owed(job));
      assert.ok(done.ok && done.job.status === 'Succeeded' && done.job.lease === null);
      const replay = await finish(b, job.id, 'B', 2, succeeded(), owed(job));
      assert.ok(replay.ok, 'a replayed finish answers ok');
      const lateAgain = await finish(a, job.id, 'A', 1, succeeded(), owed(job));
      assert.equal(!lateAgain.ok && lateAgain.refusal, 'not_running');
      assert.deepEqual(await a.ledger.summary('acct'), { granted: 100, spent: 7, reserved: 0, available: 93 });
      assert.equal(await a.outbox.pendingCount(), 1);
      assert.deepEqual(await a.ledger.openHolds(), []);
    } finally {
      await close();
    }
  });

  test('a node restarting with its old id requeues what it ran', async () => {
    const { a, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('acct', 100);
      const job = newJob('acct');
      await a.jobs.admit(job, OPEN);
      await a.jobs.claim('A', LIMITS, new Date(), 60_000);
      const requeued = await a.jobs.requeueInterrupted(new Date(), 'A');
      assert.deepEqual(requeued.map((j) => j.id), [job.id]);
      assert.deepEqual(await a.jobs.counts('acct'), { queued: 1, running: 0 });
      assert.equal((await a.jobs.claim('A', LIMITS, new Date(), 60_000))!.attempts, 2);
    } finally {
      await close();
    }
  });

  test('cancel on one node reaches the node running the job within a second', async () => {
    const { a, b, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('acct', 100);
      const job = newJob('acct', { creditCost: 5 });
      await a.jobs.admit(job, OPEN);
      const running = (await b.jobs.claim('B', LIMITS, new Date(), 30_000))!;
      const heard = new Promise<string>((resolve) => b.jobs.onCancel(resolve));
      await b.jobs.listeningReady();
      const t0 = Date.now();
      const canceled = await cancel(a, job.id, new Date());
      assert.equal(canceled?.status, 'Canceled');
      assert.equal(await heard, job.id);
      assert.ok(Date.now() - t0 < 1000, `heard after ${Date.now() - t0} ms`);
      assert.equal(await b.jobs.renew(job.id, 'B', running.attempts, until(30_000)), false);
      const late = await finish(b, job.id, 'B', running.attempts, succeeded(), owed(job));
      assert.equal(!late.ok && late.refusal, 'not_running');
      assert.deepEqual(await a.ledger.summary('acct'), { granted: 100, spent: 0, reserved: 0, available: 100 });
      assert.equal(await cancel(a, job.id, new Date()), undefined, 'an ended job cannot be canceled');
      assert.deepEqual(await a.jobs.counts('acct'), { queued: 0, running: 0 });
    } finally {
      await close();
    }
  });

  test('a webhook is claimed by one node per attempt and retried by another with the same event id', async () => {
    const { a, b, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('acct', 100);
      const job = newJob('acct');
      await a.jobs.admit(job, OPEN);
      await a.jobs.claim('A', LIMITS, new Date(), 30_000);
      assert.ok((await finish(a, job.id, 'A', 1, succeeded(), owed(job))).ok);
      assert.equal(await b.outbox.enqueue(owed(job)), false, 'the same event is never owed twice');

      const claim = { now: new Date(), limit: 10, ttlMs: 500, retryDelaysMs: [0, 200, 200] };
      const [onA, onB] = await Promise.all([a.outbox.claimDue('A', claim), b.outbox.claimDue('B', claim)]);
      assert.equal(onA.length + onB.length, 1, 'one node claims the attempt');
      const first = [...onA, ...onB][0]!;
      assert.equal(first.attempt, 1);
      assert.equal(first.eventId, `${job.id}.succeeded`);

      // The claiming node dies without settling: after the claim's time-to-live the attempt counts as spent.
      assert.deepEqual(await b.outbox.claimDue('B', { ...claim, now: new Date() }), []);
      const later = new Date(Date.now() + 500 + 200 + 50);
      const retried = await b.outbox.claimDue('B', { ...claim, now: later });
      assert.deepEqual(retried.map((d) => [d.eventId, d.attempt]), [[first.eventId, 2]]);
      await b.outbox.settle(first.eventId, 1, { outcome: 'delivered', status: 200, error: null }, null);
      assert.equal(await b.outbox.pendingCount(), 1, 'a settle of a stale attempt is ignored');
      await b.outbox.settle(first.eventId, 2, { outcome: 'retry', status: 503, error: null }, later.getTime() + 200);
      assert.equal(await a.outbox.nextDueAt(), later.getTime() + 200);
      const third = await a.outbox.claimDue('A', { ...claim, now: new Date(later.getTime() + 200) });
      assert.deepEqual(third.map((d) => d.attempt), [3]);
      await a.outbox.settle(first.eventId, 3, { outcome: 'delivered', status: 200, error: null }, null);
      assert.equal(await a.outbox.pendingCount(), 0);
      assert.equal(await a.outbox.nextDueAt(), null);
    } finally {
      await close();
    }
  });

  test('retention: expire and forget ended jobs only; recovery settles holds of vanished jobs', async () => {
    const { a, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('acct', 100);
      const ended = newJob('acct', { createdAt: new Date(Date.now() - 2000).toISOString() });
      const open = newJob('acct', { createdAt: new Date(Date.now() - 1000).toISOString() });
      await a.jobs.admit(ended, OPEN);
      await a.jobs.admit(open, OPEN);
      await a.jobs.claim('A', LIMITS, new Date(), 30_000);
      await finish(a, ended.id, 'A', 1, succeeded(), null);
      assert.deepEqual((await a.jobs.ended({ completedBefore: new Date(Date.now() + 1000), limit: 10 })).map((j) => j.id), [ended.id]);
      assert.equal(await expire(a, open.id), undefined);
      assert.equal((await expire(a, ended.id))?.expired, true);
      assert.deepEqual(await a.jobs.ended({ completedBefore: new Date(Date.now() + 1000), unexpired: true, limit: 10 }), []);
      assert.equal(await forget(a, open.id), false);
      assert.equal(await forget(a, ended.id), true);
      assert.equal(await a.jobs.get(ended.id), undefined);
      assert.equal(await forget(a, ended.id), true, 'forgetting again is fine');

      // A hold left by hand without its job (as after an operator deleted rows) is released by recovery.
      await a.pool.query("INSERT INTO credit_holds (job_id, account, amount) VALUES ('ghost', 'acct', 4)");
      await a.pool.query("UPDATE accounts SET reserved = reserved + 4 WHERE name = 'acct'");
      assert.deepEqual(await a.recover(), { charged: 0, released: 1, webhooksEnqueued: 0, blobsDeleted: 0 });
      assert.equal((await a.ledger.summary('acct')).reserved, 1, 'only the open job’s hold is left');
    } finally {
      await close();
    }
  });

  test('the retention sweep runs on one node at a time; the others skip their turn', async () => {
    const { a, b, close } = await twoNodes();
    try {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const ran: string[] = [];
      const onA = a.exclusive!('retention', async () => {
        ran.push('A');
        await held;
      });
      await waitUntil('A to hold the lock', () => ran.length > 0, { intervalMs: 10 });
      await b.exclusive!('retention', async () => void ran.push('B'));
      release();
      await onA;
      await b.exclusive!('retention', async () => void ran.push('B again'));
      assert.deepEqual(ran, ['A', 'B again']);
    } finally {
      await close();
    }
  });

  test('two nodes racing with one idempotency key: one job, one hold; the losers’ inputs are deleted; another request with the key gets 422', async () => {
    const { a, b, accounts, close } = await twoNodes();
    try {
      await accounts.ensureAccount('retry', 5);
      const settings = { retentionSeconds: 3600, admission: OPEN, claim: LIMITS, leaseMs: 60_000 };
      const nodes = [new Lifecycle(a, () => null, { ...settings, nodeId: 'a' }), new Lifecycle(b, () => null, { ...settings, nodeId: 'b' })];
      const submission = (id: string) => ({ id, account: 'retry', jobType: 'image.jpg-compress', format: 'jpg', fileName: 'photo', options: {}, inputBytes: 3, creditCost: 5, webhook: null });
      const ids = Array.from({ length: 6 }, () => randomUUID());
      for (const id of ids) await a.blobs.put(id, 'input', Readable.from([Buffer.from('abc')]));
      const results = await Promise.all(ids.map((id, i) => nodes[i % 2]!.admit(submission(id), { key: 'retry-1', fingerprint: 'same' })));
      const winner = results.find((r) => 'status' in r) as Job;
      assert.ok(winner, 'one admission stored its job');
      assert.ok(results.every((r) => ('status' in r ? r.id : r.job.id) === winner.id), 'every racer answers with the winner');
      assert.deepEqual(await a.ledger.summary('retry'), { granted: 5, spent: 0, reserved: 5, available: 0 });
      assert.deepEqual(await b.jobs.counts('retry'), { queued: 1, running: 0 });
      assert.deepEqual((await a.blobs.ids()).sort(), [winner.id], 'the losers’ uploads are gone');

      const other = randomUUID();
      await b.blobs.put(other, 'input', Readable.from([Buffer.from('xyz')]));
      await assert.rejects(nodes[1]!.admit(submission(other), { key: 'retry-1', fingerprint: 'different' }), (e: unknown) => e instanceof ApiError && e.code === 'request.idempotency_mismatch' && e.status === 422);
      assert.equal(await b.blobs.size(other, 'input'), null);
    } finally {
      await close();
    }
  });

  test('keys and credits made by the CLI with --database-url work on every node at once', async () => {
    const { a, b, url, close } = await twoNodes();
    try {
      const cli = (...args: string[]) => run(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args, '--database-url', url], { env: { ...process.env, COMPRESSD_DATABASE_URL: '' } });
      const created = await cli('keys', 'create', '--account', 'team', '--credits', '40');
      const key = created.stdout.trim().split('\n').at(-1)!;
      // B's key cache reads this clock, which only the test moves.
      const clock = new ManualClock();
      const onB = new PgAccountRegistry(b.pool, clock.now);
      assert.deepEqual(await onB.authenticate(key, '127.0.0.1'), { account: 'team', keyId: key.split('_')[1], guest: false });
      assert.equal(await onB.authenticate(`${key.slice(0, -1)}x`, '127.0.0.1'), null);
      await cli('credits', 'add', '--account', 'team', '--amount', '10');
      assert.equal((await a.ledger.summary('team')).granted, 50);
      const listed = await cli('keys', 'list');
      assert.match(listed.stdout, new RegExp(`^${key.split('_')[1]}\\tteam\\taccount\\tactive`, 'm'));
      await cli('keys', 'revoke', key);
      assert.notEqual(await onB.authenticate(key, '127.0.0.1'), null, 'B trusts what it read about the key for a second by its clock');
      clock.advance(1001);
      assert.equal(await onB.authenticate(key, '127.0.0.1'), null, 'a revoke reaches other nodes within a second');
      const migrated = await cli('migrate');
      assert.match(migrated.stdout, /up to date/);
    } finally {
      await close();
    }
  });
});

describe('S3 blob store on a real S3 server (Swift with s3api)', () => {
  let client: S3Client;
  let scratch: { path: string; remove(): Promise<void> };
  before(async () => {
    client = s3;
    scratch = await scratchDir('compressd-s3-test-');
  });
  after(() => scratch?.remove());

  test('the tempauth user is the S3 key; a wrong secret is refused', async () => {
    await client.send(new PutObjectCommand({ Bucket: 'jobs', Key: 'probe', Body: 'hello' }));
    const got = await client.send(new GetObjectCommand({ Bucket: 'jobs', Key: 'probe' }));
    assert.equal(await got.Body!.transformToString(), 'hello');
    const wrong = new S3Client({ endpoint: swift.endpoint, region: swift.region, forcePathStyle: true, credentials: { accessKeyId: swift.accessKeyId, secretAccessKey: 'wrong' } });
    await assert.rejects(wrong.send(new GetObjectCommand({ Bucket: 'jobs', Key: 'probe' })), (err: Error) => err.name !== 'NoSuchKey');
  });

  test('streams a 20 MB input up in parts and back, byte for byte; sizes, local copies, delete', async () => {
    const store = new S3BlobStore(client, { bucket: 'jobs', prefix: 'cluster-a/' }, 0);
    await store.check();
    const big = randomBytes(20 * 1024 * 1024 + 17);
    // Chunks as an upload arrives: the store never sees the whole body at once.
    const body = Readable.from((function* () {
      for (let i = 0; i < big.length; i += 65536) yield big.subarray(i, i + 65536);
    })());
    assert.equal(await store.put('job-1', 'input', body), big.length);
    assert.equal(await store.size('job-1', 'input'), big.length);
    const back = await store.get('job-1', 'input');
    assert.equal(back?.size, big.length);
    assert.equal(sha256(await drain(back!.body)), sha256(big));

    const out = join(scratch.path, 'result.jpg');
    await writeFile(out, 'compressed bytes');
    assert.equal(await store.putFile('job-1', 'output', out), 16);
    assert.equal(existsSync(out), false, 'putFile consumes the scratch file');
    const local = await store.localFile('job-1', 'output', join(scratch.path, 'copy'));
    assert.equal(await readFile(local!, 'utf8'), 'compressed bytes');

    assert.equal(await store.get('job-2', 'input'), null);
    assert.equal(await store.size('job-2', 'output'), null);
    assert.equal(await store.localFile('job-2', 'output', scratch.path), null);
    await store.put('job-2', 'input', createReadStream(out.replace('result.jpg', 'copy/job-1-output')));
    assert.deepEqual((await store.ids()).sort(), ['job-1', 'job-2']);
    const other = new S3BlobStore(client, { bucket: 'jobs', prefix: 'cluster-b/' }, 0);
    assert.deepEqual(await other.ids(), [], 'a prefix keeps clusters sharing a bucket apart');

    await store.delete('job-1');
    await store.delete('job-1');
    assert.equal(await store.get('job-1', 'input'), null);
    assert.equal(await store.get('job-1', 'output'), null);
    assert.deepEqual(await store.ids(), ['job-2']);
  });

  test('a stream is stored in one PutObject up to 8 MB and in parts beyond; a 20 MB file in one PutObject', async () => {
    const sent: string[] = [];
    const counting = s3ClientFromEnv({ dbQuery() {}, dbConnect() {}, s3Request: (_path, command) => sent.push(command) });
    const store = new S3BlobStore(counting, { bucket: 'jobs', prefix: 'requests/' }, 0);
    const requests = async (store: () => Promise<number>, size: number) => {
      sent.length = 0;
      assert.equal(await store(), size);
      return [...sent].sort();
    };
    const small = randomBytes(768 * 1024);
    assert.deepEqual(await requests(() => store.put('small', 'input', Readable.from([small])), small.length), ['PutObject']);
    const big = randomBytes(20 * 1024 * 1024);
    const parts = await requests(() => store.put('streamed', 'input', Readable.from([big])), big.length);
    assert.deepEqual(parts, ['CompleteMultipartUpload', 'CreateMultipartUpload', 'UploadPart', 'UploadPart', 'UploadPart']);
    const file = join(scratch.path, 'big.bin');
    await writeFile(file, big);
    assert.deepEqual(await requests(() => store.putFile('spooled', 'input', file), big.length), ['PutObject']);
    const back = await store.get('spooled', 'input');
    assert.equal(sha256(await drain(back!.body)), sha256(big));
    counting.destroy();
  });

  test('recovery does not see blobs younger than the grace period (an upload another node has not admitted yet)', async () => {
    const store = new S3BlobStore(client, { bucket: 'jobs', prefix: 'grace/' }, 60_000);
    await store.put('young', 'input', Readable.from([Buffer.from('x')]));
    assert.deepEqual(await store.ids(), []);
  });

  test('a failed upload rejects and leaves nothing behind', async () => {
    const store = new S3BlobStore(client, { bucket: 'jobs', prefix: 'broken/' }, 0);
    const body = new Readable({ read() {} });
    body.push(randomBytes(9 * 1024 * 1024));
    setTimeout(() => body.destroy(new Error('client went away')), 50);
    await assert.rejects(store.put('job', 'input', body), /client went away|aborted/);
    assert.equal(await store.get('job', 'input'), null);
    const missing = new S3BlobStore(client, { bucket: 'no-such-bucket', prefix: '' }, 0);
    await assert.rejects(missing.check());
  });
});
