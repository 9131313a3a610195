import type pg from 'pg';
import { systemClock, type Clock } from '../../clock.ts';
import type { IoSink } from '../../ops/io-counts.ts';
import type { Backend, BlobStore } from '../backend.ts';
import { recover } from '../recovery.ts';
import { LOCKS, migrate, openPool, withLock } from './database.ts';
import { PgJobStore } from './job-store.ts';
import { PgLedger } from './ledger.ts';
import { PgOutbox } from './outbox.ts';

export interface ClusterBackend extends Backend {
  jobs: PgJobStore;
  ledger: PgLedger;
  outbox: PgOutbox;
  pool: pg.Pool;
}

export interface ClusterBackendOptions {
  /** Counts the database's connections and queries. */
  io?: IoSink;
  /** What owed webhooks are stamped due with (default: the system clock). */
  clock?: Clock;
}

/**
 * The backend for several nodes: job records, the queue, credits and the webhook outbox in
 * PostgreSQL (the schema is migrated on open), blobs in shared storage.
 */
export async function openClusterBackend(databaseUrl: string, blobs: BlobStore, { io, clock = systemClock }: ClusterBackendOptions = {}): Promise<ClusterBackend> {
  const pool = openPool(databaseUrl, io);
  try {
    await migrate(pool);
  } catch (err) {
    await pool.end();
    throw err;
  }
  const jobs = new PgJobStore(pool, databaseUrl, clock);
  const ledger = new PgLedger(pool);
  const outbox = new PgOutbox(pool, clock);
  return {
    jobs,
    ledger,
    outbox,
    blobs,
    pool,
    recover: () => recover({ ledger, blobs, records: jobs }),
    async exclusive(_task, fn) {
      await withLock(pool, LOCKS.retention, fn, false);
    },
    async close() {
      await jobs.close();
      await pool.end();
    },
  };
}
