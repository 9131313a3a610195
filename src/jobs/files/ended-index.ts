import type { Job } from '../types.ts';

interface Entry {
  job: Job;
  /** The job's completion when it was indexed: an entry whose job ended again since is stale. */
  completedAt: string;
  at: number;
}

/**
 * Ended jobs by completion time, oldest first — what the retention sweep walks, so that a sweep
 * costs what it expires or forgets, not what is held. Jobs end in about completion order, so an
 * entry is appended (a binary insert when one is out of order); a job that left (forgotten,
 * expired) is not searched for: its entry is dropped when the walk reaches it, which keeps both
 * `add` and the walk at constant cost per job.
 */
export class EndedIndex {
  private entries: Entry[] = [];
  private head = 0;

  /** `current` says whether an entry still stands for its job. */
  constructor(private readonly current: (job: Job, completedAt: string) => boolean) {}

  /** `at`: the job's completion in epoch ms (Date.parse of `completedAt`), when the caller has it. */
  add(job: Job, at = Date.parse(job.completedAt!)): void {
    const e: Entry = { job, completedAt: job.completedAt!, at };
    const last = this.entries[this.entries.length - 1];
    if (this.entries.length === this.head || !last || order(last, e) <= 0) {
      this.entries.push(e);
      return;
    }
    let lo = this.head;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (order(this.entries[mid]!, e) <= 0) lo = mid + 1;
      else hi = mid;
    }
    this.entries.splice(lo, 0, e);
  }

  /** Jobs still indexed that completed before `before` (epoch ms), oldest first, at most `limit` that `keep` accepts. */
  before(before: number, limit: number, keep: (job: Job) => boolean = () => true): Job[] {
    const out: Job[] = [];
    let front = true;
    for (let i = this.head; i < this.entries.length && out.length < limit; i++) {
      const e = this.entries[i]!;
      if (!this.current(e.job, e.completedAt)) {
        if (front) this.head = i + 1;
        continue;
      }
      front = false;
      if (e.at >= before) break;
      if (keep(e.job)) out.push(e.job);
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
    return out;
  }

  /** Entries held, stale ones included (a measure of the index's own memory). */
  get size(): number {
    return this.entries.length - this.head;
  }
}

function order(a: Entry, b: Entry): number {
  return a.at - b.at || a.job.id.localeCompare(b.job.id);
}
