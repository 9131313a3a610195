import { ApiError } from '../errors.ts';

export interface PreviewLimits {
  /** Compare requests of one account being served at once. */
  perAccount: number;
  /** Compare requests being served at once, all accounts together. */
  total: number;
}

/**
 * The preview pool queues without bound and each request's time limit runs while it waits, so
 * one account asking for many comparisons at once would make everyone's time out. Past its share
 * (two at once) an account is told to come back, as is everyone once the queue is as deep as the
 * preview threads can work off well within the time limit (four per thread).
 */
export const previewLimits = (previewThreads: number): PreviewLimits => ({ perAccount: 2, total: 4 * previewThreads });

const busy = (detail: string) => new ApiError('compare.busy', 429, detail, {}, { 'Retry-After': '5' });

/** Places for compare requests, per account and in total (per process). */
export class PreviewLimiter {
  private readonly byAccount = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: PreviewLimits) {}

  /** Takes a place for `account` or throws 429 `compare.busy`; returns its release (safe to call twice). */
  enter(account: string): () => void {
    const mine = this.byAccount.get(account) ?? 0;
    if (mine >= this.limits.perAccount) throw busy(`This account already has ${mine} comparisons being made; ask again when one has finished.`);
    if (this.total >= this.limits.total) throw busy('The server is making as many comparisons as it can; ask again shortly.');
    this.byAccount.set(account, mine + 1);
    this.total++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.total--;
      const left = (this.byAccount.get(account) ?? 1) - 1;
      if (left > 0) this.byAccount.set(account, left);
      else this.byAccount.delete(account);
    };
  }
}
