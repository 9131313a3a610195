import type pg from 'pg';
import type { IoSink } from '../../ops/io-counts.ts';
import type { Backend, BlobStore, RecoveryReport } from '../backend.ts';
import { LOCKS, migrate, openPool, withLock } from './database.ts';
import { PgJobStore } from './job-store.ts';
import { settlementOf } from '../moves.ts';
import { TERMINAL, type JobStatus } from '../types.ts';
import { PgLedger } from './ledger.ts';
import { PgOutbox } from './outbox.ts';

export interface ClusterBackend extends Backend {
  jobs: PgJobStore;
  ledger: PgLedger;
  outbox: PgOutbox;
  pool: pg.Pool;
}

/**
 * The backend for several nodes: job records, the queue, credits and the webhook outbox in
 * PostgreSQL (the schema is migrated on open), blobs in shared storage.
 */
export async function openClusterBackend(databaseUrl: string, blobs: BlobStore, io?: IoSink): Promise<ClusterBackend> {
  const pool = openPool(databaseUrl, io);
  try {
    await migrate(pool);
  } catch (err) {
    await pool.end();
    throw err;
  }
  const jobs = new PgJobStore(pool, databaseUrl);
  const ledger = new PgLedger(pool);
  const outbox = new PgOutbox(pool);
  return {
    jobs,
    ledger,
    outbox,
    blobs,
    pool,
    async recover(): Promise<RecoveryReport> {
      const report: RecoveryReport = { charged: 0, released: 0, webhooksEnqueued: 0, blobsDeleted: 0 };
      // Moves are single transactions here, so an ended job with an open hold or a missing webhook
      // cannot exist; holds whose job is gone are still settled, as the contract says.
      const { rows } = await pool.query<{ job_id: string; status: JobStatus | null }>(
        `SELECT h.job_id, j.status FROM credit_holds h LEFT JOIN jobs j ON j.id = h.job_id
         WHERE h.state = 'held' AND (j.id IS NULL OR j.status = ANY($1))`,
        [[...TERMINAL]],
      );
      for (const hold of rows) {
        const charge = settlementOf(hold.status ?? undefined) === 'charge';
        await (charge ? ledger.charge(hold.job_id) : ledger.release(hold.job_id));
        report[charge ? 'charged' : 'released']++;
      }
      const ids = await blobs.ids();
      if (ids.length > 0) {
        const { rows: live } = await pool.query<{ id: string }>('SELECT id FROM jobs WHERE id = ANY($1) AND NOT expired', [ids]);
        const keep = new Set(live.map((r) => r.id));
        for (const id of ids) {
          if (keep.has(id)) continue;
          await blobs.delete(id);
          report.blobsDeleted++;
        }
      }
      return report;
    },
    async exclusive(_task, fn) {
      await withLock(pool, LOCKS.retention, fn, false);
    },
    async close() {
      await jobs.close();
      await pool.end();
    },
  };
}
