// Issue 28 item 1: versioned formats. Older data dirs and schemas are upgraded; newer ones are refused in one line.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import pg from 'pg';
import { DATA_FORMAT, migrateDataDir, readDataFormat } from '../src/durable/data-format.ts';
import { migrate, openPool, SCHEMA_VERSION } from '../src/jobs/cluster/database.ts';
import { VERSION } from '../src/version.ts';
import { scratchDir } from './helpers/daemons.ts';
import { startPostgres, type TestPostgres } from './helpers/pg.ts';
import { startTestServer } from './helpers/server.ts';

const run = promisify(execFile);
const env = { ...process.env, COMPRESSD_DATA_DIR: '', COMPRESSD_DATABASE_URL: '', COMPRESSD_STORAGE: '' };
/** Runs the CLI; resolves with its exit code and output whatever the code. */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
const modeOf = async (path: string) => (await stat(path)).mode & 0o777;

let scratch: { path: string; remove(): Promise<void> };
before(async () => {
  scratch = await scratchDir('compressd-formats-');
});
after(() => scratch.remove());

describe('data directory format', () => {
  it('--version names the release, the data format and the schema version', async () => {
    const { code, stdout } = await cli('--version');
    assert.equal(code, 0);
    assert.match(stdout, new RegExp(`^compressd ${VERSION.replace(/\./g, '\\.')} `));
    assert.match(stdout, new RegExp(`^data directory format ${DATA_FORMAT} \\(opens formats 1 to ${DATA_FORMAT}`, 'm'));
    assert.match(stdout, new RegExp(`^cluster schema version ${SCHEMA_VERSION} `, 'm'));
  });

  for (const command of [['serve', '--port', '0', '--host', '127.0.0.1'], ['keys', 'list'], ['backup', '--out', '/dev/null']]) {
    it(`compressd ${command[0]} refuses a data dir of a newer format with one line and exit code 2`, async () => {
      const dir = join(scratch.path, `newer-${command[0]}`);
      await mkdir(dir);
      await writeFile(join(dir, 'FORMAT'), `${DATA_FORMAT + 1}\n`);
      const { code, stdout, stderr } = await cli(...command, '--data-dir', dir);
      assert.equal(code, 2);
      assert.equal(stdout, '');
      assert.equal(stderr, `compressd: the data directory ${dir} has format version ${DATA_FORMAT + 1}, newer than this compressd ${VERSION} reads (1 to ${DATA_FORMAT}): upgrade compressd\n`);
      assert.equal(await readFile(join(dir, 'FORMAT'), 'utf8'), `${DATA_FORMAT + 1}\n`);
    });
  }

  it('a data dir without FORMAT (0.1.0) is upgraded at start: private modes, then FORMAT', async () => {
    const dir = join(scratch.path, 'unmarked');
    await mkdir(join(dir, 'spool'), { recursive: true });
    await writeFile(join(dir, 'accounts.log'), '');
    await chmod(join(dir, 'accounts.log'), 0o644);
    await chmod(join(dir, 'spool'), 0o755);
    await chmod(dir, 0o755);
    assert.equal(await readDataFormat(dir), 1);
    const s = await startTestServer({ dataDir: dir });
    await s.stop();
    assert.equal(await readFile(join(dir, 'FORMAT'), 'utf8'), `${DATA_FORMAT}\n`);
    assert.equal(await modeOf(dir), 0o700);
    assert.equal(await modeOf(join(dir, 'spool')), 0o700);
    assert.equal(await modeOf(join(dir, 'accounts.log')), 0o600);
    assert.equal(await modeOf(join(dir, 'FORMAT')), 0o600);
  });

  it('an upgrade interrupted before FORMAT was written runs again, and a finished one is not repeated', async () => {
    const dir = join(scratch.path, 'interrupted');
    await mkdir(join(dir, 'spool'), { recursive: true });
    await writeFile(join(dir, 'jobs.log'), '');
    // As an interrupted start leaves it: part of the modes changed, no FORMAT.
    await chmod(join(dir, 'spool'), 0o700);
    await chmod(join(dir, 'jobs.log'), 0o644);
    assert.deepEqual(await migrateDataDir(dir), { from: 1, to: DATA_FORMAT });
    assert.equal(await modeOf(join(dir, 'jobs.log')), 0o600);
    assert.deepEqual(await migrateDataDir(dir), { from: DATA_FORMAT, to: DATA_FORMAT });
  });

  it('a new data dir is marked with the current format and not reported as upgraded; keys create marks one it makes', async () => {
    const empty = join(scratch.path, 'new');
    await mkdir(empty);
    await writeFile(join(empty, 'server.lock'), '');
    assert.deepEqual(await migrateDataDir(empty), { from: null, to: DATA_FORMAT });
    assert.equal(await readFile(join(empty, 'FORMAT'), 'utf8'), `${DATA_FORMAT}\n`);

    const missing = join(scratch.path, 'made-by-keys-create', 'data');
    assert.equal((await cli('keys', 'create', '--account', 'a', '--data-dir', missing)).code, 0);
    assert.equal(await readFile(join(missing, 'FORMAT'), 'utf8'), `${DATA_FORMAT}\n`);
    assert.equal(await modeOf(missing), 0o700);
    assert.deepEqual(await migrateDataDir(missing), { from: DATA_FORMAT, to: DATA_FORMAT });
  });

  it('an unreadable FORMAT is refused, not guessed', async () => {
    const dir = join(scratch.path, 'garbled');
    await mkdir(dir);
    await writeFile(join(dir, 'FORMAT'), 'two\n');
    await assert.rejects(migrateDataDir(dir), /FORMAT is not a format version/);
  });
});

describe('cluster schema version', () => {
  let db: TestPostgres;
  before(async () => {
    db = await startPostgres();
  });
  after(() => db.stop());

  async function sql(url: string, text: string): Promise<pg.QueryResult> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await client.query(text);
    } finally {
      await client.end();
    }
  }

  it('migrate --check says what would change and changes nothing', async () => {
    const url = await db.createDatabase('check');
    const planned = await cli('migrate', '--check', '--database-url', url);
    assert.equal(planned.code, 1);
    assert.match(planned.stdout, new RegExp(`^schema is version 0; migrate would bring it to ${SCHEMA_VERSION} with:\n`));
    assert.match(planned.stdout, /^ {2}bookkeeping: CREATE TABLE IF NOT EXISTS compressd_schema/m);
    assert.match(planned.stdout, /^ {2}version 1: CREATE TABLE accounts$/m);
    assert.match(planned.stdout, /^ {2}version 1: CREATE INDEX jobs_queued ON jobs/m);
    const tables = await sql(url, "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'");
    assert.equal(tables.rows[0].n, 0);

    assert.equal((await cli('migrate', '--database-url', url)).code, 0);
    const settled = await cli('migrate', '--check', '--database-url', url);
    assert.deepEqual([settled.code, settled.stdout], [0, `schema is version ${SCHEMA_VERSION}: nothing to change\n`]);
  });

  it('migrate --check on a 0.1.0 schema names the bookkeeping column it would add', async () => {
    const url = await db.createDatabase('old_bookkeeping');
    await sql(url, 'CREATE TABLE compressd_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now()); INSERT INTO compressd_schema (version) VALUES (1)');
    const planned = await cli('migrate', '--check', '--database-url', url);
    assert.equal(planned.code, 1);
    assert.match(planned.stdout, /^ {2}bookkeeping: ALTER TABLE compressd_schema ADD COLUMN IF NOT EXISTS compatible_from integer$/m);
  });

  it('a newer schema still compatible with this release is used as it is', async () => {
    const url = await db.createDatabase('newer_compatible');
    const pool = openPool(url);
    try {
      await migrate(pool);
      await pool.query('INSERT INTO compressd_schema (version, compatible_from) VALUES ($1, $2)', [SCHEMA_VERSION + 1, SCHEMA_VERSION]);
      assert.deepEqual(await migrate(pool), { from: SCHEMA_VERSION + 1, to: SCHEMA_VERSION + 1 });
    } finally {
      await pool.end();
    }
  });

  it('compressd serve refuses a newer, incompatible schema with one line and exit code 2', async () => {
    const url = await db.createDatabase('newer_incompatible');
    const pool = openPool(url);
    try {
      await migrate(pool);
      await pool.query('INSERT INTO compressd_schema (version, compatible_from) VALUES ($1, $1)', [SCHEMA_VERSION + 1]);
    } finally {
      await pool.end();
    }
    const storage = join(scratch.path, 'blobs');
    const { code, stdout, stderr } = await cli('serve', '--port', '0', '--host', '127.0.0.1', '--database-url', url, '--storage', `file://${storage}`, '--data-dir', join(scratch.path, 'node'));
    assert.equal(code, 2);
    assert.equal(stdout, '');
    const v = SCHEMA_VERSION + 1;
    assert.equal(stderr, `compressd: the database schema is version ${v} (compatible from ${v}), newer than this compressd ${VERSION} uses (version ${SCHEMA_VERSION}): upgrade compressd\n`);
  });
});
