#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { PgAccountRegistry } from './accounts/pg-registry.ts';
import { AccountRegistry, STARTING_CREDITS } from './accounts/registry.ts';
import { ConfigError, resolveConfig, SETTINGS, settingsHelp } from './config.ts';
import { COMPRESS_USAGE, compressCommand } from './cli/compress.ts';
import { migrate, OLDEST_COMPATIBLE_SCHEMA, openPool, planMigration, SCHEMA_VERSION } from './jobs/cluster/database.ts';
import { checkDataFormat, DATA_FORMAT } from './durable/data-format.ts';
import { createLogger } from './log.ts';
import { fatalErrorHandler } from './ops/fatal.ts';
import { backup, restore } from './ops/backup.ts';
import { allocatorInUse } from './runtime/allocator.ts';
import { runtimeTree } from './runtime/bundled.ts';
import { startService } from './service.ts';
import { VERSION } from './version.ts';

/** The whole help; every line under 80 columns (test/cli-help.test.ts holds it to that). */
const USAGE = `compressd — self-hosted file compression service

Usage:
  compressd serve [flags]
  compressd --version
  ${COMPRESS_USAGE}
  compressd keys create --account NAME [--credits N] [--allow-ip LIST]
      [--guest] [--data-dir D | --database-url URL]
  compressd keys list [--data-dir D | --database-url URL]
  compressd keys revoke KEY_OR_ID [--data-dir D | --database-url URL]
  compressd credits add --account NAME --amount N
      [--data-dir D | --database-url URL]
  compressd migrate --database-url URL [--check]
  compressd backup --data-dir D --out FILE
  compressd restore FILE --data-dir NEW

  --database-url (env COMPRESSD_DATABASE_URL) selects cluster mode: accounts,
  keys and credits live in that PostgreSQL database, shared by every node.

Flags of serve (each has an environment twin; flags win):
${settingsHelp()}
`;

/** How long running jobs get to finish when the server stops (signal or fatal error). */
const SHUTDOWN_GRACE_MS = 10_000;

function fail(message: string): never {
  console.error(`compressd: ${message}`);
  process.exit(2);
}

function dataDirOf(flag: string | undefined): string {
  return resolve(flag ?? process.env.COMPRESSD_DATA_DIR ?? './data');
}

function readConfigFile(path: string | undefined): Record<string, unknown> {
  if (!path) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(`--config ${path}: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigError(`--config ${path}: expected a JSON object`);
  return parsed as Record<string, unknown>;
}

async function serveCommand(args: string[]): Promise<void> {
  const options = Object.fromEntries(SETTINGS.map((s) => [s.flag, { type: 'string' as const }]));
  let parsed;
  try {
    // `--trust-proxy` without a value, its spelling when it was a switch, still means one hop.
    const argv = args.map((a, i) => (a === '--trust-proxy' && !/^[^-]/.test(args[i + 1] ?? '') ? '--trust-proxy=1' : a));
    parsed = parseArgs({ args: argv, options: { ...options, config: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true });
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const config = resolveConfig(values as Record<string, string | undefined>, process.env, readConfigFile(values.config as string | undefined), values.config as string | undefined);
  const log = createLogger();
  // Everything the server and its codecs write (inputs, outputs, scratch) is readable by its own user only.
  process.umask(0o077);
  const service = await startService(config, log, {}, (key) => {
    console.log(`compressd: created account "default" with ${STARTING_CREDITS} credits. Its API key is shown once:`);
    console.log(`API key: ${key}`);
  });
  log.info({ port: service.port, host: config.host, dataDir: config.dataDir, workers: config.workers, allocator: allocatorInUse(), startupMs: service.startupMs }, `compressd listening on http://${config.host}:${service.port}`);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'shutting down: finishing running jobs');
    service.close(SHUTDOWN_GRACE_MS).then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  const fatal = fatalErrorHandler({ log, close: (graceMs) => service.close(graceMs), graceMs: SHUTDOWN_GRACE_MS, exit: (code) => process.exit(code) });
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', (reason) => fatal(reason, 'unhandledRejection'));
}

/**
 * The account registry an administration command works on: the cluster's database when a
 * database URL is given (flag or environment), else the data dir's journal.
 */
async function withRegistry(values: { 'data-dir'?: string; 'database-url'?: string }, fn: (registry: AccountRegistry | PgAccountRegistry) => Promise<void>): Promise<void> {
  const databaseUrl = values['database-url'] ?? process.env.COMPRESSD_DATABASE_URL;
  if (!databaseUrl) {
    const dataDir = dataDirOf(values['data-dir']);
    checkDataFormat(dataDir);
    const registry = new AccountRegistry(dataDir);
    try {
      return await fn(registry);
    } finally {
      registry.close();
    }
  }
  const pool = openPool(databaseUrl);
  try {
    await migrate(pool);
    await fn(new PgAccountRegistry(pool));
  } finally {
    await pool.end();
  }
}

async function migrateCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { 'database-url': { type: 'string' }, check: { type: 'boolean' } } });
  const databaseUrl = values['database-url'] ?? process.env.COMPRESSD_DATABASE_URL;
  if (!databaseUrl) fail('migrate needs --database-url URL (or COMPRESSD_DATABASE_URL)');
  const pool = openPool(databaseUrl);
  try {
    if (values.check) {
      const { state, steps } = await planMigration(pool);
      const changes = [...state.bookkeeping.map((st) => `  bookkeeping: ${st}`), ...steps.flatMap((step) => step.statements.map((st) => `  version ${step.version}: ${st}`))];
      if (changes.length === 0) {
        console.log(`schema is version ${state.version}: nothing to change`);
        return;
      }
      console.log(`schema is version ${state.version}; migrate would bring it to ${Math.max(state.version, SCHEMA_VERSION)} with:`);
      for (const line of changes) console.log(line);
      process.exitCode = 1;
      return;
    }
    const { from, to } = await migrate(pool);
    console.log(from === to ? `schema is up to date (version ${to})` : `migrated the schema from version ${from} to ${to}`);
  } finally {
    await pool.end();
  }
}

async function backupCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { 'data-dir': { type: 'string' }, out: { type: 'string' } } });
  if (!values.out) fail('backup needs --out FILE');
  const dataDir = dataDirOf(values['data-dir']);
  const started = Date.now();
  const m = await backup(dataDir, resolve(values.out));
  const bytes = (await stat(resolve(values.out))).size;
  console.log(`backed up ${dataDir} as of ${m.at}: ${m.jobs} jobs, ${m.blobs} files, ${bytes} bytes in ${Date.now() - started} ms to ${resolve(values.out)}`);
  if (m.missing.length > 0) console.error(`compressd: ${m.missing.length} files were deleted by retention before they could be kept: ${m.missing.join(', ')}`);
}

async function restoreCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { 'data-dir': { type: 'string' } }, allowPositionals: true });
  if (positionals.length !== 1) fail('restore needs the backup FILE');
  if (!values['data-dir']) fail('restore needs --data-dir NEW (a directory that does not exist yet, or is empty)');
  const dataDir = resolve(values['data-dir']);
  const m = await restore(resolve(positionals[0]!), dataDir);
  console.log(`restored ${dataDir} as of ${m.at} (written by compressd ${m.compressd}): ${m.jobs} jobs, ${m.blobs} files`);
}

async function keysCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    options: {
      'data-dir': { type: 'string' },
      'database-url': { type: 'string' },
      account: { type: 'string' },
      credits: { type: 'string' },
      'allow-ip': { type: 'string' },
      guest: { type: 'boolean' },
    },
    allowPositionals: true,
  });
  if (sub !== 'create' && sub !== 'list' && sub !== 'revoke') fail(`unknown keys command ${sub ?? ''}\n${USAGE}`);
  await withRegistry(values, async (registry) => {
    switch (sub) {
      case 'create': {
        if (!values.account) fail('keys create needs --account NAME');
        const credits = values.credits === undefined ? STARTING_CREDITS : Number(values.credits);
        if (!Number.isInteger(credits) || credits < 0) fail('--credits must be a whole number ≥ 0');
        const created = await registry.ensureAccount(values.account, credits);
        const { id, key } = await registry.createKey(values.account, { guest: values.guest, allowIps: values['allow-ip'] ?? [] });
        console.log(`${created ? `created account ${values.account} with ${credits} credits; ` : ''}key ${id} for account ${values.account}${values.guest ? ' (guest)' : ''}`);
        console.log(key);
        return;
      }
      case 'list':
        for (const k of await registry.listKeys()) {
          console.log([k.id, k.account, k.guest ? 'guest' : 'account', k.revoked ? 'revoked' : 'active', k.allowIps.join(',') || '*', k.createdAt].join('\t'));
        }
        return;
      case 'revoke': {
        const target = positionals[0];
        if (!target) fail('keys revoke needs a key or key id');
        if (!(await registry.revokeKey(target))) fail(`no active key ${target}`);
        console.log(`revoked ${target}`);
        return;
      }
    }
  });
}

async function creditsCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  const { values } = parseArgs({ args: rest, options: { 'data-dir': { type: 'string' }, 'database-url': { type: 'string' }, account: { type: 'string' }, amount: { type: 'string' } } });
  if (sub !== 'add') fail(`unknown credits command ${sub ?? ''}`);
  if (!values.account || values.amount === undefined) fail('credits add needs --account NAME --amount N');
  await withRegistry(values, async (registry) => {
    await registry.addCredits(values.account!, Number(values.amount));
    console.log(`added ${values.amount} credits to ${values.account}`);
  });
}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  switch (command) {
    case 'serve':
      return serveCommand(args);
    case 'compress':
      process.exitCode = await compressCommand(args);
      return;
    case 'keys':
      return keysCommand(args);
    case 'credits':
      return creditsCommand(args);
    case 'migrate':
      return migrateCommand(args);
    case 'backup':
      return backupCommand(args);
    case 'restore':
      return restoreCommand(args);
    case '--version':
    case '-v':
    case 'version':
      // The Node that runs us: inside the single executable, the one it embeds.
      console.log(`compressd ${VERSION} (node ${process.version})`);
      console.log(`data directory format ${DATA_FORMAT} (opens formats 1 to ${DATA_FORMAT}, upgrading them to ${DATA_FORMAT})`);
      console.log(`cluster schema version ${SCHEMA_VERSION} (migrates versions 0 to ${SCHEMA_VERSION}; also runs on a newer schema marked compatible from ${SCHEMA_VERSION} or earlier; marks its own compatible from ${OLDEST_COMPATIBLE_SCHEMA})`);
      // The executable's built-in Node options (build.mjs); from source, node's own flags are the caller's.
      if (runtimeTree()) console.log(`node options ${process.execArgv.join(' ')}`);
      console.log(`allocator ${allocatorInUse()}`);
      return;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return;
    default:
      fail(`unknown command ${command}\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err) => {
  fail(err instanceof ConfigError ? err.message : err instanceof Error ? err.message : String(err));
});
