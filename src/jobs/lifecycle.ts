import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { systemClock, type Clock } from '../clock.ts';
import { ApiError, truncateDetail } from '../errors.ts';
import type { AdmissionLimits, Backend, ClaimLimits, Ending, IdempotencyClaim, Notifier, RememberedKey, RunOutcome } from './backend.ts';
import { TRANSITIONS, type Interrupted, type Refusal } from './moves.ts';
import { idempotencyMismatch } from './idempotency.ts';
import { queuedJob, type Job, type JobFailure, type Submission } from './types.ts';

export interface LifecycleSettings {
  /** This node's id: leases and claims carry it. */
  nodeId: string;
  retentionSeconds: number;
  admission: AdmissionLimits;
  claim: ClaimLimits;
  /** How long a claim holds a job without renewal. */
  leaseMs: number;
  /**
   * A job whose runs ended with their process (or node) this many times fails with `jobs.crashed`
   * instead of running again (default 3): one file that kills the process must not crash-loop it.
   */
  maxCrashes?: number;
  /**
   * The time every move, lease, retention cut-off and expiry check reads (default: the system
   * clock). Tests move it instead of waiting.
   */
  clock?: Clock;
}

export interface LifecycleEvents {
  /** A job started running after `waitedMs` in the queue. */
  started: [Job, number];
  /** A job reached Succeeded, Failed or Canceled. */
  ended: [Job];
}

/** Runs of one job that may end with their process before it fails `jobs.crashed` (`LifecycleSettings.maxCrashes`). */
export const DEFAULT_MAX_CRASHES = 3;

/** 402: the account's available credits are below what the job needs. */
export const insufficientCredits = (required: number, available: number) =>
  new ApiError('entitlements.insufficient_credits', 402, `This job needs ${required} credits; ${available} available.`, { required, available });

const queueFull = (max: number) =>
  new ApiError('queue.limit_exceeded', 429, `At most ${max} jobs may be queued or running per account; wait for some to finish.`, { headers: { 'Retry-After': '5' } });

/**
 * The named moves of the job lifecycle (the table is `TRANSITIONS` in ./moves.ts). Each move
 * computes its arguments (times, the ending, the webhook the table says it owes), the backend
 * decides and applies it atomically with `decide`, and the move then does what follows: the blob
 * cleanup and the event. Nothing else changes a job.
 */
export class Lifecycle extends EventEmitter<LifecycleEvents> {
  constructor(
    private readonly backend: Backend,
    private readonly notifier: Notifier,
    readonly settings: LifecycleSettings,
  ) {
    super();
  }

  /** The lifecycle's clock (see `LifecycleSettings.clock`). */
  now(): Date {
    return (this.settings.clock ?? systemClock)();
  }

  /** Until when a lease taken or renewed now holds. */
  leaseUntil(): Date {
    return new Date(this.now().getTime() + this.settings.leaseMs);
  }

  /**
   * Throws 429 `queue.limit_exceeded` when the account has no room (advisory: `admit` decides),
   * counting as open jobs the submissions not yet admitted that `alsoOpen` gives once the counts
   * are in (read then, an upload admitted meanwhile is counted once, as a job).
   */
  async assertRoom(account: string, alsoOpen: () => number = () => 0): Promise<void> {
    const { queued, running } = await this.backend.jobs.counts(account);
    if (queued + running + alsoOpen() >= this.settings.admission.maxOpenPerAccount) throw queueFull(this.settings.admission.maxOpenPerAccount);
  }

  /**
   * admit (the input blob is stored): Queued with its credits held, or 429 `queue.limit_exceeded` /
   * 402 `entitlements.insufficient_credits`. With an idempotency key that another admission bound
   * meanwhile (another node, same key): this input is deleted and the result is that admission's
   * key when the requests match, else 422 `request.idempotency_mismatch`.
   */
  async admit(s: Submission, idempotency?: IdempotencyClaim): Promise<Job | RememberedKey> {
    const job = queuedJob(s, this.now());
    const admitted = await this.backend.jobs.admit(job, this.settings.admission, idempotency);
    if (admitted.ok) return admitted.job;
    if (admitted.refusal === 'idempotency.key_taken') {
      await this.backend.blobs.delete(s.id);
      if (admitted.remembered.fingerprint !== idempotency!.fingerprint) throw idempotencyMismatch();
      return admitted.remembered;
    }
    if (admitted.refusal === 'queue.limit_exceeded') throw queueFull(this.settings.admission.maxOpenPerAccount);
    throw insufficientCredits(admitted.required, admitted.available);
  }

  /**
   * start: the next job, fairly across accounts, Running under this node's lease; null when none may
   * start. `onlyIdleAccounts`: only a job of an account with nothing running (the fairness lane).
   */
  async start(onlyIdleAccounts = false): Promise<Job | null> {
    const limits = onlyIdleAccounts ? { ...this.settings.claim, maxRunningPerAccount: 1 } : this.settings.claim;
    const job = await this.backend.jobs.claim(this.settings.nodeId, limits, this.now(), this.settings.leaseMs);
    if (job) this.emit('started', job, Date.parse(job.startedAt!) - Date.parse(job.createdAt));
    return job;
  }

  /**
   * succeed: stores the runner's output file as the output blob, then ends the attempt Succeeded
   * (credits charged, webhook owed). Resolves the job, or undefined when the attempt no longer
   * holds the job (canceled or requeued meanwhile).
   */
  async succeed(job: Job, output: Extract<RunOutcome, { ok: true }>['output']): Promise<Job | undefined> {
    if (!(await this.backend.jobs.renew(job.id, this.settings.nodeId, job.attempts, this.leaseUntil()))) return undefined;
    // Hashed before putFile consumes the file (it may upload and delete it); the output never changes after.
    const hash = createHash('sha256');
    await pipeline(createReadStream(output.path), hash);
    const sha256 = hash.digest('hex');
    const bytes = await this.backend.blobs.putFile(job.id, 'output', output.path);
    const completedAt = this.now();
    const { path: _path, ...described } = output;
    return this.end(job, {
      status: 'Succeeded',
      completedAt: completedAt.toISOString(),
      expiresAt: new Date(completedAt.getTime() + this.settings.retentionSeconds * 1000).toISOString(),
      output: { ...described, bytes, sha256 },
      progress: { percent: 100, phase: 'done' },
    });
  }

  /** fail: ends the attempt Failed (credits released, webhook owed) and deletes the job's files. */
  async fail(job: Job, failure: JobFailure): Promise<Job | undefined> {
    return this.end(
      job,
      {
        status: 'Failed',
        completedAt: this.now().toISOString(),
        error: { code: failure.code, detail: truncateDetail(failure.detail) },
        progress: { percent: job.progress.percent, phase: null },
      },
      () => this.backend.blobs.delete(job.id),
    );
  }

  private async end(job: Job, ending: Ending, cleanup: () => Promise<void> = async () => {}): Promise<Job | undefined> {
    const move = ending.status === 'Succeeded' ? 'succeed' : 'fail';
    const owed = TRANSITIONS[move].owesWebhook ? this.notifier({ ...job, ...ending, lease: null }) : null;
    const result = await this.backend.jobs.move(job.id, { move, nodeId: this.settings.nodeId, attempt: job.attempts, ending, owed });
    if (!result.ok) return undefined;
    await cleanup();
    this.emit('ended', result.job);
    return result.job;
  }

  /**
   * cancel: a Queued or Running job becomes Canceled with its credits released, in one atomic
   * move; a queued job's files go at once, a running one's once its node has stopped the worker
   * (`abandon`). Resolves undefined when the job had already ended (or is unknown).
   */
  async cancel(id: string): Promise<Job | undefined> {
    const result = await this.backend.jobs.move(id, { move: 'cancel', at: this.now() });
    if (!result.ok) return undefined;
    if (result.from === 'Queued') await this.backend.blobs.delete(id);
    this.emit('ended', result.job);
    return result.job;
  }

  /**
   * requeue, by an operator: a Running job goes back to the queue keeping its credit hold; its
   * node learns at its next renew and stops the worker (the next claim's attempt fences it).
   * Resolves the requeued job, or the refusal (`not_running`, `not_found`).
   */
  async requeue(id: string): Promise<Job | { refusal: Refusal }> {
    const result = await this.backend.jobs.move(id, { move: 'requeue' });
    return result.ok ? result.job : { refusal: result.refusal };
  }

  /** After this node's worker for `job` stopped because the job was canceled or taken away. */
  async abandon(job: Job): Promise<void> {
    const now = await this.backend.jobs.get(job.id);
    if (!now || now.status === 'Canceled') await this.backend.blobs.delete(job.id);
  }

  /**
   * requeueInterrupted: jobs whose lease expired go back to the queue, and, when this node has just
   * started, the jobs it held before (they died with its previous process); each such run counts as
   * a crash of its job, and a job at `maxCrashes` fails instead (`crash`: `jobs.crashed`, credits
   * released, webhook owed, files deleted). Resolves the jobs moved, as they now are.
   */
  async requeueInterrupted(atStart: boolean): Promise<Job[]> {
    const moved = await this.backend.jobs.requeueInterrupted(this.now(), atStart ? this.settings.nodeId : undefined, this.interrupted);
    for (const job of moved.filter((j) => j.status === 'Failed')) {
      await this.backend.blobs.delete(job.id);
      this.emit('ended', job);
    }
    return moved;
  }

  private readonly interrupted: Interrupted = (job) => {
    const max = this.settings.maxCrashes ?? DEFAULT_MAX_CRASHES;
    if (job.crashes + 1 < max) return { move: 'requeueInterrupted' };
    const ending = {
      status: 'Failed' as const,
      completedAt: this.now().toISOString(),
      error: { code: 'jobs.crashed' as const, detail: `Each of its last ${max} runs ended with the process running it; it is not run again.` },
      progress: { percent: job.progress.percent, phase: null },
    };
    return { move: 'crash', ending, owed: TRANSITIONS.crash.owesWebhook ? this.notifier({ ...job, ...ending, lease: null }) : null };
  };

  /**
   * handBack: this node stops gracefully while `job` runs; it goes back to the queue (another node,
   * or this one's next start, runs it) without counting as a crash. Resolves whether it was handed back.
   */
  async handBack(job: Job): Promise<boolean> {
    return (await this.backend.jobs.move(job.id, { move: 'handBack', nodeId: this.settings.nodeId, attempt: job.attempts })).ok;
  }

  /** expire: an ended job's files are deleted; its record stays (downloads answer 410). */
  async expire(id: string): Promise<void> {
    if ((await this.backend.jobs.move(id, { move: 'expire' })).ok) await this.backend.blobs.delete(id);
  }

  /** forget: an ended job's record and files are deleted; false when it has not ended. */
  async forget(id: string): Promise<boolean> {
    const result = await this.backend.jobs.move(id, { move: 'forget' });
    if (!result.ok && result.refusal !== 'not_found') return false;
    await this.backend.blobs.delete(id);
    return true;
  }
}
