import pg from 'pg';
import type { Clock } from '../../clock.ts';
import {
  IDEMPOTENCY_TTL_MS,
  type AcceptedJob,
  type AdmitResult,
  type ClaimLimits,
  type EndedQuery,
  type IdempotencyClaim,
  type JobStore,
  type MoveResult,
  type RememberedKey,
} from '../backend.ts';
import { CancelSignal, canceled } from '../cancel-signal.ts';
import { decide, isOpen, requeueAlways, settles, STATUSES, type AdmissionLimits, type Applied, type Interrupted, type JobMove } from '../moves.ts';
import type { RecoveryQueries } from '../recovery.ts';
import type { Job, JobStatus } from '../types.ts';
import { isUniqueViolation, transaction, type Queryable } from './database.ts';
import { PgLedger } from './ledger.ts';
import { enqueueOwed } from './outbox.ts';
import * as plans from './plans.ts';

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
  const isRunning = (s: JobStatus) => s === STATUSES.running;
  values.push(Number(isOpen(status)) - Number(isOpen(before.status)), Number(isRunning(status)) - Number(isRunning(before.status)));
  const { rows } = await c.query<JobRow>(plans.writeMove(sets, values.length - 1, values.length), values);
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
async function applyDecision(c: Queryable, job: Job, decision: Applied, now: Date): Promise<Job> {
  let after = job;
  if (decision.gone) {
    await c.query(plans.deleteJob(), [job.id]);
    // Settled holds and deliveries are history nobody reads once the job is gone.
    await c.query(plans.forgetSettledHolds(), [job.id]);
    await c.query(plans.forgetSettledDeliveries(), [job.id]);
  } else after = await writeMove(c, job, decision.patch);
  if (settles(decision.credits)) await new PgLedger(c).settle(job.id, decision.credits);
  if (decision.owed) await enqueueOwed(c, decision.owed, now);
  return after;
}

/** Admissions tried while jobs keep ending between the insert and the read of why it found no room. */
const ADMIT_ATTEMPTS = 5;

async function jobRow(db: Queryable, id: string, lock = false): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRow>(lock ? plans.lockJob() : plans.jobById(), [id]);
  return rows[0];
}

/**
 * Job records and the queue in PostgreSQL, shared by every node. Each method is one
 * transaction; rows are always locked job first, account second, so moves never deadlock.
 */
export class PgJobStore implements JobStore, RecoveryQueries {
  private readonly cancels = new CancelSignal();
  private listener?: pg.Client;
  private listening?: Promise<void>;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly databaseUrl: string,
    private readonly clock: Clock,
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
        const bound = await c.query(plans.bindKey(), [job.account, idem.key, idem.fingerprint, JSON.stringify(accepted), job.createdAt, new Date(Date.parse(job.createdAt) - IDEMPOTENCY_TTL_MS)]);
        if (bound.rowCount === 0) {
          const existing = await jobRow(c, job.id);
          if (existing) throw new Refused({ ok: true, job: toJob(existing) });
          const { rows } = await c.query<KeyRow>(plans.boundKey(), [job.account, idem.key]);
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
   * The `admit` move as one statement (`plans.insertAdmitted`: the table's checks and hold on the
   * account row, the hold and the job inserted); null when a check failed. The account row is the
   * admission's lock: concurrent admissions of one account queue on it and each re-reads the counts
   * the previous one committed. An id admitted before fails on the hold's and the job's primary
   * keys (a replay).
   */
  private async insertAdmitted(db: Queryable, job: Job, limits: AdmissionLimits): Promise<AdmitResult | null> {
    const { rows } = await db.query<JobRow>(plans.insertAdmitted(), [
      job.id,
      job.account,
      job.jobType,
      job.format,
      job.fileName,
      JSON.stringify(job.options),
      JSON.stringify(job.progress),
      job.inputBytes,
      job.creditCost,
      job.webhook && JSON.stringify(job.webhook),
      job.createdAt,
      limits.maxOpenPerAccount,
    ]);
    return rows[0] ? { ok: true, job: toJob(rows[0]) } : null;
  }

  /**
   * The admission, or the refusal `decide` gives on the account's row as read after it: a job
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
    const existing = await jobRow(db, job.id);
    // `decide`'s replay, without reading the account it does not look at.
    if (existing) return { ok: true, job: toJob(existing) };
    const { rows } = await db.query<{ open_jobs: number; available: string }>(plans.accountRoom(), [job.account]);
    // No account row: nothing to take the job, as an account with no room and no credits.
    const room = rows[0] ? { open: rows[0].open_jobs, available: Number(rows[0].available) } : { open: 0, available: 0 };
    const decision = decide({ move: 'admit', job, limits, room }, undefined);
    if (decision.kind !== 'refuse') return undefined;
    const { kind: _kind, ...refused } = decision;
    return { ok: false, ...refused };
  }

  async rememberedKey(account: string, key: string, at: Date): Promise<RememberedKey | undefined> {
    const { rows } = await this.pool.query<KeyRow>(plans.keyBoundSince(), [account, key, new Date(at.getTime() - IDEMPOTENCY_TTL_MS)]);
    return rows[0] && toRemembered(rows[0]);
  }

  async forgetKeys(before: Date): Promise<number> {
    const res = await this.pool.query(plans.forgetKeysBefore(), [before]);
    return res.rowCount ?? 0;
  }

  async get(id: string): Promise<Job | undefined> {
    const row = await jobRow(this.pool, id);
    return row && toJob(row);
  }

  async claim(nodeId: string, limits: ClaimLimits, at: Date, leaseMs: number): Promise<Job | null> {
    const typeLimits = JSON.stringify(limits.maxRunningPerJobType);
    // A claim that loses a race for the account's last running slot tries again with fresh counts.
    for (let tries = 0; tries < 8; tries++) {
      const outcome = await transaction(this.pool, async (c) => {
        const { rows } = await c.query<JobRow>(plans.nextClaimable(), [limits.maxRunningPerAccount, typeLimits]);
        const pick = rows[0];
        if (!pick) return { done: true as const, job: null };
        // Locks the account row and takes its slot; `writeMove` below counts the job in.
        const slot = await c.query(plans.takeRunningSlot(), [pick.account, limits.maxRunningPerAccount]);
        if (slot.rowCount === 0) throw new LostRace();
        const typeLimit = limits.maxRunningPerJobType[pick.job_type];
        if (typeLimit !== undefined) {
          // Counted again now that the account row is locked: another node may have started one of this type meanwhile.
          const { rows: n } = await c.query<{ n: string }>(plans.countRunningOfType(), [pick.account, pick.job_type]);
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
    const res = await this.pool.query(plans.renewLease(), [id, nodeId, attempt, until]);
    return res.rowCount === 1;
  }

  async progress(id: string, attempt: number, progress: Job['progress']): Promise<void> {
    await this.pool.query(plans.writeProgress(), [id, attempt, JSON.stringify(progress)]);
  }

  move(id: string, m: Exclude<JobMove, { move: 'start' }>): Promise<MoveResult> {
    return transaction(this.pool, async (c): Promise<MoveResult> => {
      const row = await jobRow(c, id, true);
      const job = row && toJob(row);
      const decision = decide(m, job);
      if (decision.kind === 'refuse') return { ok: false, refusal: decision.refusal, ...(job ? { job } : {}) };
      // A move is one transaction here, so a replay has nothing left to complete.
      if (decision.kind === 'replay') return { ok: true, job: job!, from: job!.status, replay: true };
      const after = await applyDecision(c, job!, decision, this.clock());
      // Delivered to every listening node, this one too, when this transaction commits.
      if (canceled(job!.status, after.status)) await c.query(plans.notifyCanceled(), [id]);
      return { ok: true, job: after, from: job!.status, replay: false };
    });
  }

  async requeueInterrupted(now: Date, nodeId?: string, interrupted: Interrupted = requeueAlways): Promise<Job[]> {
    // Every node asks this at each poll: one statement when nothing is due, a transaction when something is.
    if ((await this.pool.query(plans.anyInterrupted(), [now, nodeId ?? null])).rowCount === 0) return [];
    return transaction(this.pool, async (c) => {
      const { rows } = await c.query<JobRow>(plans.lockInterrupted(), [now, nodeId ?? null]);
      const moved: Job[] = [];
      for (const row of rows) {
        const job = toJob(row);
        const decision = decide(interrupted(job), job);
        if (decision.kind === 'apply') moved.push(await applyDecision(c, job, decision, now));
      }
      return moved;
    });
  }

  async nextLeaseExpiry(exceptNode: string): Promise<Date | null> {
    const { rows } = await this.pool.query<{ at: Date | null }>(plans.nextLeaseExpiry(), [exceptNode]);
    return rows[0]?.at ?? null;
  }

  async ended(query: EndedQuery): Promise<Job[]> {
    const { rows } = await this.pool.query<JobRow>(plans.endedJobs(), [query.completedBefore, query.unexpired ?? null, query.limit]);
    return rows.map(toJob);
  }

  async counts(account?: string): Promise<{ queued: number; running: number }> {
    const { rows } = await this.pool.query<{ queued: string; running: string }>(plans.openCounts(), [account ?? null]);
    return { queued: Number(rows[0]!.queued), running: Number(rows[0]!.running) };
  }

  onCancel(listener: (jobId: string) => void): () => void {
    this.listening ??= this.listen();
    return this.cancels.on(listener);
  }

  async staleHolds(): Promise<{ jobId: string; status: JobStatus | undefined }[]> {
    // Moves are single transactions here, so an ended job with an open hold cannot exist; holds
    // whose job is gone are still settled, as the contract says.
    const { rows } = await this.pool.query<{ job_id: string; status: JobStatus | null }>(plans.staleHolds());
    return rows.map((r) => ({ jobId: r.job_id, status: r.status ?? undefined }));
  }

  async unexpiredOf(ids: string[]): Promise<Set<string>> {
    const { rows } = await this.pool.query<{ id: string }>(plans.unexpiredOf(), [ids]);
    return new Set(rows.map((r) => r.id));
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
      if (plans.isCancelChannel(msg.channel) && msg.payload) this.cancels.emit(msg.payload);
    });
    client.on('error', retry);
    this.listener = client;
    try {
      await client.connect();
      await client.query(plans.listenCanceled());
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
