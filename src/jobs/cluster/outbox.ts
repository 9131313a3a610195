import type pg from 'pg';
import type { AttemptOutcome, Delivery, DeliveryClaim, Outbox, OwedWebhook } from '../backend.ts';
import { transaction, type Queryable } from './database.ts';

/** Stores an owed delivery, due at `now`, unless its event id is already known. */
export async function enqueueOwed(db: Queryable, owed: OwedWebhook, now: Date): Promise<boolean> {
  const res = await db.query(
    `INSERT INTO webhook_outbox (event_id, job_id, url, secret, payload, next_at) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (event_id) DO NOTHING`,
    [owed.eventId, owed.jobId, owed.url, owed.secret, JSON.stringify(owed.payload), now],
  );
  return res.rowCount === 1;
}

interface DeliveryRow {
  event_id: string;
  job_id: string;
  url: string;
  secret: string;
  payload: Record<string, unknown>;
  attempt: number;
  next_at: Date;
}

/**
 * Owed webhooks in PostgreSQL. Any node claims due deliveries (SKIP LOCKED: two nodes never
 * claim the same attempt); a claim whose node died is taken back after its time-to-live.
 */
export class PgOutbox implements Outbox {
  constructor(private readonly pool: pg.Pool) {}

  enqueue(owed: OwedWebhook): Promise<boolean> {
    return enqueueOwed(this.pool, owed, new Date());
  }

  claimDue(nodeId: string, claim: DeliveryClaim): Promise<Delivery[]> {
    const delays = claim.retryDelaysMs;
    return transaction(this.pool, async (c) => {
      // Attempts whose node never settled them count as spent: due again after the following
      // delay, or settled as abandoned when none is left.
      await c.query(
        `UPDATE webhook_outbox SET claimed_by = NULL, claimed_at = NULL,
           next_at = CASE WHEN attempt < $3 THEN claimed_at + (($4::float8[])[attempt + 1] * interval '1 millisecond') END,
           settled = CASE WHEN attempt < $3 THEN NULL ELSE 'abandoned' END
         WHERE settled IS NULL AND claimed_at IS NOT NULL AND claimed_at < $1::timestamptz - ($2 * interval '1 millisecond')`,
        [claim.now, claim.ttlMs, delays.length, delays],
      );
      const { rows } = await c.query<DeliveryRow>(
        `UPDATE webhook_outbox SET attempt = attempt + 1, claimed_by = $2, claimed_at = $1
         WHERE event_id IN (
           SELECT event_id FROM webhook_outbox
           WHERE settled IS NULL AND claimed_at IS NULL AND next_at <= $1 AND attempt < $4
           ORDER BY next_at, event_id LIMIT $3 FOR UPDATE SKIP LOCKED
         )
         RETURNING event_id, job_id, url, secret, payload, attempt, next_at`,
        [claim.now, nodeId, claim.limit, delays.length],
      );
      rows.sort((a, b) => a.next_at.getTime() - b.next_at.getTime() || a.event_id.localeCompare(b.event_id));
      return rows.map((r) => ({ eventId: r.event_id, jobId: r.job_id, url: r.url, secret: r.secret, payload: r.payload, attempt: r.attempt }));
    });
  }

  async settle(eventId: string, attempt: number, outcome: AttemptOutcome, nextAt: number | null): Promise<void> {
    await this.pool.query(
      `UPDATE webhook_outbox SET claimed_by = NULL, claimed_at = NULL, next_at = $3, last_status = $4, last_error = $5,
         settled = CASE WHEN $3::timestamptz IS NULL THEN $6 END
       WHERE event_id = $1 AND attempt = $2 AND settled IS NULL`,
      [eventId, attempt, nextAt === null ? null : new Date(nextAt), outcome.status, outcome.error, outcome.outcome === 'retry' ? 'exhausted' : outcome.outcome],
    );
  }

  async nextDueAt(): Promise<number | null> {
    const { rows } = await this.pool.query<{ at: Date | null }>('SELECT min(next_at) AS at FROM webhook_outbox WHERE settled IS NULL AND claimed_at IS NULL');
    return rows[0]!.at ? rows[0]!.at.getTime() : null;
  }

  async pendingCount(): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM webhook_outbox WHERE settled IS NULL');
    return Number(rows[0]!.n);
  }
}
