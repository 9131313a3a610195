import type pg from 'pg';
import type { Clock } from '../../clock.ts';
import type { AttemptOutcome, Delivery, DeliveryClaim, Outbox, OwedWebhook } from '../backend.ts';
import { transaction, type Queryable } from './database.ts';
import * as plans from './plans.ts';

/** Stores an owed delivery, due at `now`, unless its event id is already known. */
export async function enqueueOwed(db: Queryable, owed: OwedWebhook, now: Date): Promise<boolean> {
  const res = await db.query(plans.enqueueDelivery(), [owed.eventId, owed.jobId, owed.url, owed.secret, JSON.stringify(owed.payload), now]);
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
  constructor(
    private readonly pool: pg.Pool,
    private readonly clock: Clock,
  ) {}

  enqueue(owed: OwedWebhook): Promise<boolean> {
    return enqueueOwed(this.pool, owed, this.clock());
  }

  claimDue(nodeId: string, claim: DeliveryClaim): Promise<Delivery[]> {
    const delays = claim.retryDelaysMs;
    return transaction(this.pool, async (c) => {
      // Attempts whose node never settled them count as spent: due again after the following
      // delay, or settled as abandoned when none is left.
      await c.query(plans.reclaimSpentAttempts(), [claim.now, claim.ttlMs, delays.length, delays]);
      const { rows } = await c.query<DeliveryRow>(plans.claimDueDeliveries(), [claim.now, nodeId, claim.limit, delays.length]);
      rows.sort((a, b) => a.next_at.getTime() - b.next_at.getTime() || a.event_id.localeCompare(b.event_id));
      return rows.map((r) => ({ eventId: r.event_id, jobId: r.job_id, url: r.url, secret: r.secret, payload: r.payload, attempt: r.attempt }));
    });
  }

  async settle(eventId: string, attempt: number, outcome: AttemptOutcome, nextAt: number | null): Promise<void> {
    await this.pool.query(plans.settleAttempt(), [eventId, attempt, nextAt === null ? null : new Date(nextAt), outcome.status, outcome.error, outcome.outcome === 'retry' ? 'exhausted' : outcome.outcome],
    );
  }

  async nextDueAt(): Promise<number | null> {
    const { rows } = await this.pool.query<{ at: Date | null }>(plans.nextDueDelivery());
    return rows[0]!.at ? rows[0]!.at.getTime() : null;
  }

  async pendingCount(): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>(plans.pendingDeliveries());
    return Number(rows[0]!.n);
  }
}
