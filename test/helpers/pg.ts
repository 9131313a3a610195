import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { chmod, chown, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { Daemon, freePort, scratchDir } from './daemons.ts';

/** A throw-away PostgreSQL cluster on 127.0.0.1 (Debian's postgresql-15, installed by scripts/setup.mjs). */
export interface TestPostgres {
  /** Connection URL of the `postgres` database. */
  url: string;
  port: number;
  /** Creates an empty database and returns its URL (one per test keeps tests independent). */
  createDatabase(name: string): Promise<string>;
  daemon: Daemon;
  stop(): Promise<void>;
}

/** The directory of the newest installed PostgreSQL's programs (initdb, pg_dump, psql). */
export function pgBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error(`no PostgreSQL under ${root}: run scripts/setup.mjs`);
  return join(root, versions[0]!, 'bin');
}

/**
 * initdb in a scratch dir and a postmaster on a free loopback port with trust auth and its
 * unix socket inside the scratch dir. As root the cluster runs as the `postgres` user
 * (PostgreSQL refuses root), so the scratch dir gets o+x for that user to reach it.
 */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = pgBin();
  const tmp = await scratchDir('compressd-pg-');
  const scratch = tmp.path;
  await chmod(scratch, 0o711);
  const data = join(scratch, 'data');
  await mkdir(data, { mode: 0o700 });
  let owner: { uid: number; gid: number } | undefined;
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    owner = { uid, gid };
    await chown(data, uid, gid);
    await chown(scratch, uid, gid);
  }
  const initdb = spawnSync(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'], {
    ...owner,
    encoding: 'utf8',
  });
  if (initdb.status !== 0) throw new Error(`initdb failed: ${initdb.stderr || initdb.error?.message}`);

  const port = await freePort();
  // fsync off: the tests kill compressd nodes, never the database host, and it spares the shared disk.
  const daemon = new Daemon('postgres', join(bin, 'postgres'), ['-D', data, '-p', String(port), '-k', scratch, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200'], owner);
  const ready = () => spawnSync(join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-t', '1']).status === 0;
  try {
    await daemon.ready(ready);
  } catch (err) {
    await daemon.stop('SIGKILL');
    await tmp.remove();
    throw err;
  }
  const url = (db: string) => `postgres://postgres@127.0.0.1:${port}/${db}`;
  return {
    url: url('postgres'),
    port,
    daemon,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    async stop() {
      // SIGINT is PostgreSQL's fast shutdown: open sessions are ended, nothing waits for clients.
      await daemon.stop('SIGINT');
      await tmp.remove();
    },
  };
}
