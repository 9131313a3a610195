/**
 * The cluster backend's SQL, one builder per statement, named after what it does (pg-boss's
 * `plans` shape): the stores read as what they ask, and every statement is found here. Which
 * statuses a statement means (open, running, ended, claimable) and what an admission checks are
 * read off the move table (`STATUSES`, `TRANSITIONS` in ../moves.ts), written in as literals so
 * the partial indexes on `jobs.status` still serve them.
 */
import type { Settlement } from '../../accounts/credits.ts';
import { STATUSES, TRANSITIONS, type AdmissionRefusal } from '../moves.ts';
import type { JobStatus } from '../types.ts';

/** `column` is one of `statuses`, as SQL: `status = 'Running'`, `status IN ('Queued', 'Running')`. */
function statusIn(column: string, statuses: readonly JobStatus[] | JobStatus): string {
  const list = (typeof statuses === 'string' ? [statuses] : statuses).map((s) => `'${s}'`);
  return list.length === 1 ? `${column} = ${list[0]}` : `${column} IN (${list.join(', ')})`;
}

const RUNNING = statusIn('status', STATUSES.running);

// ─── Admission ─────────────────────────────────────────────────────────────────────────────────

/** Each admission check (`ADMISSION_CHECKS`) on the account row, with $9 the job's cost and $12 the open-jobs limit. */
const ADMISSION_SQL: Readonly<Record<AdmissionRefusal, string>> = {
  'queue.limit_exceeded': 'open_jobs < $12::int',
  'entitlements.insufficient_credits': 'granted - spent - reserved >= $9::int',
};

/**
 * The `admit` move in one statement: the account row passes the table's checks and takes the job
 * (and, as the table's `hold` says, its credits), the hold and the job row are inserted; no row
 * when a check fails. Parameters: id, account, job type, format, file name, options, progress,
 * input bytes, cost, webhook, created at, open-jobs limit.
 */
export function insertAdmitted(): string {
  const admit = TRANSITIONS.admit;
  const held = admit.credits === 'hold' ? ', reserved = reserved + $9::int' : '';
  return `WITH room AS (
         UPDATE accounts SET open_jobs = open_jobs + 1${held}
         WHERE name = $2::text AND ${(admit.checks ?? []).map((c) => ADMISSION_SQL[c]).join(' AND ')}
         RETURNING name
       ), hold AS (
         INSERT INTO credit_holds (job_id, account, amount) SELECT $1::text, name, $9::int FROM room RETURNING job_id
       )
       INSERT INTO jobs (id, account, job_type, format, file_name, options, status, progress, input_bytes, credit_cost, webhook, created_at)
       SELECT job_id, $2::text, $3::text, $4::text, $5::text, $6::jsonb, '${admit.to}', $7::jsonb, $8::bigint, $9::int, $10::jsonb, $11::timestamptz FROM hold
       RETURNING *`;
}

/** The account ($1) as an admission checks it: its open jobs and available credits. */
export const accountRoom = () => 'SELECT open_jobs, granted - spent - reserved AS available FROM accounts WHERE name = $1';

// ─── Idempotency keys ──────────────────────────────────────────────────────────────────────────

/** Binds (account, key) to a job unless it is bound since $6 (then no row changes). */
export const bindKey = () =>
  `INSERT INTO idempotency_keys (account, key, fingerprint, job, created_at) VALUES ($1, $2, $3, $4, $5)
   ON CONFLICT (account, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, job = EXCLUDED.job, created_at = EXCLUDED.created_at
   WHERE idempotency_keys.created_at < $6`;

/** The key (account $1, key $2) as bound, whenever. */
export const boundKey = () => 'SELECT * FROM idempotency_keys WHERE account = $1 AND key = $2';

/** The key (account $1, key $2) if bound since $3. */
export const keyBoundSince = () => 'SELECT * FROM idempotency_keys WHERE account = $1 AND key = $2 AND created_at >= $3';

export const forgetKeysBefore = () => 'DELETE FROM idempotency_keys WHERE created_at < $1';

// ─── Jobs ──────────────────────────────────────────────────────────────────────────────────────

export const jobById = () => 'SELECT * FROM jobs WHERE id = $1';

export const lockJob = () => 'SELECT * FROM jobs WHERE id = $1 FOR UPDATE';

/**
 * A move's `sets` (column = $n, with $1 the job's id) on the job row and, in the same statement,
 * the account's `open_jobs` / `running_jobs` counters moved by $open and $running.
 */
export function writeMove(sets: readonly string[], open: number, running: number): string {
  return `WITH moved AS (UPDATE jobs SET ${sets.join(', ')} WHERE id = $1 RETURNING *),
     counted AS (
       UPDATE accounts SET open_jobs = open_jobs + $${open}::int, running_jobs = running_jobs + $${running}::int
       WHERE name = (SELECT account FROM moved) AND ($${open}::int <> 0 OR $${running}::int <> 0)
     )
     SELECT * FROM moved`;
}

export const deleteJob = () => 'DELETE FROM jobs WHERE id = $1';

/** Settled holds and deliveries of a job ($1) whose record is gone: history nobody reads. */
export const forgetSettledHolds = () => "DELETE FROM credit_holds WHERE job_id = $1 AND state <> 'held'";
export const forgetSettledDeliveries = () => 'DELETE FROM webhook_outbox WHERE job_id = $1 AND settled IS NOT NULL';

/**
 * The next job to start: of the accounts with a running slot ($1) and, per job type, room under
 * $2 (jsonb of limits), the least recently served first, then its oldest job; SKIP LOCKED lets
 * claims on other nodes pass a job this one is taking.
 */
export const nextClaimable = () =>
  `SELECT j.* FROM jobs j JOIN accounts a ON a.name = j.account
   WHERE ${statusIn('j.status', STATUSES.claimable)} AND a.running_jobs < $1
     AND (NOT ($2::jsonb ? j.job_type)
          OR (SELECT count(*) FROM jobs r WHERE ${statusIn('r.status', STATUSES.running)} AND r.account = j.account AND r.job_type = j.job_type) < ($2::jsonb ->> j.job_type)::int)
   ORDER BY a.last_served_at ASC NULLS FIRST, j.created_at, j.id
   LIMIT 1 FOR UPDATE OF j SKIP LOCKED`;

/** Locks the account ($1) and marks it served, if it still has a running slot under $2. */
export const takeRunningSlot = () => 'UPDATE accounts SET last_served_at = clock_timestamp() WHERE name = $1 AND running_jobs < $2';

/** Running jobs of account $1 and job type $2. */
export const countRunningOfType = () => `SELECT count(*) AS n FROM jobs WHERE ${RUNNING} AND account = $1 AND job_type = $2`;

/** Extends the lease of job $1 to $4 while node $2 runs its attempt $3. */
export const renewLease = () => `UPDATE jobs SET lease_expires_at = $4 WHERE id = $1 AND ${RUNNING} AND lease_node = $2 AND attempts = $3`;

/** Progress $3 of job $1's running attempt $2. */
export const writeProgress = () => `UPDATE jobs SET progress = $3 WHERE id = $1 AND attempts = $2 AND ${RUNNING}`;

/** Running jobs whose lease expired before $1 or that node $2 held. */
const INTERRUPTED = `${RUNNING} AND (lease_expires_at < $1 OR lease_node = $2)`;

export const anyInterrupted = () => `SELECT 1 FROM jobs WHERE ${INTERRUPTED} LIMIT 1`;

export const lockInterrupted = () => `SELECT * FROM jobs WHERE ${INTERRUPTED} ORDER BY created_at, id FOR UPDATE SKIP LOCKED`;

/** The earliest lease of a running job held by a node other than $1. */
export const nextLeaseExpiry = () => `SELECT min(lease_expires_at) AS at FROM jobs WHERE ${RUNNING} AND lease_node <> $1`;

/** Up to $3 ended jobs completed before $1, expired or not as $2 says (null: both), oldest first. */
export const endedJobs = () =>
  `SELECT * FROM jobs WHERE ${statusIn('status', STATUSES.ended)} AND completed_at < $1 AND ($2::boolean IS NULL OR expired = NOT $2)
   ORDER BY completed_at, id LIMIT $3`;

/** Queued and running jobs, of account $1 or (null) of all. */
export const openCounts = () =>
  `SELECT count(*) FILTER (WHERE ${statusIn('status', TRANSITIONS.admit.to as JobStatus)}) AS queued, count(*) FILTER (WHERE ${RUNNING}) AS running
   FROM jobs WHERE ${statusIn('status', STATUSES.open)} AND ($1::text IS NULL OR account = $1)`;

/** Cancels are told on this channel, with the job's id as the payload. */
const CANCEL_CHANNEL = 'compressd_job_canceled';
export const notifyCanceled = () => `SELECT pg_notify('${CANCEL_CHANNEL}', $1)`;
export const listenCanceled = () => `LISTEN ${CANCEL_CHANNEL}`;
export const isCancelChannel = (channel: string) => channel === CANCEL_CHANNEL;

// ─── Credits ───────────────────────────────────────────────────────────────────────────────────

const SETTLED_STATE: Readonly<Record<Settlement, string>> = { charge: 'charged', release: 'released' };

/**
 * Settles job $1's hold once, as `how` says: the hold row leaves `held` and the account's reserved
 * (and, for a charge, spent) totals move with it, in one statement.
 */
export function settleHold(how: Settlement): string {
  return `WITH h AS (
       UPDATE credit_holds SET state = '${SETTLED_STATE[how]}', settled_at = now() WHERE job_id = $1 AND state = 'held' RETURNING account, amount
     )
     UPDATE accounts a SET reserved = a.reserved - h.amount${how === 'charge' ? ', spent = a.spent + h.amount' : ''}
     FROM h WHERE a.name = h.account`;
}

export const accountCredits = () => 'SELECT granted, spent, reserved FROM accounts WHERE name = $1';

export const openHolds = () => "SELECT job_id, account, amount FROM credit_holds WHERE state = 'held'";

// ─── Recovery ──────────────────────────────────────────────────────────────────────────────────

/** Open holds whose job has ended or is gone, with the job's status (null: gone). */
export const staleHolds = () =>
  `SELECT h.job_id, j.status FROM credit_holds h LEFT JOIN jobs j ON j.id = h.job_id
   WHERE h.state = 'held' AND (j.id IS NULL OR ${statusIn('j.status', STATUSES.ended)})`;

/** Of the job ids $1, those whose record is there and not expired. */
export const unexpiredOf = () => 'SELECT id FROM jobs WHERE id = ANY($1) AND NOT expired';

// ─── Webhook outbox ────────────────────────────────────────────────────────────────────────────

/** Stores delivery ($1 event, $2 job, $3 url, $4 secret, $5 payload) due at $6, unless its event id is known. */
export const enqueueDelivery = () =>
  `INSERT INTO webhook_outbox (event_id, job_id, url, secret, payload, next_at) VALUES ($1, $2, $3, $4, $5, $6)
   ON CONFLICT (event_id) DO NOTHING`;

/**
 * Attempts claimed before $1 − $2 ms and never settled count as spent: due again after the
 * following delay of $4 (ms, $3 of them), or settled as abandoned when none is left.
 */
export const reclaimSpentAttempts = () =>
  `UPDATE webhook_outbox SET claimed_by = NULL, claimed_at = NULL,
     next_at = CASE WHEN attempt < $3 THEN claimed_at + (($4::float8[])[attempt + 1] * interval '1 millisecond') END,
     settled = CASE WHEN attempt < $3 THEN NULL ELSE 'abandoned' END
   WHERE settled IS NULL AND claimed_at IS NOT NULL AND claimed_at < $1::timestamptz - ($2 * interval '1 millisecond')`;

/** Claims for node $2, at $1, up to $3 deliveries due with attempts left (fewer than $4), earliest first. */
export const claimDueDeliveries = () =>
  `UPDATE webhook_outbox SET attempt = attempt + 1, claimed_by = $2, claimed_at = $1
   WHERE event_id IN (
     SELECT event_id FROM webhook_outbox
     WHERE settled IS NULL AND claimed_at IS NULL AND next_at <= $1 AND attempt < $4
     ORDER BY next_at, event_id LIMIT $3 FOR UPDATE SKIP LOCKED
   )
   RETURNING event_id, job_id, url, secret, payload, attempt, next_at`;

/** Records attempt $2's outcome ($4 status, $5 error) of delivery $1: due again at $3, or settled as $6 when $3 is null. */
export const settleAttempt = () =>
  `UPDATE webhook_outbox SET claimed_by = NULL, claimed_at = NULL, next_at = $3, last_status = $4, last_error = $5,
     settled = CASE WHEN $3::timestamptz IS NULL THEN $6 END
   WHERE event_id = $1 AND attempt = $2 AND settled IS NULL`;

export const nextDueDelivery = () => 'SELECT min(next_at) AS at FROM webhook_outbox WHERE settled IS NULL AND claimed_at IS NULL';

export const pendingDeliveries = () => 'SELECT count(*) AS n FROM webhook_outbox WHERE settled IS NULL';
