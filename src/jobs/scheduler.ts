import type { Job } from './types.ts';

export interface SchedulerLimits {
  /** Jobs running at once over all accounts (the pool size). */
  total: number;
  /** Jobs running at once per account (spec: 6). */
  perAccount: number;
  /** Jobs running at once per account and job type (the catalog's `maxConcurrentJobs`). */
  perJobType(job: string): number;
}

/**
 * Picks the queued jobs that may start now: FIFO within an account, round-robin across
 * accounts so one busy account cannot starve the others.
 */
export class FairScheduler {
  private readonly queues = new Map<string, Job[]>();
  private readonly running = new Map<string, Job>();
  private rotation: string[] = [];

  constructor(private readonly limits: SchedulerLimits) {}

  enqueue(job: Job): void {
    let q = this.queues.get(job.account);
    if (!q) {
      q = [];
      this.queues.set(job.account, q);
      this.rotation.push(job.account);
    }
    q.push(job);
  }

  /** Drops a queued job (canceled); returns true when it was queued. */
  dequeue(id: string): boolean {
    for (const q of this.queues.values()) {
      const i = q.findIndex((j) => j.id === id);
      if (i >= 0) {
        q.splice(i, 1);
        return true;
      }
    }
    return false;
  }

  finished(id: string): void {
    this.running.delete(id);
  }

  runningCount(account?: string): number {
    if (account === undefined) return this.running.size;
    let n = 0;
    for (const j of this.running.values()) if (j.account === account) n++;
    return n;
  }

  queuedCount(account?: string): number {
    if (account !== undefined) return this.queues.get(account)?.length ?? 0;
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  /** Removes and returns the next jobs to start, marking them running. */
  next(): Job[] {
    const started: Job[] = [];
    let progress = true;
    while (progress && this.running.size < this.limits.total) {
      progress = false;
      for (const account of [...this.rotation]) {
        if (this.running.size >= this.limits.total) break;
        const job = this.pick(account);
        if (!job) continue;
        this.running.set(job.id, job);
        started.push(job);
        progress = true;
        // Served accounts go to the back of the rotation.
        this.rotation = [...this.rotation.filter((a) => a !== account), account];
      }
    }
    for (const [account, q] of this.queues) {
      if (q.length === 0) {
        this.queues.delete(account);
        this.rotation = this.rotation.filter((a) => a !== account);
      }
    }
    return started;
  }

  private pick(account: string): Job | undefined {
    const q = this.queues.get(account);
    if (!q || q.length === 0 || this.runningCount(account) >= this.limits.perAccount) return undefined;
    const byType = new Map<string, number>();
    for (const j of this.running.values()) if (j.account === account) byType.set(j.job, (byType.get(j.job) ?? 0) + 1);
    const i = q.findIndex((j) => (byType.get(j.job) ?? 0) < this.limits.perJobType(j.job));
    return i >= 0 ? q.splice(i, 1)[0] : undefined;
  }
}
