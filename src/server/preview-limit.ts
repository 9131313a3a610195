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

const busy = (detail: string) => new ApiError('compare.busy', 429, detail, { headers: { 'Retry-After': '5' } });

/**
 * Places for compare requests, per account and in total (per process). An account's first place
 * is granted while any is free; a further one only while another place stays free for an account
 * that holds none (so two accounts never take every place), and within its share: the places but
 * that one divided among the accounts holding places, at most `perAccount`. So an account's share
 * shrinks as other accounts come; the places it holds are never taken back.
 */
export class PreviewLimiter {
  private readonly byAccount = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: PreviewLimits) {}

  /** How many places `account`, holding `mine`, may hold now. */
  private share(mine: number): number {
    const accounts = this.byAccount.size + (mine === 0 ? 1 : 0);
    return Math.min(this.limits.perAccount, Math.max(1, Math.floor((this.limits.total - 1) / accounts)));
  }

  /** Takes a place for `account` or throws 429 `compare.busy`; returns its release (safe to call twice). */
  enter(account: string): () => void {
    const mine = this.byAccount.get(account) ?? 0;
    if (this.total >= this.limits.total) throw busy('The server is making as many comparisons as it can; ask again shortly.');
    if (mine > 0 && (mine >= this.share(mine) || this.total + 1 >= this.limits.total)) {
      throw busy(`This account already has ${mine} comparison${mine === 1 ? '' : 's'} being made, its share while other accounts compare; ask again when one has finished.`);
    }
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
