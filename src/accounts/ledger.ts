import { join } from 'node:path';
import { Journal, type JournalOptions } from '../durable/journal.ts';
import type { CompactionSettings } from '../durable/compaction.ts';
import type { CreditSummary, Hold, Ledger, Settlement } from './credits.ts';

type LedgerRecord =
  | { op: 'reserve'; id: string; account: string; amount: number }
  | { op: 'charge'; id: string }
  | { op: 'release'; id: string }
  | { op: 'spent'; account: string; amount: number };

/**
 * The files backend's credit ledger (`ledger.log`, written by the server alone). A hold is keyed by
 * job id, made at admission and later charged or released once; grants come from the account
 * registry. Memory changes at once (so the job store's check of `available` and its `hold` are one
 * synchronous step and concurrent admissions cannot overspend); the journal record is durable
 * before the returned promise resolves.
 */
export class CreditLedger implements Ledger {
  private readonly holds = new Map<string, Hold>();
  private readonly spent = new Map<string, number>();

  private constructor(private readonly journal: Journal<LedgerRecord>, private readonly granted: (account: string) => number) {}

  /** Loads the journal; it is compacted (at open too) whenever dead records outweigh live ones. */
  static async open(dataDir: string, granted: (account: string) => number, opts: JournalOptions & { compaction: CompactionSettings }): Promise<CreditLedger> {
    const ledger = new CreditLedger(new Journal<LedgerRecord>(join(dataDir, 'ledger.log'), opts), granted);
    ledger.journal.replay((r) => ledger.apply(r));
    const snapshot = () => ledger.snapshot();
    ledger.journal.compactWhen({ ...opts.compaction, live: () => ledger.spent.size + ledger.holds.size, snapshot });
    await ledger.journal.compactIfDueNow();
    return ledger;
  }

  /** The live records, taken at once: replaying them is not idempotent (a charge adds to `spent`). */
  private snapshot(): LedgerRecord[] {
    return [
      ...[...this.spent].map(([account, amount]): LedgerRecord => ({ op: 'spent', account, amount })),
      ...[...this.holds.values()].map((h): LedgerRecord => ({ op: 'reserve', id: h.jobId, account: h.account, amount: h.amount })),
    ];
  }

  private apply(r: LedgerRecord): void {
    switch (r.op) {
      case 'reserve':
        this.holds.set(r.id, { jobId: r.id, account: r.account, amount: r.amount });
        break;
      case 'charge': {
        const h = this.holds.get(r.id);
        if (!h) return;
        this.holds.delete(r.id);
        this.spent.set(h.account, (this.spent.get(h.account) ?? 0) + h.amount);
        break;
      }
      case 'release':
        this.holds.delete(r.id);
        break;
      case 'spent':
        this.spent.set(r.account, (this.spent.get(r.account) ?? 0) + r.amount);
        break;
    }
  }

  private record(r: LedgerRecord): Promise<void> {
    this.apply(r);
    return this.journal.append(r);
  }

  private summaryNow(account: string): CreditSummary {
    const granted = this.granted(account);
    const spent = this.spent.get(account) ?? 0;
    let reserved = 0;
    for (const h of this.holds.values()) if (h.account === account) reserved += h.amount;
    return { granted, spent, reserved, available: granted - spent - reserved };
  }

  async summary(account: string): Promise<CreditSummary> {
    return this.summaryNow(account);
  }

  /** The account's available credits now (granted − spent − held). */
  available(account: string): number {
    return this.summaryNow(account).available;
  }

  /**
   * Holds `amount` for `jobId` at once (the caller checked `available` in the same synchronous
   * step); resolves once the hold is on disk. A job id that already has a hold keeps it.
   */
  hold(jobId: string, account: string, amount: number): Promise<void> {
    if (this.holds.has(jobId)) return Promise.resolve();
    return this.record({ op: 'reserve', id: jobId, account, amount });
  }

  async settle(jobId: string, how: Settlement): Promise<void> {
    if (this.holds.has(jobId)) await this.record({ op: how, id: jobId });
  }

  async openHolds(): Promise<Hold[]> {
    return [...this.holds.values()];
  }

  close(): Promise<void> {
    return this.journal.close();
  }
}
