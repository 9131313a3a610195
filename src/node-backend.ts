import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from './clock.ts';
import { PgAccountRegistry } from './accounts/pg-registry.ts';
import { AccountRegistry, STARTING_CREDITS, type Authenticator } from './accounts/registry.ts';
import type { ServeConfig } from './config.ts';
import type { Backend } from './jobs/backend.ts';
import { sharedSecret } from './jobs/cluster/database.ts';
import { openFilesBackend } from './jobs/files/index.ts';
import { LocalSpool, ScratchSpool, type Spool } from './jobs/spool.ts';
import type { IoSink } from './ops/io-counts.ts';
import type { StartupPhases } from './ops/startup-phases.ts';
import { DownloadTokens } from './webhooks/download-token.ts';

/** Where this node keeps state, and what follows from that: accounts, token key, leases, polling. */
export interface NodeBackend {
  backend: Backend;
  accounts: Authenticator;
  spool: Spool;
  tokens: DownloadTokens;
  /**
   * On the first start (no accounts at all) creates the `default` account and returns its key;
   * else null. Called once the port is bound, so a start that fails writes no key nobody saw.
   */
  firstStart(): Promise<string | null>;
  nodeId: string;
  leaseMs: number;
  /** How often the node looks for work queued by other nodes and for leases of dead ones; absent: one node. */
  pollMs?: number;
  close(): Promise<void>;
}

/** Creates the `default` account and its first key when there are no accounts at all. */
async function firstStart(accounts: AccountRegistry | PgAccountRegistry): Promise<string | null> {
  if (!(await accounts.isEmpty())) return null;
  // Nodes starting together on an empty database: the one that creates the account makes the key.
  if (!(await accounts.ensureAccount('default', STARTING_CREDITS))) return null;
  return (await accounts.createKey('default')).key;
}

/** One node on its data dir (the default): journals and the spool, nothing shared. */
async function openFilesNode(config: ServeConfig, log: Logger, { clock, phases }: Omit<NodeBackendOptions, 'io'>): Promise<NodeBackend> {
  const accounts = new AccountRegistry(config.dataDir);
  accounts.watch();
  phases?.mark('accounts.log');
  const backend = await openFilesBackend(config.dataDir, { granted: (a) => accounts.granted(a), log: (entry) => log.warn(entry, 'files backend'), phases, clock });
  return {
    backend,
    accounts,
    spool: new LocalSpool(backend.blobs.root),
    tokens: await DownloadTokens.open(config.dataDir),
    firstStart: () => firstStart(accounts),
    // The files backend's leases only matter across this node's own restarts.
    nodeId: 'local',
    leaseMs: 30_000,
    async close() {
      accounts.close();
      await backend.close();
    },
  };
}

/**
 * One of several nodes: state in PostgreSQL, files in shared storage, the data dir only scratch.
 * Its backend and storage modules (with the S3 SDK, a large part of the code) load only here, so a
 * files-mode start does not spend time loading them.
 */
async function openClusterNode(config: ServeConfig, clock: Clock, io?: IoSink): Promise<NodeBackend> {
  const [{ openBlobStore }, { openClusterBackend }] = await Promise.all([import('./storage/index.ts'), import('./jobs/cluster/index.ts')]);
  const blobs = await openBlobStore(config.storage, io);
  const backend = await openClusterBackend(config.databaseUrl, blobs, { io, clock });
  const accounts = new PgAccountRegistry(backend.pool, clock);
  const leaseMs = config.leaseSeconds * 1000;
  return {
    backend,
    accounts,
    spool: new ScratchSpool(join(config.dataDir, 'spool')),
    tokens: await DownloadTokens.shared((fresh) => sharedSecret(backend.pool, 'download-token', fresh)),
    firstStart: () => firstStart(accounts),
    nodeId: config.nodeId,
    leaseMs,
    // A job queued on another node starts here within this (by default half a second); a dead node's
    // job does not wait for it: the engine looks again when the lease expires.
    pollMs: config.pollSeconds * 1000,
    close: () => backend.close(),
  };
}

export interface NodeBackendOptions {
  /** What leases and the key cache read (tests move it). */
  clock: Clock;
  /** Marks the start-up phases of a files node's journals. */
  phases?: StartupPhases;
  /** Counts the database queries and storage requests of a cluster node (files mode makes none). */
  io?: IoSink;
}

export function openNodeBackend(config: ServeConfig, log: Logger, { clock, phases, io }: NodeBackendOptions): Promise<NodeBackend> {
  return config.databaseUrl ? openClusterNode(config, clock, io) : openFilesNode(config, log, { clock, phases });
}
