import { EventEmitter } from 'node:events';
import { mkdir, rm, stat } from 'node:fs/promises';
import { compressorForJob, type CompressorEntry, type JobOptions } from '../catalog/index.ts';
import type { CreditLedger } from '../accounts/ledger.ts';
import { ApiError } from '../errors.ts';
import type { CompressorPool } from './pool.ts';
import { FairScheduler } from './scheduler.ts';
import type { Spool } from './spool.ts';
import type { JobStore } from './store.ts';
import { TERMINAL, type Job, type JobWebhook } from './types.ts';

export interface EngineOptions {
  retentionSeconds: number;
  jobTimeoutSeconds: number;
  /** Jobs running at once per account (spec: 6). */
  maxRunningPerAccount: number;
  /** Jobs queued plus running per account (spec: 18). */
  maxQueuedPerAccount: number;
  /** How long a finished job's record is kept after its output expired. */
  recordRetentionSeconds: number;
}

export interface Submission {
  id: string;
  account: string;
  entry: CompressorEntry;
  format: string;
  fileName: string;
  options: JobOptions;
  inputBytes: number;
  creditCost: number;
  webhook: JobWebhook | null;
}

interface EngineEvents {
  /** A job reached Succeeded or Failed (the webhook events) or Canceled. */
  finished: [Job];
  /** A job started running (after `waitedMs` in the queue). */
  started: [Job, number];
}

/**
 * The job lifecycle: Queued → Running → Succeeded | Failed, and Canceled from either
 * of the first two. Credits are reserved at submission, charged on Succeeded and
 * released otherwise; every transition is journaled before it is visible.
 */
export class JobEngine extends EventEmitter<EngineEvents> {
  private readonly scheduler: FairScheduler;
  private readonly controllers = new Map<string, AbortController>();
  private readonly inFlight = new Set<Promise<void>>();
  private sweeper?: NodeJS.Timeout;
  private stopping = false;

  constructor(
    private readonly store: JobStore,
    private readonly spool: Spool,
    private readonly ledger: CreditLedger,
    private readonly pool: CompressorPool,
    private readonly opts: EngineOptions,
  ) {
    super();
    this.scheduler = new FairScheduler({
      total: pool.threads,
      perAccount: opts.maxRunningPerAccount,
      perJobType: (job) => compressorForJob(job)?.maxConcurrentJobs ?? opts.maxRunningPerAccount,
    });
  }

  /** Recovers after a restart or crash, then starts scheduling and the retention sweeper. */
  async start(): Promise<void> {
    const jobs = [...this.store.all()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    for (const job of jobs) {
      // A job interrupted while running runs again from its spooled input.
      if (job.status === 'Running') this.store.update(job.id, { status: 'Queued', progress: { percent: 0, phase: null } });
      if (job.status === 'Queued') this.scheduler.enqueue(job);
    }
    for (const hold of this.ledger.openHolds()) {
      const job = this.store.get(hold.id);
      if (job?.status === 'Succeeded') this.ledger.charge(hold.id);
      else if (!job || TERMINAL.has(job.status)) this.ledger.release(hold.id);
    }
    for (const id of await this.spool.ids()) if (!this.store.get(id)) await this.spool.remove(id);
    await this.sweep();
    const every = Math.min(60, Math.max(0.2, this.opts.retentionSeconds / 4)) * 1000;
    this.sweeper = setInterval(() => void this.sweep(), every);
    this.sweeper.unref();
    this.pump();
  }

  get(id: string): Job | undefined {
    return this.store.get(id);
  }

  /** Throws 429 `queue.limit_exceeded` when the account has no room for another job. */
  assertQueueRoom(account: string): void {
    const active = this.scheduler.queuedCount(account) + this.scheduler.runningCount(account);
    if (active >= this.opts.maxQueuedPerAccount) {
      throw new ApiError(
        'queue.limit_exceeded',
        429,
        `At most ${this.opts.maxQueuedPerAccount} jobs may be queued or running per account; wait for some to finish.`,
        {},
        { 'Retry-After': '5' },
      );
    }
  }

  /** Admits a job whose input is already in the spool: room check, credit hold, record, queue. */
  submit(s: Submission): Job {
    if (this.stopping) throw new ApiError('server.shutting_down', 503, 'The service is shutting down; try again shortly.', {}, { 'Retry-After': '5' });
    this.assertQueueRoom(s.account);
    this.ledger.reserve(s.id, s.account, s.creditCost);
    const job: Job = {
      id: s.id,
      account: s.account,
      job: s.entry.job,
      format: s.format,
      fileName: s.fileName,
      options: s.options,
      status: 'Queued',
      progress: { percent: 0, phase: null },
      inputBytes: s.inputBytes,
      creditCost: s.creditCost,
      output: null,
      error: null,
      webhook: s.webhook,
      createdAt: new Date().toISOString(),
      startedAt: null,
      completedAt: null,
      expiresAt: null,
      expired: false,
      attempts: 0,
    };
    try {
      this.store.create(job);
    } catch (err) {
      this.ledger.release(s.id);
      throw err;
    }
    this.scheduler.enqueue(job);
    // Started on the next turn, so the submission answers with the job as it was admitted (Queued).
    setImmediate(() => this.pump());
    return job;
  }

  /** Cancels a Queued or Running job; returns undefined when it had already finished. */
  cancel(id: string): Job | undefined {
    const job = this.store.transition(id, ['Queued', 'Running'], {
      status: 'Canceled',
      completedAt: new Date().toISOString(),
      progress: { percent: this.store.get(id)?.progress.percent ?? 0, phase: null },
    });
    if (!job) return undefined;
    this.ledger.release(id);
    if (this.scheduler.dequeue(id)) void this.spool.remove(id);
    this.controllers.get(id)?.abort('jobs.canceled');
    this.emit('finished', job);
    return job;
  }

  /** Deletes a finished job's record and files; returns false when it is still active. */
  async remove(id: string): Promise<boolean> {
    const job = this.store.get(id);
    if (!job || !TERMINAL.has(job.status) || this.controllers.has(id)) return false;
    this.store.remove(id);
    await this.spool.remove(id);
    return true;
  }

  /** Whether a Succeeded job's output is gone (retention elapsed), expiring it on the spot if due. */
  async isExpired(job: Job): Promise<boolean> {
    if (job.expired) return true;
    if (job.expiresAt && Date.parse(job.expiresAt) <= Date.now()) {
      await this.expire(job);
      return true;
    }
    return false;
  }

  counts(): { queued: number; running: number } {
    return { queued: this.scheduler.queuedCount(), running: this.scheduler.runningCount() };
  }

  private pump(): void {
    if (this.stopping) return;
    for (const job of this.scheduler.next()) {
      const p = this.execute(job).finally(() => {
        this.inFlight.delete(p);
        this.scheduler.finished(job.id);
        this.pump();
      });
      this.inFlight.add(p);
    }
  }

  private async execute(queued: Job): Promise<void> {
    const startedAt = new Date();
    const job = this.store.transition(queued.id, ['Queued'], {
      status: 'Running',
      startedAt: startedAt.toISOString(),
      attempts: queued.attempts + 1,
      progress: { percent: 0, phase: 'starting' },
    });
    if (!job) return;
    this.emit('started', job, startedAt.getTime() - Date.parse(job.createdAt));
    const entry = compressorForJob(job.job);
    const controller = new AbortController();
    this.controllers.set(job.id, controller);
    const timer = setTimeout(() => controller.abort('jobs.timeout'), this.opts.jobTimeoutSeconds * 1000);
    try {
      const outDir = this.spool.outputDir(job.id);
      await rm(outDir, { recursive: true, force: true });
      await mkdir(outDir, { recursive: true });
      const outcome = entry
        ? await this.pool.run({
            worker: entry.worker,
            job: { inputPath: this.spool.inputPath(job.id), format: job.format, options: job.options },
            outDir,
            signal: controller.signal,
            onProgress: (percent, phase) => this.store.touch(job.id, { progress: { percent, phase } }),
          })
        : { ok: false as const, code: 'jobs.unknown_compressor', detail: `No compressor for ${job.job}.` };
      if (this.stopping && controller.signal.reason === 'server.shutting_down') return;
      if (this.store.get(job.id)?.status !== 'Running') {
        await this.spool.remove(job.id);
        return;
      }
      const completedAt = new Date();
      if (outcome.ok) {
        const bytes = (await stat(outcome.result.path)).size;
        const done = this.store.transition(job.id, ['Running'], {
          status: 'Succeeded',
          progress: { percent: 100, phase: 'done' },
          output: { ...outcome.result, bytes },
          completedAt: completedAt.toISOString(),
          expiresAt: new Date(completedAt.getTime() + this.opts.retentionSeconds * 1000).toISOString(),
        });
        this.ledger.charge(job.id);
        if (done) this.emit('finished', done);
      } else {
        await this.fail(job.id, outcome.code, outcome.code === 'jobs.timeout' ? `Processing exceeded the ${this.opts.jobTimeoutSeconds} s time limit.` : outcome.detail);
      }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const code = (err as NodeJS.ErrnoException).code === 'ENOSPC' ? 'jobs.disk_full' : 'jobs.internal_error';
      await this.fail(job.id, code, `The job could not be completed: ${message}`);
    } finally {
      clearTimeout(timer);
      this.controllers.delete(job.id);
    }
  }

  private async fail(id: string, code: string, detail: string): Promise<void> {
    const failed = this.store.transition(id, ['Running'], {
      status: 'Failed',
      error: { code, detail: detail.slice(0, 256) },
      completedAt: new Date().toISOString(),
      progress: { percent: this.store.get(id)?.progress.percent ?? 0, phase: null },
    });
    this.ledger.release(id);
    await this.spool.remove(id);
    if (failed) this.emit('finished', failed);
  }

  private async expire(job: Job): Promise<void> {
    if (job.expired) return;
    this.store.update(job.id, { expired: true });
    await this.spool.remove(job.id);
  }

  /** Deletes outputs past retention and forgets records long after that. */
  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const job of [...this.store.all()]) {
      if (!TERMINAL.has(job.status) || !job.completedAt) continue;
      const completed = Date.parse(job.completedAt);
      if (now >= completed + (this.opts.retentionSeconds + this.opts.recordRetentionSeconds) * 1000) {
        this.store.remove(job.id);
        await this.spool.remove(job.id);
      } else if (now >= completed + this.opts.retentionSeconds * 1000 && !job.expired) {
        if (job.status === 'Succeeded') await this.expire(job);
        else {
          this.store.update(job.id, { expired: true });
          await this.spool.remove(job.id);
        }
      }
    }
  }

  /**
   * Stops taking jobs; running ones may finish within `graceMs`, the rest are aborted
   * and stay journaled as interrupted, so the next start runs them again.
   */
  async stop(graceMs = 0): Promise<void> {
    this.stopping = true;
    clearInterval(this.sweeper);
    const all = Promise.allSettled([...this.inFlight]);
    if (graceMs > 0) await Promise.race([all, new Promise((r) => setTimeout(r, graceMs))]);
    for (const c of this.controllers.values()) c.abort('server.shutting_down');
    await all;
  }
}
