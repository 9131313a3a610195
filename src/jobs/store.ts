import { join } from 'node:path';
import { Journal } from '../durable/journal.ts';
import type { Job, JobStatus } from './types.ts';

/**
 * Where job records live. The engine sees only this interface, so a shared backend
 * (Redis) can replace the in-memory + journal default for several nodes.
 */
export interface JobStore {
  create(job: Job): void;
  get(id: string): Job | undefined;
  /** Applies `patch`, but only when the job is still in one of `from`; returns the job or undefined. */
  transition(id: string, from: readonly JobStatus[], patch: Partial<Job>): Job | undefined;
  /** Updates fields that need no durability (progress). */
  touch(id: string, patch: Partial<Job>): void;
  update(id: string, patch: Partial<Job>): Job | undefined;
  remove(id: string): void;
  all(): Iterable<Job>;
}

type JobRecord = { op: 'put'; job: Job } | { op: 'patch'; id: string; patch: Partial<Job> } | { op: 'remove'; id: string };

/** Jobs in memory, every durable change appended (fsync) to `jobs.log`; compacted at open. */
export class JournaledJobStore implements JobStore {
  private readonly jobs = new Map<string, Job>();
  private readonly journal: Journal<JobRecord>;

  constructor(dataDir: string) {
    this.journal = new Journal<JobRecord>(join(dataDir, 'jobs.log'));
    for (const r of this.journal.readNew()) {
      if (r.op === 'put') this.jobs.set(r.job.id, r.job);
      else if (r.op === 'patch') {
        const j = this.jobs.get(r.id);
        if (j) Object.assign(j, r.patch);
      } else this.jobs.delete(r.id);
    }
    this.journal.compact([...this.jobs.values()].map((job) => ({ op: 'put', job })));
  }

  create(job: Job): void {
    this.journal.append({ op: 'put', job });
    this.jobs.set(job.id, job);
  }

  get(id: string): Job | undefined {
    return this.jobs.get(id);
  }

  transition(id: string, from: readonly JobStatus[], patch: Partial<Job>): Job | undefined {
    const job = this.jobs.get(id);
    if (!job || !from.includes(job.status)) return undefined;
    return this.update(id, patch);
  }

  update(id: string, patch: Partial<Job>): Job | undefined {
    const job = this.jobs.get(id);
    if (!job) return undefined;
    this.journal.append({ op: 'patch', id, patch });
    return Object.assign(job, patch);
  }

  touch(id: string, patch: Partial<Job>): void {
    const job = this.jobs.get(id);
    if (job) Object.assign(job, patch);
  }

  remove(id: string): void {
    if (!this.jobs.has(id)) return;
    this.journal.append({ op: 'remove', id });
    this.jobs.delete(id);
  }

  all(): Iterable<Job> {
    return this.jobs.values();
  }

  close(): void {
    this.journal.close();
  }
}
