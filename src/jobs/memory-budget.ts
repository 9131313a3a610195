import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';

/**
 * What the server itself keeps besides its jobs' pictures: the process at rest, the JS heaps of the
 * main thread and the worker threads, libvips's and the codecs' own allocations, and the page cache
 * the journals need (docs/operating.md, "Memory"). The budget is the machine's (or the memory
 * cgroup's) memory less this.
 */
export const SERVER_RESERVE_BYTES = 512 * 1024 ** 2;
/** A budget is never set below this (a very small box runs one ordinary photo at a time). */
const MIN_BUDGET_BYTES = 256 * 1024 ** 2;

/** The memory limit of this process's cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`), if any. */
function cgroupLimit(): number | undefined {
  let lines: string[];
  try {
    lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const limits: number[] = [];
  for (const line of lines) {
    const [, controllers, path] = line.split(':');
    if (path === undefined) continue;
    const file = controllers === '' ? `/sys/fs/cgroup${path}/memory.max` : controllers!.split(',').includes('memory') ? `/sys/fs/cgroup/memory${path}/memory.limit_in_bytes` : undefined;
    if (!file) continue;
    try {
      const value = Number(readFileSync(file, 'utf8').trim());
      // "max" (v2) and v1's page-rounded 2^63 mean no limit.
      if (Number.isFinite(value) && value > 0 && value < 2 ** 60) limits.push(value);
    } catch {
      // Not mounted here (a container sees its own root), or not readable: no limit from it.
    }
  }
  return limits.length ? Math.min(...limits) : undefined;
}

/** The default memory budget of the node's jobs: memory (the cgroup's limit if lower) less SERVER_RESERVE_BYTES. */
export function defaultMemoryBudgetBytes(): number {
  const memory = Math.min(totalmem(), cgroupLimit() ?? Infinity);
  return Math.max(MIN_BUDGET_BYTES, memory - SERVER_RESERVE_BYTES);
}

interface Waiter {
  bytes: number;
  settle: (taken: boolean) => void;
}

/**
 * The node's memory budget for running jobs. Each job holds what its worker estimated from header
 * facts before decoding (workers/shared/memory.ts); a job whose hold does not fit waits, first come
 * first served, until running jobs release theirs; a job that could never fit is told so at once.
 */
export class MemoryBudget {
  private used = 0;
  private readonly waiting: Waiter[] = [];

  constructor(readonly bytes: number) {}

  /** Bytes held now by running jobs. */
  get held(): number {
    return this.used;
  }

  /** A job's hold, empty until it grows; released whole when the job's task ends. */
  hold(): MemoryHold {
    return new MemoryHold(this);
  }

  /** @internal Resolves true once `bytes` more are taken for a hold (in arrival order), false when canceled first. */
  take(bytes: number): { taken: Promise<boolean>; cancel: () => void } {
    if (this.waiting.length === 0 && this.used + bytes <= this.bytes) {
      this.used += bytes;
      return { taken: Promise.resolve(true), cancel: () => {} };
    }
    let waiter!: Waiter;
    const taken = new Promise<boolean>((settle) => {
      waiter = { bytes, settle };
    });
    this.waiting.push(waiter);
    return {
      taken,
      cancel: () => {
        const i = this.waiting.indexOf(waiter);
        if (i < 0) return;
        this.waiting.splice(i, 1);
        waiter.settle(false);
        this.drain();
      },
    };
  }

  /** @internal Takes `bytes` only if they fit now and no hold is waiting before it. */
  takeNow(bytes: number): boolean {
    if (this.waiting.length > 0 || this.used + bytes > this.bytes) return false;
    this.used += bytes;
    return true;
  }

  /** @internal */
  give(bytes: number): void {
    this.used -= bytes;
    this.drain();
  }

  private drain(): void {
    while (this.waiting.length > 0 && this.used + this.waiting[0]!.bytes <= this.bytes) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.settle(true);
    }
  }
}

export class MemoryHold {
  private held = 0;
  private pending: (() => void) | null = null;
  private released = false;

  constructor(private readonly budget: MemoryBudget) {}

  /**
   * Grows the hold to `bytes` (a smaller ask changes nothing). False at once when `bytes` is more
   * than the whole budget: the job can never run here.
   */
  async grow(bytes: number): Promise<boolean> {
    if (bytes > this.budget.bytes) return false;
    if (bytes <= this.held || this.released) return true;
    const more = bytes - this.held;
    const { taken, cancel } = this.budget.take(more);
    this.pending = cancel;
    const took = await taken;
    this.pending = null;
    if (took && this.released) this.budget.give(more);
    else if (took) this.held += more;
    return true;
  }

  /** Grows the hold to `bytes` only if the budget has room now (no hold waiting first): work that is only worth starting now. */
  growNow(bytes: number): boolean {
    if (this.released) return false;
    if (bytes <= this.held) return true;
    if (!this.budget.takeNow(bytes - this.held)) return false;
    this.held = bytes;
    return true;
  }

  /** Gives back what the hold took and drops an ask still waiting (the task ended). */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.pending?.();
    this.budget.give(this.held);
    this.held = 0;
  }
}
