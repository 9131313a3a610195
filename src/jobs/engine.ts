import { mkdir, rm } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { ApiError } from '../errors.ts';
import { inIoScope, withIoPath, withIoPathOf } from '../ops/io-counts.ts';
import { IDEMPOTENCY_TTL_MS, type Backend, type IdempotencyClaim, type RememberedKey, type Runner } from './backend.ts';
import type { Lifecycle } from './lifecycle.ts';
import { isTerminal } from './moves.ts';
import type { Spool } from './spool.ts';
import type { AbortReason, FailureCode, Job, Submission } from './types.ts';

export interface EngineSettings {
  jobTimeoutSeconds: number;
  retentionSeconds: number;
  /** How long a finished job's record is kept after its output expired. */
  recordRetentionSeconds: number;
  /**
   * Several nodes: how often to look for jobs other nodes queued; a running job of another node is
   * looked at again the moment its lease expires, whatever this is. Absent: this node admits every
   * job itself and holds every lease.
   */
  pollMs?: number;
}

/** What an engine drives: the lifecycle's moves, the backend they go through, the runner of compressors and this node's scratch. */
export interface EngineParts {
  lifecycle: Lifecycle;
  backend: Backend;
  runner: Runner;
  spool: Spool;
}

interface Attempt {
  job: Job;
  controller: AbortController;
  /** Why this node stopped the worker, once it did. */
  reason: AbortReason | null;
  /** Settles when the worker has stopped and its scratch is gone. */
  done?: Promise<void>;
}

/**
 * A running job's progress is written at most this often (the latest value last): it needs no
 * durability, and in cluster mode each write is a database round trip.
 */
const PROGRESS_WRITE_MS = 250;

/** How long after a lease's expiry the look for it runs (requeueInterrupted takes leases strictly past), and the least wait between looks. */
const LEASE_MARGIN_MS = 5;
const MIN_LOOK_GAP_MS = 50;

/** Jobs fetched per query of a sweep; a sweep goes on until none is left past its cutoff. */
const SWEEP_BATCH = 500;
/** How long a stop waits for the runs of jobs it handed back to end (a compressor stops at its next check, usually within milliseconds). */
const STOP_SETTLE_MS = 1000;

/**
 * Runs the lifecycle on this node: claims jobs while the runner has free slots, runs each with a
 * time limit and a renewed lease, stops a worker whose job was canceled or taken away, sweeps
 * retention, and shuts down cleanly. Every change of a job goes through `Lifecycle`'s moves.
 */
export class JobEngine {
  private readonly attempts = new Map<string, Attempt>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly unsubscribe: () => void;
  private sweeper?: NodeJS.Timeout;
  private poller?: NodeJS.Timeout;
  private pumping: Promise<void> | null = null;
  private again = false;
  private stopping = false;
  /** The sweep `start` begins without waiting for it. */
  private firstSweep: Promise<void> = Promise.resolve();

  readonly lifecycle: Lifecycle;
  private readonly backend: Backend;
  private readonly runner: Runner;
  private readonly spool: Spool;

  constructor(
    parts: EngineParts,
    private readonly settings: EngineSettings,
  ) {
    ({ lifecycle: this.lifecycle, backend: this.backend, runner: this.runner, spool: this.spool } = parts);
    this.unsubscribe = this.backend.jobs.onCancel((id) => this.stopWorker(id, 'jobs.canceled'));
  }

  /**
   * Recovers what a crash interrupted, then starts claiming jobs and sweeping retention. The first
   * sweep runs on after `start` resolves, so the server answers while it works: after a long stop it
   * may expire thousands of jobs, and until it has, a download of an output past its retention
   * expires that job on the spot (`isExpired`), as between two sweeps.
   */
  async start(): Promise<void> {
    await this.backend.recover();
    await this.lifecycle.requeueInterrupted(true);
    // A database that is briefly away: the next turn sweeps.
    this.firstSweep = this.sweep().catch(() => {});
    const every = Math.min(60, Math.max(0.2, this.settings.retentionSeconds / 4)) * 1000;
    this.sweeper = setInterval(() => {
      // A database that is briefly away: the next turn sweeps.
      void this.sweep().catch(() => {});
      // Leases of dead nodes expire without anyone telling this one.
      void withIoPath('poll', () => this.lifecycle.requeueInterrupted(false)).then((jobs) => jobs.length > 0 && this.pump());
    }, every);
    this.sweeper.unref();
    this.pump();
    if (this.settings.pollMs) await this.look(this.settings.pollMs);
  }

  /**
   * Several nodes: other nodes queue jobs and die without telling this one. One look at a time (a
   * slow database must not pile looks up behind the claims), every `pollMs` for queued work, and at
   * the moment the earliest lease held by another node expires: a dead node's job runs again on a
   * free worker here within moments of its lease, not at the next look for work.
   */
  private async look(pollMs: number): Promise<void> {
    let next = pollMs;
    try {
      await withIoPath('poll', () => this.lifecycle.requeueInterrupted(false));
      this.pump();
      const expiry = await withIoPath('poll', () => this.backend.jobs.nextLeaseExpiry(this.lifecycle.settings.nodeId));
      // At least a short gap: a lease past its expiry that another node is requeueing must not make this node spin.
      if (expiry) next = Math.min(pollMs, Math.max(MIN_LOOK_GAP_MS, expiry.getTime() - this.lifecycle.now().getTime() + LEASE_MARGIN_MS));
    } catch {
      // A database that is briefly away: the next look, at the usual pace, tries again.
    }
    if (this.stopping) return;
    this.poller = setTimeout(() => void this.look(pollMs), next);
    this.poller.unref();
  }

  get(id: string): Promise<Job | undefined> {
    return this.backend.jobs.get(id);
  }

  /** Throws 429 `queue.limit_exceeded` early, before an upload is received, when the account is full (`alsoOpen`: uploads in progress). */
  assertQueueRoom(account: string, alsoOpen?: () => number): Promise<void> {
    return this.lifecycle.assertRoom(account, alsoOpen);
  }

  /**
   * Admits a job whose input is stored; it starts on a later turn, so the answer shows it Queued.
   * With an idempotency key another admission bound meanwhile: that admission's key (see `Lifecycle.admit`).
   */
  submit(s: Submission): Promise<Job>;
  submit(s: Submission, idempotency: IdempotencyClaim | undefined): Promise<Job | RememberedKey>;
  async submit(s: Submission, idempotency?: IdempotencyClaim): Promise<Job | RememberedKey> {
    if (this.stopping) throw new ApiError('server.shutting_down', 503, 'The service is shutting down; try again shortly.', { headers: { 'Retry-After': '5' } });
    const admitted = await this.lifecycle.admit(s, idempotency);
    setImmediate(() => this.pump());
    return admitted;
  }

  /** The account's idempotency key if bound within the last 24 h before `at`. */
  rememberedKey(account: string, key: string, at: Date): Promise<RememberedKey | undefined> {
    return this.backend.jobs.rememberedKey(account, key, at);
  }

  /** Cancels a Queued or Running job; undefined when it had already ended. */
  async cancel(id: string): Promise<Job | undefined> {
    const job = await this.lifecycle.cancel(id);
    if (job) this.stopWorker(id, 'jobs.canceled');
    return job;
  }

  /** Deletes an ended job's record and files; false while it is active (or its worker still stops). */
  async remove(id: string): Promise<boolean> {
    const attempt = this.attempts.get(id);
    if (attempt) {
      // A client may see the job ended while its worker is still clearing its scratch: wait for that, not refuse.
      const job = await this.backend.jobs.get(id);
      if (!job || !isTerminal(job.status)) return false;
      await attempt.done;
    }
    return this.lifecycle.forget(id);
  }

  /** Whether a job's files are gone (retention elapsed), expiring it on the spot if due. */
  async isExpired(job: Job): Promise<boolean> {
    if (job.expired) return true;
    if (job.expiresAt && Date.parse(job.expiresAt) <= this.lifecycle.now().getTime()) {
      await this.lifecycle.expire(job.id);
      return true;
    }
    return false;
  }

  counts(): Promise<{ queued: number; running: number }> {
    return this.backend.jobs.counts();
  }

  private stopWorker(id: string, reason: AbortReason): void {
    const a = this.attempts.get(id);
    if (!a || a.reason) return;
    a.reason = reason;
    a.controller.abort(reason);
  }

  /**
   * Claims jobs while slots are free; one claiming loop at a time, re-run when asked meanwhile. With
   * every slot taken, the lane's slots take only jobs of accounts with nothing running, so one
   * account's long jobs never make another's wait for them (docs/operating.md, "Sharing the workers").
   */
  private pump(): void {
    if (this.pumping) {
      this.again = true;
      return;
    }
    const all = this.runner.slots + (this.runner.laneSlots ?? 0);
    this.pumping = (async () => {
      do {
        this.again = false;
        while (!this.stopping && this.attempts.size < all) {
          const lane = this.attempts.size >= this.runner.slots;
          // A claim that finds a job is the first step of its run; one that finds none is polling.
          const job = await withIoPathOf((found) => (found ? 'run' : 'poll'), () => this.lifecycle.start(lane)).catch(() => null);
          if (!job) break;
          this.launch(job);
        }
      } while (this.again && !this.stopping);
    })().finally(() => {
      this.pumping = null;
    });
  }

  private launch(job: Job): void {
    const attempt: Attempt = { job, controller: new AbortController(), reason: null };
    this.attempts.set(job.id, attempt);
    const p = withIoPath('run', () => this.execute(attempt)).finally(() => {
      this.attempts.delete(job.id);
      this.inFlight.delete(p);
      this.pump();
    });
    attempt.done = p.then(
      () => {},
      () => {},
    );
    this.inFlight.add(p);
  }

  private async execute(a: Attempt): Promise<void> {
    const { job, controller } = a;
    const timer = setTimeout(() => this.stopWorker(job.id, 'jobs.timeout'), this.settings.jobTimeoutSeconds * 1000);
    const renewEvery = Math.max(50, this.lifecycle.settings.leaseMs / 3);
    const renewer = setInterval(() => {
      void this.backend.jobs.renew(job.id, this.lifecycle.settings.nodeId, job.attempts, this.lifecycle.leaseUntil()).then(
        (held) => held || this.stopWorker(job.id, 'jobs.lease_lost'),
        () => {},
      );
    }, renewEvery);
    const outDir = this.spool.outputDir(job.id);
    const progress = latestEvery(PROGRESS_WRITE_MS, (p: Job['progress']) => void this.backend.jobs.progress(job.id, job.attempts, p).catch(() => {}));
    try {
      await rm(outDir, { recursive: true, force: true });
      await mkdir(outDir, { recursive: true, mode: 0o700 });
      const inputPath = await this.backend.blobs.localFile(job.id, 'input', this.spool.dir(job.id));
      const outcome = inputPath
        ? await this.runner.run(
            { jobId: job.id, jobType: job.jobType, format: job.format, options: job.options, inputPath, outDir },
            controller.signal,
            inIoScope((percent, phase) => progress.push({ percent, phase })),
          )
        : ({ ok: false, failure: { code: 'jobs.input_missing', detail: 'The stored input of this job is missing.' } } as const);
      switch (a.reason) {
        case 'server.shutting_down':
          await this.lifecycle.handBack(job);
          return;
        case 'jobs.canceled':
        case 'jobs.lease_lost':
          await this.lifecycle.abandon(job);
          return;
        case 'jobs.timeout':
          await this.lifecycle.fail(job, { code: 'jobs.timeout', detail: `Processing exceeded the ${this.settings.jobTimeoutSeconds} s time limit.` });
          return;
      }
      if (outcome.ok) {
        if (!(await this.lifecycle.succeed(job, outcome.output))) await this.lifecycle.abandon(job);
      } else await this.lifecycle.fail(job, outcome.failure);
    } catch (err) {
      if (a.reason === 'server.shutting_down') {
        await this.lifecycle.handBack(job).catch(() => {});
        return;
      }
      const message = err instanceof Error ? err.message : String(err);
      const code: FailureCode = (err as NodeJS.ErrnoException).code === 'ENOSPC' ? 'jobs.disk_full' : 'jobs.internal_error';
      await this.lifecycle.fail(job, { code, detail: `The job could not be completed: ${message}` }).catch(() => {});
    } finally {
      clearTimeout(timer);
      clearInterval(renewer);
      progress.stop();
      await this.spool.discard(job.id).catch(() => {});
    }
  }

  /** Expires outputs past retention and forgets records long after that (every one due, however many). */
  async sweep(): Promise<void> {
    // With several nodes the sweep runs on one of them at a time; the others skip their turn.
    await (this.backend.exclusive ? this.backend.exclusive('retention', () => this.sweepNow()) : this.sweepNow());
  }

  private async sweepNow(): Promise<void> {
    const now = this.lifecycle.now().getTime();
    const forgetBefore = new Date(now - (this.settings.retentionSeconds + this.settings.recordRetentionSeconds) * 1000);
    await drain(() => this.backend.jobs.ended({ completedBefore: forgetBefore, limit: SWEEP_BATCH }), (job) => this.lifecycle.forget(job.id));
    const expireBefore = new Date(now - this.settings.retentionSeconds * 1000);
    await drain(() => this.backend.jobs.ended({ completedBefore: expireBefore, unexpired: true, limit: SWEEP_BATCH }), (job) => this.lifecycle.expire(job.id));
    await this.backend.jobs.forgetKeys(new Date(now - IDEMPOTENCY_TTL_MS));
  }

  /**
   * Stops taking jobs; running ones may finish within `graceMs`, the rest are handed back to the
   * queue at once (not counted as crashes) and told to stop, so another node or this one's next
   * start runs them again. The hand-back does not wait for a compressor to reach its next check
   * (inside one native call, minutes): a stop must end within a supervisor's timeout (Docker's
   * default is 10 s). Their runs get STOP_SETTLE_MS to end and clean up; the pool's close
   * terminates what is left. A job left Running (the process died before handing it back) counts
   * as a crash.
   */
  async stop(graceMs = 0): Promise<void> {
    this.stopping = true;
    clearInterval(this.sweeper);
    clearTimeout(this.poller);
    this.unsubscribe();
    const all = Promise.allSettled([...this.inFlight]);
    if (graceMs > 0) await Promise.race([all, delay(graceMs, undefined, { ref: false })]);
    await Promise.all(
      [...this.attempts.values()].map(async (a) => {
        this.stopWorker(a.job.id, 'server.shutting_down');
        await this.lifecycle.handBack(a.job).catch(() => false);
      }),
    );
    await Promise.race([all, delay(STOP_SETTLE_MS, undefined, { ref: false })]);
    await this.pumping;
    await this.firstSweep;
  }
}

/** Acts on batches until one is short, or one makes no progress (its jobs came back unchanged). */
async function drain(batch: () => Promise<Job[]>, act: (job: Job) => Promise<unknown>): Promise<void> {
  let previous: string | undefined;
  for (;;) {
    const jobs = await batch();
    if (jobs.length === 0 || jobs[0]!.id === previous) return;
    previous = jobs[0]!.id;
    // A batch at once: its journal records share their syncs (a sweep after a long stop may have thousands).
    await Promise.all(jobs.map(act));
    if (jobs.length < SWEEP_BATCH) return;
  }
}

/** Calls `write` with the values pushed, at most once per `ms`; of the values pushed meanwhile only the latest, at the end of the interval. */
function latestEvery<T>(ms: number, write: (value: T) => void): { push(value: T): void; stop(): void } {
  let last = -Infinity;
  let latest: T;
  let timer: NodeJS.Timeout | undefined;
  return {
    push(value) {
      latest = value;
      if (timer) return;
      const wait = last + ms - performance.now();
      if (wait <= 0) {
        last = performance.now();
        write(value);
        return;
      }
      timer = setTimeout(() => {
        timer = undefined;
        last = performance.now();
        write(latest);
      }, wait);
    },
    stop() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
