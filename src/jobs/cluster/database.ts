import pg from 'pg';
import { countIo, type IoSink } from '../../ops/io-counts.ts';
import { VERSION } from '../../version.ts';

/** Advisory lock keys (class, id): one cluster-wide mutex per purpose. */
const LOCK_CLASS = 0x636d7064; // 'cmpd'
export const LOCKS = { migrate: 1, retention: 2 } as const;

/**
 * The schema, one entry per version, applied in order and never edited once released: a
 * change is a new entry. Credits, open/running counts and the fair-share clock live on the
 * account row, so admission and claim are one conditional UPDATE of a row that serialises
 * concurrent callers (a COUNT in a WHERE would read a stale snapshot under READ COMMITTED).
 */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    name text PRIMARY KEY,
    granted bigint NOT NULL,
    spent bigint NOT NULL DEFAULT 0,
    reserved bigint NOT NULL DEFAULT 0,
    open_jobs integer NOT NULL DEFAULT 0,
    running_jobs integer NOT NULL DEFAULT 0,
    last_served_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
  );
  CREATE TABLE api_keys (
    id text PRIMARY KEY,
    account text NOT NULL REFERENCES accounts (name),
    hash text NOT NULL,
    guest boolean NOT NULL,
    allow_ips text[] NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
  );
  CREATE TABLE jobs (
    id text PRIMARY KEY,
    account text NOT NULL REFERENCES accounts (name),
    job_type text NOT NULL,
    format text NOT NULL,
    file_name text NOT NULL,
    options jsonb NOT NULL,
    status text NOT NULL CHECK (status IN ('Queued', 'Running', 'Succeeded', 'Failed', 'Canceled')),
    progress jsonb NOT NULL,
    input_bytes bigint NOT NULL,
    credit_cost integer NOT NULL,
    output jsonb,
    error jsonb,
    webhook jsonb,
    created_at timestamptz NOT NULL,
    started_at timestamptz,
    completed_at timestamptz,
    expires_at timestamptz,
    expired boolean NOT NULL DEFAULT false,
    attempts integer NOT NULL DEFAULT 0,
    lease_node text,
    lease_expires_at timestamptz,
    ran_on text
  );
  CREATE INDEX jobs_queued ON jobs (created_at, id) WHERE status = 'Queued';
  CREATE INDEX jobs_running ON jobs (account, job_type) WHERE status = 'Running';
  CREATE INDEX jobs_ended ON jobs (completed_at) WHERE status IN ('Succeeded', 'Failed', 'Canceled');
  CREATE TABLE credit_holds (
    job_id text PRIMARY KEY,
    account text NOT NULL REFERENCES accounts (name),
    amount integer NOT NULL,
    state text NOT NULL DEFAULT 'held' CHECK (state IN ('held', 'charged', 'released')),
    settled_at timestamptz
  );
  CREATE INDEX credit_holds_open ON credit_holds (account) WHERE state = 'held';
  CREATE TABLE webhook_outbox (
    event_id text PRIMARY KEY,
    job_id text NOT NULL,
    url text NOT NULL,
    secret text NOT NULL,
    payload jsonb NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    claimed_by text,
    claimed_at timestamptz,
    next_at timestamptz,
    settled text,
    last_status integer,
    last_error text
  );
  CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at) WHERE settled IS NULL;
  CREATE TABLE service_secrets (
    name text PRIMARY KEY,
    value bytea NOT NULL
  );
  `,
  // Idempotency keys: bound in the admission's transaction; the primary key makes one of two
  // racing admissions with one key lose. `job` is the admitted job's 202 (AcceptedJob), kept
  // without a reference to jobs: a key outlives a deleted job.
  `
  CREATE TABLE idempotency_keys (
    account text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    job jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (account, key)
  );
  CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
  `,
  // Runs of a job that ended with their node (requeueInterrupted counts them; past the limit the job fails jobs.crashed).
  `
  ALTER TABLE jobs ADD COLUMN crashes integer NOT NULL DEFAULT 0;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * The oldest schema version whose compressd can run on this release's schema, recorded with each
 * step applied. Schema changes are expand-then-contract so that the previous release runs beside
 * this one during a rolling upgrade: an expand step only adds (tables, indexes, columns that are
 * nullable or have a default) and leaves this alone; a contract step (dropping or changing what an
 * older release uses) raises it, and ships only once no node of those releases can be running.
 */
export const OLDEST_COMPATIBLE_SCHEMA = 1;

export type Queryable = pg.Pool | pg.PoolClient;

/** A pool of up to 10 connections; with `io`, every connection made and every query sent (one round trip each) is counted. */
export function openPool(databaseUrl: string, io?: IoSink): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  // An idle connection the server dropped must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  if (io) {
    pool.on('connect', (client) => {
      countIo((path) => io.dbConnect(path));
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      client.query = ((...args: unknown[]) => {
        countIo((path) => io.dbQuery(path));
        return query(...args);
      }) as typeof client.query;
    });
  }
  return pool;
}

/** Runs `fn` in one transaction on one connection; rolls back when it throws. */
export async function transaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** Holds the cluster-wide advisory lock `key` while `fn` runs (on a session of its own). */
export async function withLock<T>(pool: pg.Pool, key: number, fn: () => Promise<T>, wait = true): Promise<T | undefined> {
  const client = await pool.connect();
  try {
    if (wait) await client.query('SELECT pg_advisory_lock($1, $2)', [LOCK_CLASS, key]);
    else {
      const { rows } = await client.query<{ got: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS got', [LOCK_CLASS, key]);
      if (!rows[0]!.got) return undefined;
    }
    try {
      return await fn();
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_CLASS, key]);
    }
  } finally {
    client.release();
  }
}

/** The bookkeeping table, and its column for what older releases may run on (added after 0.1.0). */
const BOOKKEEPING = [
  'CREATE TABLE IF NOT EXISTS compressd_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
  'ALTER TABLE compressd_schema ADD COLUMN IF NOT EXISTS compatible_from integer',
];

export interface SchemaState {
  /** Steps applied (0: an empty database). */
  version: number;
  /** The oldest schema version whose compressd can run on it (a row without it, as 0.1.0 writes, only its own). */
  compatibleFrom: number;
  /** Bookkeeping changes still to make (BOOKKEEPING statements). */
  bookkeeping: string[];
}

/** Reads the schema's state without changing anything. */
export async function schemaState(db: Queryable): Promise<SchemaState> {
  const { rows: tables } = await db.query<{ has_table: boolean; has_column: boolean }>(
    `SELECT to_regclass('compressd_schema') IS NOT NULL AS has_table,
       EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'compressd_schema' AND column_name = 'compatible_from') AS has_column`,
  );
  const { has_table, has_column } = tables[0]!;
  if (!has_table) return { version: 0, compatibleFrom: 0, bookkeeping: BOOKKEEPING };
  const { rows } = await db.query<{ version: number; compatible_from: number | null }>(
    `SELECT version, ${has_column ? 'compatible_from' : 'NULL::integer AS compatible_from'} FROM compressd_schema ORDER BY version DESC LIMIT 1`,
  );
  const version = rows[0]?.version ?? 0;
  return { version, compatibleFrom: rows[0]?.compatible_from ?? version, bookkeeping: has_column ? [] : BOOKKEEPING.slice(1) };
}

/** Throws the one-line refusal when the schema is newer than this compressd and not compatible with it. */
function refuseIncompatible(state: SchemaState): void {
  if (state.version > SCHEMA_VERSION && state.compatibleFrom > SCHEMA_VERSION) {
    throw new Error(`the database schema is version ${state.version} (compatible from ${state.compatibleFrom}), newer than this compressd ${VERSION} uses (version ${SCHEMA_VERSION}): upgrade compressd`);
  }
}

/** What `migrate` would do, without doing it: the statements of each step still to apply. */
export async function planMigration(pool: pg.Pool): Promise<{ state: SchemaState; steps: { version: number; statements: string[] }[] }> {
  const state = await schemaState(pool);
  refuseIncompatible(state);
  const steps = [];
  for (let v = state.version + 1; v <= SCHEMA_VERSION; v++) steps.push({ version: v, statements: statementHeads(MIGRATIONS[v - 1]!) });
  return { state, steps };
}

/** The first line of each statement of a step: enough to say what it changes. */
function statementHeads(sql: string): string[] {
  return sql
    .split(';')
    .map((st) => st.trim().split('\n')[0]!.replace(/\s*\($/, '').trim())
    .filter(Boolean);
}

/**
 * Brings the schema to this version, idempotently: under the migrate lock, so nodes starting
 * together apply each step once. A newer schema that is still compatible with this release (a
 * rolling upgrade in progress) is used as it is; an incompatible one is refused.
 */
export async function migrate(pool: pg.Pool): Promise<{ from: number; to: number }> {
  const result = await withLock(pool, LOCKS.migrate, async () => {
    const state = await schemaState(pool);
    refuseIncompatible(state);
    for (const statement of state.bookkeeping) await pool.query(statement);
    const from = state.version;
    for (let v = from + 1; v <= SCHEMA_VERSION; v++) {
      await transaction(pool, async (c) => {
        await c.query(MIGRATIONS[v - 1]!);
        await c.query('INSERT INTO compressd_schema (version, compatible_from) VALUES ($1, $2)', [v, OLDEST_COMPATIBLE_SCHEMA]);
      });
    }
    return { from, to: Math.max(from, SCHEMA_VERSION) };
  });
  return result!;
}

/** The secret stored under `name`, storing `fresh` first when there is none (the first node to ask wins). */
export async function sharedSecret(pool: pg.Pool, name: string, fresh: Buffer): Promise<Buffer> {
  await pool.query('INSERT INTO service_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, fresh]);
  const { rows } = await pool.query<{ value: Buffer }>('SELECT value FROM service_secrets WHERE name = $1', [name]);
  return rows[0]!.value;
}

/** `err` is PostgreSQL's unique_violation. */
export function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: string }).code === '23505';
}
