import { join } from 'node:path';
import { ApiError } from '../errors.ts';
import { Journal } from '../durable/journal.ts';

type LedgerRecord =
  | { op: 'reserve'; id: string; account: string; amount: number }
  | { op: 'charge'; id: string }
  | { op: 'release'; id: string }
  | { op: 'spent'; account: string; amount: number };

export interface Hold {
  id: string;
  account: string;
  amount: number;
}

export interface CreditSummary {
  granted: number;
  spent: number;
  reserved: number;
  available: number;
}

/**
 * Credit reservations and charges (`ledger.log`, written by the server alone). A hold is
 * made at submission and later charged or released; grants come from the account
 * registry. Every change is journaled (fsync) before it takes effect in memory, and the
 * check-and-reserve is synchronous, so concurrent submissions cannot overspend.
 */
export class CreditLedger {
  private readonly journal: Journal<LedgerRecord>;
  private readonly holds = new Map<string, Hold>();
  private readonly spent = new Map<string, number>();

  constructor(dataDir: string, private readonly granted: (account: string) => number) {
    this.journal = new Journal<LedgerRecord>(join(dataDir, 'ledger.log'));
    for (const r of this.journal.readNew()) this.apply(r);
    this.journal.compact([
      ...[...this.spent].map(([account, amount]): LedgerRecord => ({ op: 'spent', account, amount })),
      ...[...this.holds.values()].map((h): LedgerRecord => ({ op: 'reserve', ...h })),
    ]);
  }

  private apply(r: LedgerRecord): void {
    switch (r.op) {
      case 'reserve':
        this.holds.set(r.id, { id: r.id, account: r.account, amount: r.amount });
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

  private record(r: LedgerRecord): void {
    this.journal.append(r);
    this.apply(r);
  }

  summary(account: string): CreditSummary {
    const granted = this.granted(account);
    const spent = this.spent.get(account) ?? 0;
    let reserved = 0;
    for (const h of this.holds.values()) if (h.account === account) reserved += h.amount;
    return { granted, spent, reserved, available: granted - spent - reserved };
  }

  /** Reserves `amount` credits or throws 402 `entitlements.insufficient_credits`. */
  reserve(id: string, account: string, amount: number): void {
    const { available } = this.summary(account);
    if (amount > available) {
      throw new ApiError('entitlements.insufficient_credits', 402, `This job needs ${amount} credits; ${Math.max(0, available)} available.`, {
        required: amount,
        available: Math.max(0, available),
      });
    }
    this.record({ op: 'reserve', id, account, amount });
  }

  charge(id: string): void {
    if (this.holds.has(id)) this.record({ op: 'charge', id });
  }

  release(id: string): void {
    if (this.holds.has(id)) this.record({ op: 'release', id });
  }

  openHolds(): Hold[] {
    return [...this.holds.values()];
  }

  close(): void {
    this.journal.close();
  }
}
