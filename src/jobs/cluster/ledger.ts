import type pg from 'pg';
import type { CreditSummary, Hold, Ledger } from '../../accounts/credits.ts';
import type { Queryable } from './database.ts';

/**
 * Settles a hold once: the hold row moves out of `held` and the account's reserved (and, for a
 * charge, spent) totals move with it, in one statement, so a replay or a race settles nothing.
 */
export async function settleHold(db: Queryable, jobId: string, to: 'charged' | 'released'): Promise<void> {
  await db.query(
    `WITH h AS (
       UPDATE credit_holds SET state = $2, settled_at = now() WHERE job_id = $1 AND state = 'held' RETURNING account, amount
     )
     UPDATE accounts a SET reserved = a.reserved - h.amount, spent = a.spent + CASE WHEN $2 = 'charged' THEN h.amount ELSE 0 END
     FROM h WHERE a.name = h.account`,
    [jobId, to],
  );
}

/** Credits in PostgreSQL: grants, spent and reserved totals on the account row; holds by job id. */
export class PgLedger implements Ledger {
  constructor(private readonly pool: pg.Pool) {}

  async summary(account: string): Promise<CreditSummary> {
    const { rows } = await this.pool.query<{ granted: string; spent: string; reserved: string }>('SELECT granted, spent, reserved FROM accounts WHERE name = $1', [account]);
    const granted = Number(rows[0]?.granted ?? 0);
    const spent = Number(rows[0]?.spent ?? 0);
    const reserved = Number(rows[0]?.reserved ?? 0);
    return { granted, spent, reserved, available: granted - spent - reserved };
  }

  async openHolds(): Promise<Hold[]> {
    const { rows } = await this.pool.query<{ job_id: string; account: string; amount: number }>("SELECT job_id, account, amount FROM credit_holds WHERE state = 'held'");
    return rows.map((r) => ({ jobId: r.job_id, account: r.account, amount: r.amount }));
  }

  charge(jobId: string): Promise<void> {
    return settleHold(this.pool, jobId, 'charged');
  }

  release(jobId: string): Promise<void> {
    return settleHold(this.pool, jobId, 'released');
  }
}
