/**
 * The seam between the job engine and where its state and files live. Two backends implement it:
 * `files` (journals and a spool in the data dir, one node; `src/jobs/files/`) and `cluster`
 * (PostgreSQL and S3-compatible storage, many nodes). Every call is asynchronous and may cross a
 * network. One conformance suite (`test/conformance/backend.ts`) holds every backend to the
 * rules written here.
 *
 * Rules every backend keeps:
 * - A move (see `TRANSITIONS` in ./moves.ts) is atomic: its status change, its credit effect and
 *   the webhook it owes commit together or not at all. A backend that cannot commit them in one
 *   transaction (files: three journals) orders its writes so that `recover()` can complete a move
 *   interrupted between any two of them, and never undoes one.
 * - A move is decided by `decide` (./moves.ts) on the job as it is inside the same atomic step —
 *   allowed sources, fencing, replay, the fields, the credit effect and the webhook all come from
 *   the table; the backend only applies the decision. A move that is not allowed changes nothing
 *   and says so in its result by the move's named refusal (never throws for that).
 * - The attempt number a node got from `claim` is a fencing token: `renew`, `progress` and
 *   `finish` with any other attempt, or from another node, change nothing.
 * - Every call is safe to repeat (a client retrying after a lost answer): see each call.
 */
import type { Readable } from 'node:stream';
import type { Ledger } from '../accounts/credits.ts';
import type { AdmissionLimits, AdmissionRefused, Interrupted, JobMove, OwedWebhook, Refusal } from './moves.ts';
import type { Job, JobFailure, JobOutput, JobStatus } from './types.ts';

export type { AdmissionLimits, Ending, OwedWebhook } from './moves.ts';

// ─── Jobs and the queue ────────────────────────────────────────────────────────────────────────

export type AdmitResult =
  | { ok: true; job: Job }
  /**
   * The account's idempotency key is bound to another job (within `IDEMPOTENCY_TTL_MS` before
   * `job.createdAt`): checked before the limits and credits. Nothing was written.
   */
  | { ok: false; refusal: 'idempotency.key_taken'; remembered: RememberedKey }
  /** Refused by the first of the table's admission checks the account failed (`TRANSITIONS.admit.checks`). Nothing was written. */
  | ({ ok: false } & AdmissionRefused);

/** Limits checked when a job is claimed (they hold across every node). */
export interface ClaimLimits {
  /** Running jobs of one account at most (spec: 6). */
  maxRunningPerAccount: number;
  /** Running jobs of one account and job type at most, by job type (the catalog's `maxConcurrentJobs`); absent: no extra limit. */
  maxRunningPerJobType: Readonly<Record<string, number>>;
}

/**
 * The answer to a move on one job. `replay`: the move had already been made (a finish repeated by
 * the node and attempt that made it, an expire of an expired job), nothing was written again.
 * Refused: nothing was written; `job` is the record as it stands (absent when not found).
 */
export type MoveResult = { ok: true; job: Job; from: JobStatus; replay: boolean } | { ok: false; refusal: Refusal; job?: Job };

/** A selection of ended jobs for the retention sweep. */
export interface EndedQuery {
  /** Jobs whose `completedAt` is before this. */
  completedBefore: Date;
  /** Only jobs not yet expired (true), only expired ones (false), or both (absent). */
  unexpired?: boolean;
  limit: number;
}

/** Renders the webhook a job that has just ended owes, or null (no webhook, or its events exclude this end). Pure. */
export type Notifier = (job: Job) => OwedWebhook | null;

/**
 * Job records and the queue. Every method is one atomic step.
 */
export interface JobStore {
  /**
   * The `admit` move, decided by `decide` on the account as it stands (the table's checks against
   * `limits`, in order). Atomically: holds `job.creditCost` credits in the backend's `Ledger` (the
   * hold is keyed by `job.id`) and stores `job` (which must be Queued, attempts 0, lease null).
   * Replay: admitting an id that exists returns `{ ok: true, job }` with the stored job and writes
   * nothing.
   *
   * With `idempotency`, the same atomic step binds (`job.account`, key) to the job, so no crash
   * leaves a job without its key or a key without its job, and of two admissions racing with one
   * key (on any nodes) exactly one is stored; the other gets `idempotency.key_taken` with the
   * winner. A key bound more than `IDEMPOTENCY_TTL_MS` before `job.createdAt` is bound anew.
   */
  admit(job: Job, limits: AdmissionLimits, idempotency?: IdempotencyClaim): Promise<AdmitResult>;

  /**
   * The account's key as bound by an admission at most `IDEMPOTENCY_TTL_MS` before `at`, or
   * undefined. Keys outlive their jobs: `forget` leaves them.
   */
  rememberedKey(account: string, key: string, at: Date): Promise<RememberedKey | undefined>;

  /** Deletes keys bound before `before` (the retention sweep); resolves how many. */
  forgetKeys(before: Date): Promise<number>;

  get(id: string): Promise<Job | undefined>;

  /**
   * The `start` move for the next job, fairly. Among accounts that have a Queued job startable
   * under `limits`, picks the account served least recently (an account never served comes
   * first; ties go to the account whose oldest startable job is older), then that account's oldest
   * startable Queued job (by `createdAt`, then id). In the same atomic step applies the `start`
   * move (`attempts + 1`, `startedAt = at`, `lease = { nodeId, at + leaseMs }`, `ranOn = nodeId`).
   * Null when nothing can start. Two concurrent claims never return the same job.
   */
  claim(nodeId: string, limits: ClaimLimits, at: Date, leaseMs: number): Promise<Job | null>;

  /**
   * Extends the lease of a job this node runs to `until`. False (nothing written) when the
   * job is no longer Running under this node and attempt — canceled, requeued, finished or
   * forgotten —, which tells the node to stop its worker.
   */
  renew(id: string, nodeId: string, attempt: number, until: Date): Promise<boolean>;

  /** Records progress of the given attempt; need not be durable; ignored for any other attempt. */
  progress(id: string, attempt: number, progress: Job['progress']): Promise<void>;

  /**
   * Applies one move to job `id` (every move but admit, start and requeueInterrupted, which pick
   * their jobs): decides it with `decide` and, in the same atomic step, writes its fields, settles
   * the credit hold as the table says (succeed charges; fail and cancel release) and enqueues the
   * webhook it owes in the `Outbox`. Replay (`decide`'s rule, the same for every backend): a
   * finish repeated by the node and attempt that made it answers ok and writes, charges and
   * enqueues nothing (the ledger and outbox are idempotent too); from another node it is refused.
   * A canceled job's node learns of it through `onCancel` (any node's listener, within about a
   * second) and, at the latest, when its next `renew` answers false. `forget` deletes the record;
   * the caller deletes the blobs (after `expire` and `forget`).
   */
  move(id: string, move: Exclude<JobMove, { move: 'start' }>): Promise<MoveResult>;

  /**
   * For every Running job whose lease expired before `now` and, when `nodeId` is given, every
   * Running job leased to that node (a node restarting with its old id: what it ran died with its
   * previous process), the move `interrupted` chooses on the job as it stands (default: always
   * `requeueInterrupted`), in the same atomic step as a `move`. `requeueInterrupted`: Queued, lease
   * null, progress reset, `crashes` counted; `attempts` is kept (the next claim increments it, fencing
   * the old runner) and so is the credit hold. `crash`: Failed, hold released, webhook owed, as `fail`.
   * Resolves the jobs moved, as they now are.
   */
  requeueInterrupted(now: Date, nodeId?: string, interrupted?: Interrupted): Promise<Job[]>;

  /** When the earliest lease of a Running job held by a node other than `exceptNode` expires; null when there is none. */
  nextLeaseExpiry(exceptNode: string): Promise<Date | null>;

  /** Ended jobs for the retention sweep, oldest `completedAt` first. */
  ended(query: EndedQuery): Promise<Job[]>;

  /** Jobs Queued and Running, over all accounts or of one. */
  counts(account?: string): Promise<{ queued: number; running: number }>;

  /**
   * Calls `listener` with the id of every job canceled from now on, on any node (cluster: LISTEN/
   * NOTIFY or polling, within about a second). Returns the unsubscribe function.
   */
  onCancel(listener: (jobId: string) => void): () => void;
}

// ─── Idempotency keys ──────────────────────────────────────────────────────────────────────────

/** How long an account's `Idempotency-Key` stays bound to the job it admitted (Stripe's 24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** A client's key and the fingerprint (sha256 of the canonical request) of the request carrying it. */
export interface IdempotencyClaim {
  key: string;
  fingerprint: string;
}

/** The 202 a submission answered: its job as admitted (status Queued). */
export type AcceptedJob = Pick<Job, 'id' | 'fileName' | 'format' | 'jobType' | 'createdAt'>;

/** A key bound to the job its first request admitted, since `job.createdAt`. */
export interface RememberedKey extends IdempotencyClaim {
  account: string;
  job: AcceptedJob;
}

// ─── Webhook outbox ────────────────────────────────────────────────────────────────────────────

/** A delivery claimed by one node for one attempt. */
export interface Delivery extends OwedWebhook {
  /** The attempt number this claim may send (1-based); no other claim ever gets the same number. */
  attempt: number;
}

export interface DeliveryClaim {
  now: Date;
  limit: number;
  ttlMs: number;
  /** Delay before attempt n+1 (index n, ms); its length is the number of attempts. */
  retryDelaysMs: readonly number[];
}

export interface AttemptOutcome {
  /** `terminal`: the receiver refused it for good (4xx other than 429, 3xx); no retry. */
  outcome: 'delivered' | 'retry' | 'terminal';
  status: number | null;
  error: string | null;
}

/**
 * Owed webhook deliveries. Entries are written by `JobStore.finish` in the same step as the move
 * (and by `enqueue` for the same purpose in `recover`); a deliverer on any node claims the due
 * ones, sends, and settles.
 */
export interface Outbox {
  /**
   * Stores a delivery, due now. Idempotent by `eventId`: false (nothing written) while a delivery
   * with that id is pending. (A settled id may be forgotten; the job store, not the outbox, makes
   * sure a move's webhook is owed once.)
   */
  enqueue(owed: OwedWebhook): Promise<boolean>;

  /**
   * Claims up to `limit` deliveries due at `now` for `nodeId`, earliest due first: atomically
   * marks each one's next attempt number as started (durable before this resolves), so a crash
   * after sending never repeats a number. An attempt claimed but not settled within
   * `claim.ttlMs` (its node died) counts as spent: the delivery is due again, for the following
   * number, at its start + `claim.retryDelaysMs[attempt]`; past the end of that schedule it is
   * settled as abandoned instead of being claimed.
   */
  claimDue(nodeId: string, claim: DeliveryClaim): Promise<Delivery[]>;

  /**
   * Records the outcome of `attempt`; `nextAt` (epoch ms) is when the following attempt is due,
   * null when the delivery is settled (delivered, rejected or out of attempts). Ignored for an
   * attempt other than the delivery's latest.
   */
  settle(eventId: string, attempt: number, outcome: AttemptOutcome, nextAt: number | null): Promise<void>;

  /** When the earliest pending delivery is due (epoch ms), null when none is pending. */
  nextDueAt(): Promise<number | null>;

  /** Deliveries not yet settled. */
  pendingCount(): Promise<number>;
}

// ─── Files ─────────────────────────────────────────────────────────────────────────────────────

export type BlobKind = 'input' | 'output';

/** Inclusive byte offsets, `start <= end`, both within the blob. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * A job's input and output bytes, by job id (never by a client's file name). Writes replace;
 * `delete` is idempotent.
 */
export interface BlobStore {
  /** Stores `body` as the job's `kind` blob; resolves its size in bytes. */
  put(jobId: string, kind: BlobKind, body: Readable): Promise<number>;
  /**
   * Stores a local file as the job's `kind` blob and resolves its size. The file is consumed: a
   * store on the same disk moves it into place (or finds it already there), others upload it and
   * delete it; either way the caller no longer owns a file at `path`.
   */
  putFile(jobId: string, kind: BlobKind, path: string): Promise<number>;
  /**
   * The blob as a stream with its whole size, or null when it does not exist. With `range`
   * (inclusive byte offsets within the blob) the stream carries only those bytes: a resumed
   * download reads no more than it sends.
   */
  get(jobId: string, kind: BlobKind, range?: ByteRange): Promise<{ body: Readable; size: number } | null>;
  /**
   * A local file holding the blob, for the worker pool (which reads files): the blob itself when
   * the store is the local disk, else a copy made in `scratchDir`. Null when it does not exist.
   */
  localFile(jobId: string, kind: BlobKind, scratchDir: string): Promise<string | null>;
  size(jobId: string, kind: BlobKind): Promise<number | null>;
  /** Deletes both blobs of the job. */
  delete(jobId: string): Promise<void>;
  /** Ids of jobs that have any blob (recovery deletes those without a record). */
  ids(): Promise<string[]>;
}

// ─── Running a job ─────────────────────────────────────────────────────────────────────────────

/** What a runner needs: local files in, a local directory out. */
export interface RunRequest {
  jobId: string;
  jobType: string;
  format: string;
  options: Job['options'];
  inputPath: string;
  outDir: string;
}

export type RunOutcome =
  | { ok: true; output: Omit<JobOutput, 'bytes'> & { path: string } }
  /** A failure the runner saw (compressor error, crashed thread). After an abort the engine ignores it and uses its own reason. */
  | { ok: false; failure: JobFailure };

/** Runs compressors. The piscina pool is one runner; tests use an in-process fake. */
export interface Runner {
  /** Jobs it runs at once; the engine claims at most this many for any account. */
  readonly slots: number;
  /**
   * Further jobs it runs at once, each only for an account with nothing running (the fairness lane:
   * another account's job starts while one account's long jobs hold every slot). Absent: none.
   */
  readonly laneSlots?: number;
  /**
   * Runs one job. Resolves (never rejects for a job's own failure) once the worker has stopped,
   * also after `signal` aborted (then promptly, with any outcome).
   */
  run(req: RunRequest, signal: AbortSignal, progress: (percent: number, phase: string) => void): Promise<RunOutcome>;
}

// ─── A backend ─────────────────────────────────────────────────────────────────────────────────

export interface Backend {
  jobs: JobStore;
  ledger: Ledger;
  outbox: Outbox;
  blobs: BlobStore;
  /**
   * Completes every move a crash interrupted, in this order: holds of ended or unknown jobs are
   * charged (Succeeded) or released (otherwise); owed webhooks of ended jobs that did not reach the
   * outbox are enqueued; blobs of expired or unknown jobs are deleted. Idempotent. The engine calls
   * it once at start, before serving. A shared backend must spare the blobs of admissions still in
   * progress on other nodes (input stored, job not yet admitted), e.g. by age. Does not requeue
   * Running jobs: that is `JobStore.requeueInterrupted`.
   */
  recover(): Promise<RecoveryReport>;
  /**
   * Runs `fn` unless another node runs the same task right now, so the retention sweep runs on
   * one node at a time (cluster: an advisory lock). Absent: one node, nothing to exclude.
   */
  exclusive?(task: 'retention', fn: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

export interface RecoveryReport {
  charged: number;
  released: number;
  webhooksEnqueued: number;
  blobsDeleted: number;
}
