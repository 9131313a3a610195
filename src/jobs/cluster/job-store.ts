import pg from 'pg';
import {
  IDEMPOTENCY_TTL_MS,
  type AcceptedJob,
  type AdmissionLimits,
  type AdmitResult,
  type ClaimLimits,
  type EndedQuery,
  type IdempotencyClaim,
  type JobStore,
  type MoveResult,
  type RememberedKey,
} from '../backend.ts';
import { decide, isOpen, requeueAlways, type Decision, type Interrupted, type Move } from '../moves.ts';
import { TERMINAL, type Job, type JobStatus } from '../types.ts';
import { isUniqueViolation, transaction, type Queryable } from './database.ts';
import { settleHold } from './ledger.ts';
import { enqueueOwed } from './outbox.ts';

const CANCEL_CHANNEL = 'compressd_job_canceled';
const ENDED = [...TERMINAL];

interface JobRow {
  id: string;
  account: string;
  job_type: string;
  format: string;
  file_name: string;
  options: Job['options'];
  status: JobStatus;
  progress: Job['progress'];
  input_bytes: string;
  credit_cost: number;
  output: Job['output'];
  error: Job['error'];
  webhook: Job['webhook'];
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  expires_at: Date | null;
  expired: boolean;
  attempts: number;
  crashes: number;
  lease_node: string | null;
  lease_expires_at: Date | null;
  ran_on: string | null;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function toJob(r: JobRow): Job {
  return {
    id: r.id,
    account: r.account,
    jobType: r.job_type,
    format: r.format,
    fileName: r.file_name,
    options: r.options,
    status: r.status,
    progress: r.progress,
    inputBytes: Number(r.input_bytes),
    creditCost: r.credit_cost,
    output: r.output,
    error: r.error,
    webhook: r.webhook,
    createdAt: r.created_at.toISOString(),
    startedAt: iso(r.started_at),
    completedAt: iso(r.completed_at),
    expiresAt: iso(r.expires_at),
    expired: r.expired,
    attempts: r.attempts,
    crashes: r.crashes,
    lease: r.lease_node && r.lease_expires_at ? { nodeId: r.lease_node, expiresAt: r.lease_expires_at.toISOString() } : null,
    ranOn: r.ran_on,
  };
}

const json = (v: unknown) => (v === null ? null : JSON.stringify(v));

/** Each job field a move may write, as its columns and their values. */
const COLUMNS: { [K in keyof Job]?: (v: Job[K]) => [string, unknown][] } = {
  status: (v) => [['status', v]],
  progress: (v) => [['progress', json(v)]],
  output: (v) => [['output', json(v)]],
  error: (v) => [['error', json(v)]],
  startedAt: (v) => [['started_at', v]],
  completedAt: (v) => [['completed_at', v]],
  expiresAt: (v) => [['expires_at', v]],
  expired: (v) => [['expired', v]],
  attempts: (v) => [['attempts', v]],
  crashes: (v) => [['crashes', v]],
  lease: (v) => [['lease_node', v?.nodeId ?? null], ['lease_expires_at', v?.expiresAt ?? null]],
  ranOn: (v) => [['ran_on', v]],
};

/**
 * Writes a move's fields to the job row and, in the same statement, moves the account's
 * `open_jobs` / `running_jobs` counters by the status change (they count the account's Queued +
 * Running and Running rows).
 */
async function writeMove(c: Queryable, before: Job, patch: Partial<Job>): Promise<Job> {
  const sets: string[] = [];
  const values: unknown[] = [before.id];
  for (const [field, value] of Object.entries(patch) as [keyof Job, never][]) {
    const columns = COLUMNS[field];
    if (!columns) throw new Error(`a move may not write ${field}`);
    for (const [column, v] of columns(value)) {
      values.push(v);
      sets.push(`${column} = $${values.length}`);
    }
  }
  const status = patch.status ?? before.status;
  const open = Number(isOpen(status)) - Number(isOpen(before.status));
  const running = Number(status === 'Running') - Number(before.status === 'Running');
  values.push(open, running);
  const [o, r] = [values.length - 1, values.length];
  const { rows } = await c.query<JobRow>(
    `WITH moved AS (UPDATE jobs SET ${sets.join(', ')} WHERE id = $1 RETURNING *),
     counted AS (
       UPDATE accounts SET open_jobs = open_jobs + $${o}::int, running_jobs = running_jobs + $${r}::int
       WHERE name = (SELECT account FROM moved) AND ($${o}::int <> 0 OR $${r}::int <> 0)
     )
     SELECT * FROM moved`,
    values,
  );
  return toJob(rows[0]!);
}

interface KeyRow {
  account: string;
  key: string;
  fingerprint: string;
  job: AcceptedJob;
}

const toRemembered = (r: KeyRow): RememberedKey => ({ account: r.account, key: r.key, fingerprint: r.fingerprint, job: r.job });

/** A decided move's writes inside the caller's transaction: the row (or its deletion), the credit hold, the owed webhook. */
async function applyDecision(c: Queryable, job: Job, decision: Extract<Decision, { kind: 'apply' }>): Promise<Job> {
  let after = job;
  if (decision.gone) {
    await c.query('DELETE FROM jobs WHERE id = $1', [job.id]);
    // Settled holds and deliveries are history nobody reads once the job is gone.
    await c.query("DELETE FROM credit_holds WHERE job_id = $1 AND state <> 'held'", [job.id]);
    await c.query('DELETE FROM webhook_outbox WHERE job_id = $1 AND settled IS NOT NULL', [job.id]);
  } else after = await writeMove(c, job, decision.patch);
  if (decision.credits === 'charge' || decision.credits === 'release') await settleHold(c, job.id, decision.credits === 'charge' ? 'charged' : 'released');
  if (decision.owed) await enqueueOwed(c, decision.owed, new Date());
  return after;
}

/** Admissions tried while jobs keep ending between the insert and the read of why it found no room. */
const ADMIT_ATTEMPTS = 5;

async function lockJob(db: Queryable, id: string): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRow>('SELECT * FROM jobs WHERE id = $1 FOR UPDATE', [id]);
  return rows[0];
}

/**
 * Job records and the queue in PostgreSQL, shared by every node. Each method is one
 * transaction; rows are always locked job first, account second, so moves never deadlock.
 */
export class PgJobStore implements JobStore {
  private readonly cancelListeners = new Set<(jobId: string) => void>();
  private listener?: pg.Client;
  private listening?: Promise<void>;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly databaseUrl: string,
  ) {}

  async admit(job: Job, limits: AdmissionLimits, idem?: IdempotencyClaim): Promise<AdmitResult> {
    try {
      // Without a key the admission is one statement (one round trip, atomic on its own); with one,
      // the key is bound first in the same transaction.
      if (!idem) return (await this.admitOrRefuse(this.pool, job, limits)).result;
      return await transaction(this.pool, async (c): Promise<AdmitResult> => {
        // Waits for an admission holding the same key uncommitted; if that one commits, this
        // binds nothing (the key is younger than the TTL) and reads the winner.
        const accepted: AcceptedJob = { id: job.id, fileName: job.fileName, format: job.format, jobType: job.jobType, createdAt: job.createdAt };
        const bound = await c.query(
          `INSERT INTO idempotency_keys (account, key, fingerprint, job, created_at) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (account, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, job = EXCLUDED.job, created_at = EXCLUDED.created_at
           WHERE idempotency_keys.created_at < $6`,
          [job.account, idem.key, idem.fingerprint, JSON.stringify(accepted), job.createdAt, new Date(Date.parse(job.createdAt) - IDEMPOTENCY_TTL_MS)],
        );
        if (bound.rowCount === 0) {
          const existing = await c.query<JobRow>('SELECT * FROM jobs WHERE id = $1', [job.id]);
          if (existing.rows[0]) throw new Refused({ ok: true, job: toJob(existing.rows[0]) });
          const { rows } = await c.query<KeyRow>('SELECT * FROM idempotency_keys WHERE account = $1 AND key = $2', [job.account, idem.key]);
          return { ok: false, refusal: 'idempotency.key_taken', remembered: toRemembered(rows[0]!) };
        }
        const { admitted, result } = await this.admitOrRefuse(c, job, limits);
        // Thrown, so the key bound above is rolled back with the refused admission (or the replay).
        if (!admitted) throw new Refused(result);
        return result;
      });
    } catch (err) {
      if (err instanceof Refused) return err.result;
      // The same id admitted before (a retrying client), or concurrently: the first admission stands.
      if (!isUniqueViolation(err)) throw err;
      const stored = await this.get(job.id);
      if (!stored) throw err;
      return { ok: true, job: stored };
    }
  }

  /**
   * The admission's writes in one statement: the account row takes the job (open jobs below the
   * limit, credits available) and holds its credits, the hold and the job are inserted; nothing
   * when the account has no room. The account row is the admission's lock: concurrent admissions
   * of one account queue on it and each re-reads the counts the previous one committed. An id
   * admitted before fails on the hold's and the job's primary keys (a replay).
   */
  private async insertAdmitted(db: Queryable, job: Job, limits: AdmissionLimits): Promise<AdmitResult | null> {
    const { rows } = await db.query<JobRow>(
      `WITH room AS (
         UPDATE accounts SET open_jobs = open_jobs + 1, reserved = reserved + $9::int
         WHERE name = $2::text AND open_jobs < $12::int AND granted - spent - reserved >= $9::int
         RETURNING name
       ), hold AS (
         INSERT INTO credit_holds (job_id, account, amount) SELECT $1::text, name, $9::int FROM room RETURNING job_id
       )
       INSERT INTO jobs (id, account, job_type, format, file_name, options, status, progress, input_bytes, credit_cost, webhook, created_at)
       SELECT job_id, $2::text, $3::text, $4::text, $5::text, $6::jsonb, 'Queued', $7::jsonb, $8::bigint, $9::int, $10::jsonb, $11::timestamptz FROM hold
       RETURNING *`,
      [job.id, job.account, job.jobType, job.format, job.fileName, JSON.stringify(job.options), JSON.stringify(job.progress), job.inputBytes, job.creditCost, job.webhook && JSON.stringify(job.webhook), job.createdAt, limits.maxOpenPerAccount],
    );
    return rows[0] ? { ok: true, job: toJob(rows[0]) } : null;
  }

  /**
   * The admission, or the refusal for what the account's row showed when read after it: a job
   * that ended between the two statements frees a place, and the admission is tried again rather
   * than refused for a reason that no longer holds (a full queue was reported as missing credits).
   */
  private async admitOrRefuse(db: Queryable, job: Job, limits: AdmissionLimits): Promise<{ admitted: boolean; result: AdmitResult }> {
    for (let attempt = 1; ; attempt++) {
      const admitted = await this.insertAdmitted(db, job, limits);
      if (admitted) return { admitted: true, result: admitted };
      const refused = await this.refusal(db, job, limits);
      if (refused) return { admitted: false, result: refused };
      // Places that keep being taken between the statements read as a full queue (429, retryable).
      if (attempt === ADMIT_ATTEMPTS) return { admitted: false, result: { ok: false, refusal: 'queue.limit_exceeded' } };
    }
  }

  /** Why an admission found no room (a replay of an admitted id is none), or undefined when the account has room now. */
  private async refusal(db: Queryable, job: Job, limits: AdmissionLimits): Promise<AdmitResult | undefined> {
    const existing = await db.query<JobRow>('SELECT * FROM jobs WHERE id = $1', [job.id]);
    if (existing.rows[0]) return { ok: true, job: toJob(existing.rows[0]) };
    const { rows } = await db.query<{ open_jobs: number; available: string }>('SELECT open_jobs, granted - spent - reserved AS available FROM accounts WHERE name = $1', [job.account]);
    const available = Math.max(0, Number(rows[0]?.available ?? 0));
    if (rows[0] && rows[0].open_jobs >= limits.maxOpenPerAccount) return { ok: false, refusal: 'queue.limit_exceeded' };
    if (available < job.creditCost) return { ok: false, refusal: 'entitlements.insufficient_credits', required: job.creditCost, available };
    return undefined;
  }

  async rememberedKey(account: string, key: string, at: Date): Promise<RememberedKey | undefined> {
    const { rows } = await this.pool.query<KeyRow>('SELECT * FROM idempotency_keys WHERE account = $1 AND key = $2 AND created_at >= $3', [
      account,
      key,
      new Date(at.getTime() - IDEMPOTENCY_TTL_MS),
    ]);
    return rows[0] && toRemembered(rows[0]);
  }

  async forgetKeys(before: Date): Promise<number> {
    const res = await this.pool.query('DELETE FROM idempotency_keys WHERE created_at < $1', [before]);
    return res.rowCount ?? 0;
  }

  async get(id: string): Promise<Job | undefined> {
    const { rows } = await this.pool.query<JobRow>('SELECT * FROM jobs WHERE id = $1', [id]);
    return rows[0] && toJob(rows[0]);
  }

  async claim(nodeId: string, limits: ClaimLimits, at: Date, leaseMs: number): Promise<Job | null> {
    const typeLimits = JSON.stringify(limits.maxRunningPerJobType);
    // A claim that loses a race for the account's last running slot tries again with fresh counts.
    for (let tries = 0; tries < 8; tries++) {
      const outcome = await transaction(this.pool, async (c) => {
        // Least recently served account first, then its oldest job; SKIP LOCKED lets claims on
        // other nodes pass a job this one is taking.
        const { rows } = await c.query<JobRow>(
          `SELECT j.* FROM jobs j JOIN accounts a ON a.name = j.account
           WHERE j.status = 'Queued' AND a.running_jobs < $1
             AND (NOT ($2::jsonb ? j.job_type)
                  OR (SELECT count(*) FROM jobs r WHERE r.status = 'Running' AND r.account = j.account AND r.job_type = j.job_type) < ($2::jsonb ->> j.job_type)::int)
           ORDER BY a.last_served_at ASC NULLS FIRST, j.created_at, j.id
           LIMIT 1 FOR UPDATE OF j SKIP LOCKED`,
          [limits.maxRunningPerAccount, typeLimits],
        );
        const pick = rows[0];
        if (!pick) return { done: true as const, job: null };
        // Locks the account row and takes its slot; `writeMove` below counts the job in.
        const slot = await c.query('UPDATE accounts SET last_served_at = clock_timestamp() WHERE name = $1 AND running_jobs < $2', [pick.account, limits.maxRunningPerAccount]);
        if (slot.rowCount === 0) throw new LostRace();
        const typeLimit = limits.maxRunningPerJobType[pick.job_type];
        if (typeLimit !== undefined) {
          // Counted again now that the account row is locked: another node may have started one of this type meanwhile.
          const { rows: n } = await c.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE status = 'Running' AND account = $1 AND job_type = $2", [pick.account, pick.job_type]);
          if (Number(n[0]!.n) >= typeLimit) throw new LostRace();
        }
        const job = toJob(pick);
        const decision = decide({ move: 'start', at, nodeId, leaseMs }, job);
        if (decision.kind !== 'apply') throw new LostRace();
        return { done: true as const, job: await writeMove(c, job, decision.patch) };
      }).catch((err) => {
        if (err instanceof LostRace) return { done: false as const, job: null };
        throw err;
      });
      if (outcome.done) return outcome.job;
    }
    return null;
  }

  async renew(id: string, nodeId: string, attempt: number, until: Date): Promise<boolean> {
    const res = await this.pool.query(
      "UPDATE jobs SET lease_expires_at = $4 WHERE id = $1 AND status = 'Running' AND lease_node = $2 AND attempts = $3",
      [id, nodeId, attempt, until],
    );
    return res.rowCount === 1;
  }

  async progress(id: string, attempt: number, progress: Job['progress']): Promise<void> {
    await this.pool.query("UPDATE jobs SET progress = $3 WHERE id = $1 AND attempts = $2 AND status = 'Running'", [id, attempt, JSON.stringify(progress)]);
  }

  move(id: string, m: Exclude<Move, { move: 'start' }>): Promise<MoveResult> {
    return transaction(this.pool, async (c): Promise<MoveResult> => {
      const row = await lockJob(c, id);
      const job = row && toJob(row);
      const decision = decide(m, job);
      if (decision.kind === 'refuse') return { ok: false, refusal: decision.refusal, ...(job ? { job } : {}) };
      // A move is one transaction here, so a replay has nothing left to complete.
      if (decision.kind === 'replay') return { ok: true, job: job!, from: job!.status, replay: true };
      const after = await applyDecision(c, job!, decision);
      // Delivered to every listening node when this transaction commits.
      if (after.status === 'Canceled' && job!.status !== 'Canceled') await c.query('SELECT pg_notify($1, $2)', [CANCEL_CHANNEL, id]);
      return { ok: true, job: after, from: job!.status, replay: false };
    });
  }

  async requeueInterrupted(now: Date, nodeId?: string, interrupted: Interrupted = requeueAlways): Promise<Job[]> {
    const due = `status = 'Running' AND (lease_expires_at < $1 OR lease_node = $2)`;
    // Every node asks this at each poll: one statement when nothing is due, a transaction when something is.
    if ((await this.pool.query(`SELECT 1 FROM jobs WHERE ${due} LIMIT 1`, [now, nodeId ?? null])).rowCount === 0) return [];
    return transaction(this.pool, async (c) => {
      const { rows } = await c.query<JobRow>(`SELECT * FROM jobs WHERE ${due} ORDER BY created_at, id FOR UPDATE SKIP LOCKED`, [now, nodeId ?? null]);
      const moved: Job[] = [];
      for (const row of rows) {
        const job = toJob(row);
        const decision = decide(interrupted(job), job);
        if (decision.kind === 'apply') moved.push(await applyDecision(c, job, decision));
      }
      return moved;
    });
  }

  async nextLeaseExpiry(exceptNode: string): Promise<Date | null> {
    const { rows } = await this.pool.query<{ at: Date | null }>("SELECT min(lease_expires_at) AS at FROM jobs WHERE status = 'Running' AND lease_node <> $1", [exceptNode]);
    return rows[0]?.at ?? null;
  }

  async ended(query: EndedQuery): Promise<Job[]> {
    const { rows } = await this.pool.query<JobRow>(
      `SELECT * FROM jobs WHERE status = ANY($1) AND completed_at < $2 AND ($3::boolean IS NULL OR expired = NOT $3)
       ORDER BY completed_at, id LIMIT $4`,
      [ENDED, query.completedBefore, query.unexpired ?? null, query.limit],
    );
    return rows.map(toJob);
  }

  async counts(account?: string): Promise<{ queued: number; running: number }> {
    const { rows } = await this.pool.query<{ queued: string; running: string }>(
      `SELECT count(*) FILTER (WHERE status = 'Queued') AS queued, count(*) FILTER (WHERE status = 'Running') AS running
       FROM jobs WHERE status IN ('Queued', 'Running') AND ($1::text IS NULL OR account = $1)`,
      [account ?? null],
    );
    return { queued: Number(rows[0]!.queued), running: Number(rows[0]!.running) };
  }

  onCancel(listener: (jobId: string) => void): () => void {
    this.cancelListeners.add(listener);
    this.listening ??= this.listen();
    return () => this.cancelListeners.delete(listener);
  }

  /** Resolves once LISTEN is in place (tests wait for it before canceling from another node). */
  listeningReady(): Promise<void> {
    return this.listening ?? Promise.resolve();
  }

  /** One connection per node LISTENs for cancels; it reconnects after a drop (renew still stops the job meanwhile). */
  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    const retry = () => {
      if (this.listener !== client || this.closed) return;
      this.listener = undefined;
      void client.end().catch(() => {});
      setTimeout(() => {
        if (!this.closed) this.listening = this.listen();
      }, 1000).unref();
    };
    client.on('notification', (msg) => {
      if (msg.channel === CANCEL_CHANNEL && msg.payload) for (const l of this.cancelListeners) l(msg.payload);
    });
    client.on('error', retry);
    this.listener = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${CANCEL_CHANNEL}`);
    } catch {
      retry();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener?.end().catch(() => {});
  }
}

class LostRace extends Error {}

/** An admission refused after it bound its key: thrown to roll the key back. */
class Refused extends Error {
  constructor(readonly result: AdmitResult) {
    super(result.ok ? 'admitted' : result.refusal);
  }
}
