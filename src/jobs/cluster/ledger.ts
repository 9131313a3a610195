import type { CreditSummary, Hold, Ledger, Settlement } from '../../accounts/credits.ts';
import type { Queryable } from './database.ts';
import * as plans from './plans.ts';

/**
 * Credits in PostgreSQL: grants, spent and reserved totals on the account row; holds by job id.
 * On a transaction's client it settles inside that transaction (a move's).
 */
export class PgLedger implements Ledger {
  constructor(private readonly db: Queryable) {}

  async summary(account: string): Promise<CreditSummary> {
    const { rows } = await this.db.query<{ granted: string; spent: string; reserved: string }>(plans.accountCredits(), [account]);
    const granted = Number(rows[0]?.granted ?? 0);
    const spent = Number(rows[0]?.spent ?? 0);
    const reserved = Number(rows[0]?.reserved ?? 0);
    return { granted, spent, reserved, available: granted - spent - reserved };
  }

  async openHolds(): Promise<Hold[]> {
    const { rows } = await this.db.query<{ job_id: string; account: string; amount: number }>(plans.openHolds());
    return rows.map((r) => ({ jobId: r.job_id, account: r.account, amount: r.amount }));
  }

  /** One statement, so a replay or a race settles nothing twice. */
  async settle(jobId: string, how: Settlement): Promise<void> {
    await this.db.query(plans.settleHold(how), [jobId]);
  }
}
