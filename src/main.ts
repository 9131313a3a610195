#!/usr/bin/env node
// First: `serve` from source may re-execute itself before anything else is evaluated.
import './runtime/source-start.ts';
import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { PgAccountRegistry } from './accounts/pg-registry.ts';
import { AccountRegistry, STARTING_CREDITS } from './accounts/registry.ts';
import { ConfigError, resolveConfig, SETTINGS, settingOption, settingsHelp } from './config.ts';
import { type CliOption, type Command, type CommandGroup, commandHelp, groupHelp, parseCommand, usageLines, UsageError } from './cli/command.ts';
import { backup } from './cli/backup.ts';
import { COMPRESS, compressCommand } from './cli/compress.ts';
import { restore } from './cli/restore.ts';
import { migrate, OLDEST_COMPATIBLE_SCHEMA, openPool, planMigration, SCHEMA_VERSION } from './jobs/cluster/database.ts';
import { DATA_FORMAT, prepareDataDir } from './durable/data-format.ts';
import { busyThreads } from './jobs/pool.ts';
import { createLogger } from './log.ts';
import { exitProcess } from './ops/exit.ts';
import { fatalErrorHandler } from './ops/fatal.ts';
import { allocatorInUse } from './runtime/allocator.ts';
import { runtimeTree } from './runtime/bundled.ts';
import { VERSION } from './version.ts';

const dataDir = { type: 'string', ...settingOption('dataDir') } as const;
const databaseUrl = { type: 'string', ...settingOption('databaseUrl') } as const;
const account = { type: 'string', arg: 'NAME', help: 'the account' } as const;

const KEYS_CREATE = {
  name: 'keys create',
  synopsis: ['--account NAME [--credits N] [--allow-ip LIST]', '[--guest] [--data-dir DIR | --database-url URL]'],
  about: 'Creates an API key, and its account when that does not exist yet. The key is the last line of stdout; a running server accepts it at once.',
  options: {
    account: { ...account, help: 'the account the key is for (created when missing)' },
    credits: { type: 'string', arg: 'N', help: 'starting grant of an account this creates', default: String(STARTING_CREDITS) },
    'allow-ip': { type: 'string', arg: 'LIST', help: 'IPs and CIDRs, comma-separated, the key may be used from', shownDefault: 'any' },
    guest: { type: 'boolean', help: 'a key with no signed-in account (cannot use URL input)' },
    'data-dir': dataDir,
    'database-url': databaseUrl,
  },
} satisfies Command;

const KEYS_LIST = {
  name: 'keys list',
  synopsis: ['[--data-dir DIR | --database-url URL]'],
  about: 'One line per key: id, account, guest/account, active/revoked, allowed IPs, created.',
  options: { 'data-dir': dataDir, 'database-url': databaseUrl },
} satisfies Command;

const KEYS_REVOKE = {
  name: 'keys revoke',
  synopsis: ['KEY_OR_ID [--data-dir DIR | --database-url URL]'],
  about: 'Revokes a key, given whole or by its id; the server refuses it from then on.',
  options: { 'data-dir': dataDir, 'database-url': databaseUrl },
  allowPositionals: true,
} satisfies Command;

const CREDITS_ADD = {
  name: 'credits add',
  synopsis: ['--account NAME --amount N', '[--data-dir DIR | --database-url URL]'],
  about: "Adds credits to an account's balance (a negative amount removes them).",
  options: {
    account,
    amount: { type: 'string', arg: 'N', help: 'credits to add; negative removes' },
    'data-dir': dataDir,
    'database-url': databaseUrl,
  },
} satisfies Command;

const MIGRATE = {
  name: 'migrate',
  synopsis: ['--database-url URL [--check]'],
  about: "Creates or migrates the cluster's PostgreSQL schema (every serve start does it too; idempotent).",
  options: {
    'database-url': databaseUrl,
    check: { type: 'boolean', help: 'print what would change and change nothing (exit status 1 when something would)' },
  },
} satisfies Command;

const BACKUP = {
  name: 'backup',
  synopsis: ['[--data-dir DIR] --out FILE'],
  about: 'Writes a consistent snapshot of a data dir, also of one a running server uses.',
  options: { 'data-dir': dataDir, out: { type: 'string', arg: 'FILE', help: 'the backup file to write' } },
} satisfies Command;

const RESTORE = {
  name: 'restore',
  synopsis: ['FILE --data-dir NEW'],
  about: 'Makes a new data dir from a backup FILE.',
  options: { 'data-dir': { type: 'string', arg: 'NEW', help: 'the data dir to make: one that does not exist yet, or is empty' } },
  allowPositionals: true,
} satisfies Command;

const SERVE = { name: 'serve', synopsis: ['[flags]'] };

const KEYS: CommandGroup = { name: 'keys', about: 'Manages API keys.', commands: [KEYS_CREATE, KEYS_LIST, KEYS_REVOKE] };
const CREDITS: CommandGroup = { name: 'credits', about: "Manages accounts' credits.", commands: [CREDITS_ADD] };

/** The whole help; every line under 80 columns (test/cli-help.test.ts holds it to that). */
const USAGE = `compressd — self-hosted file compression service

Usage:
${[SERVE, { name: '--version', synopsis: [] }, { name: 'compress', synopsis: COMPRESS.synopsis }, ...KEYS.commands, ...CREDITS.commands, MIGRATE, BACKUP, RESTORE].map((c) => usageLines(c).replace(/^/gm, '  ')).join('\n')}

  \`compressd COMMAND --help\` shows a command's options and their environment
  variables. --database-url (env COMPRESSD_DATABASE_URL) selects cluster mode:
  accounts, keys and credits live in that PostgreSQL database, shared by every
  node.
`;

const SERVE_HELP = `Usage: ${usageLines(SERVE)}

Runs the HTTP API. On its first start with an empty data dir it creates the
account "default" and prints its API key once.

Flags (each has an environment twin; flags win):
${settingsHelp()}
`;

/**
 * How long running jobs get to finish when the server stops (signal or fatal error) before they are
 * handed back: short enough that a stop ends within Docker's default stop timeout of 10 s.
 */
const SHUTDOWN_GRACE_MS = 7_000;

function fail(message: string): never {
  console.error(`compressd: ${message}`);
  process.exit(2);
}

/** A command's arguments, or null when its help was asked for (and printed). A usage error exits 2 with the help. */
function argsOf<O extends Record<string, CliOption>>(cmd: Command<O>, args: string[]): ReturnType<typeof parseCommand<O>> {
  try {
    const parsed = parseCommand(cmd, args);
    if (!parsed) console.log(commandHelp(cmd));
    return parsed;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`compressd ${cmd.name}: ${err.message}\n\n${commandHelp(cmd)}`);
    process.exit(2);
  }
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
    console.log(SERVE_HELP);
    return;
  }
  const config = resolveConfig(values as Record<string, string | undefined>, process.env, readConfigFile(values.config as string | undefined), values.config as string | undefined);
  const log = createLogger();
  // Everything the server and its codecs write (inputs, outputs, scratch) is readable by its own user only.
  process.umask(0o077);
  // Loaded here, not with this module: the other commands start half a second sooner without the server's graph.
  const { startService } = await import('./service.ts');
  const service = await startService({
    config,
    log,
    announceFirstKey(key, path) {
      // The operator contract prints the key once (tools read this line); an operator who wants no key in
      // a log makes the first key with `keys create` before the first start, and then none is made here.
      console.log(`compressd: created account "default" with ${STARTING_CREDITS} credits. Its API key is shown once, and kept in ${path} (readable by this user only; delete it once copied):`);
      console.log(`API key: ${key}`);
    },
  });
  log.info({ port: service.port, host: config.host, dataDir: config.dataDir, workers: config.workers, allocator: allocatorInUse(), startupMs: service.startupMs }, `compressd listening on http://${config.host}:${service.port}`);
  let stopping = false;
  const exit = (code: number) => {
    const threads = busyThreads();
    if (threads > 0) log.warn({ threads }, 'exiting without waiting for busy worker threads (a thread inside a native call ends only when the call returns)');
    exitProcess(code, threads);
  };
  const shutdown = (signal: string) => {
    if (stopping) exit(1);
    stopping = true;
    log.info({ signal }, 'shutting down: finishing running jobs');
    service.close(SHUTDOWN_GRACE_MS).then(
      () => exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  const fatal = fatalErrorHandler({ log, close: (graceMs) => service.close(graceMs), graceMs: SHUTDOWN_GRACE_MS, exit });
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', (reason) => fatal(reason, 'unhandledRejection'));
}

/**
 * The account registry an administration command works on: the cluster's database when a
 * database URL is given (flag or environment), else the data dir's journal.
 */
async function withRegistry(values: { 'data-dir'?: string; 'database-url'?: string }, fn: (registry: AccountRegistry | PgAccountRegistry) => Promise<void>): Promise<void> {
  if (!values['database-url']) {
    const dataDir = resolve(values['data-dir']!);
    await prepareDataDir(dataDir);
    const registry = new AccountRegistry(dataDir);
    try {
      return await fn(registry);
    } finally {
      registry.close();
    }
  }
  const pool = openPool(values['database-url']);
  try {
    await migrate(pool);
    await fn(new PgAccountRegistry(pool));
  } finally {
    await pool.end();
  }
}

async function migrateCommand(args: string[]): Promise<void> {
  const { values } = argsOf(MIGRATE, args) ?? {};
  if (!values) return;
  const databaseUrl = values['database-url'];
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
  const { values } = argsOf(BACKUP, args) ?? {};
  if (!values) return;
  if (!values.out) fail('backup needs --out FILE');
  const dataDir = resolve(values['data-dir']!);
  const out = resolve(values.out);
  const started = Date.now();
  const m = await backup(dataDir, out);
  const bytes = (await stat(out)).size;
  console.log(`backed up ${dataDir} as of ${m.at}: ${m.jobs} jobs, ${m.blobs} files, ${bytes} bytes in ${Date.now() - started} ms to ${out}`);
  if (m.missing.length > 0) console.error(`compressd: ${m.missing.length} files were deleted by retention before they could be kept: ${m.missing.join(', ')}`);
}

async function restoreCommand(args: string[]): Promise<void> {
  const { values, positionals } = argsOf(RESTORE, args) ?? {};
  if (!values || !positionals) return;
  if (positionals.length !== 1) fail('restore needs the backup FILE');
  if (!values['data-dir']) fail('restore needs --data-dir NEW (a directory that does not exist yet, or is empty)');
  const dataDir = resolve(values['data-dir']);
  const file = resolve(positionals[0]!);
  const { manifest: m, checksums } = await restore(file, dataDir);
  if (!checksums) {
    console.error(`compressd: warning: ${file} has no checksums (a backup made by a build before backups recorded them): each entry was held to its declared length, but its bytes could not be checked; make a new backup`);
  }
  console.log(`restored ${dataDir} as of ${m.at} (written by compressd ${m.compressd}): ${m.jobs} jobs, ${m.blobs} files`);
}

/** The subcommand of a group named first in `args`; null when the group's help was asked for (and printed). */
function subcommandOf(group: CommandGroup, args: string[]): Command | null {
  const [sub] = args;
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    console.log(groupHelp(group));
    return null;
  }
  const cmd = group.commands.find((c) => c.name === `${group.name} ${sub}`);
  if (cmd) return cmd;
  console.error(`compressd ${group.name}: ${sub === undefined ? 'which command?' : `unknown command ${sub}`}\n\n${groupHelp(group)}`);
  process.exit(2);
}

async function keysCommand(args: string[]): Promise<void> {
  const rest = args.slice(1);
  switch (subcommandOf(KEYS, args)) {
    case KEYS_CREATE: {
      const values = argsOf(KEYS_CREATE, rest)?.values;
      if (!values) return;
      if (!values.account) fail('keys create needs --account NAME');
      const name = values.account;
      const credits = Number(values.credits);
      if (!Number.isInteger(credits) || credits < 0) fail('--credits must be a whole number ≥ 0');
      return withRegistry(values, async (registry) => {
        const created = await registry.ensureAccount(name, credits);
        const { id, key } = await registry.createKey(name, { guest: values.guest, allowIps: values['allow-ip'] ?? [] });
        console.log(`${created ? `created account ${name} with ${credits} credits; ` : ''}key ${id} for account ${name}${values.guest ? ' (guest)' : ''}`);
        console.log(key);
      });
    }
    case KEYS_LIST: {
      const values = argsOf(KEYS_LIST, rest)?.values;
      if (!values) return;
      return withRegistry(values, async (registry) => {
        for (const k of await registry.listKeys()) {
          console.log([k.id, k.account, k.guest ? 'guest' : 'account', k.revoked ? 'revoked' : 'active', k.allowIps.join(',') || '*', k.createdAt].join('\t'));
        }
      });
    }
    case KEYS_REVOKE: {
      const { values, positionals } = argsOf(KEYS_REVOKE, rest) ?? {};
      if (!values || !positionals) return;
      const target = positionals[0];
      if (!target) fail('keys revoke needs a key or key id');
      return withRegistry(values, async (registry) => {
        if (!(await registry.revokeKey(target))) fail(`no active key ${target}`);
        console.log(`revoked ${target}`);
      });
    }
  }
}

async function creditsCommand(args: string[]): Promise<void> {
  if (subcommandOf(CREDITS, args) !== CREDITS_ADD) return;
  const values = argsOf(CREDITS_ADD, args.slice(1))?.values;
  if (!values) return;
  if (!values.account || values.amount === undefined) fail('credits add needs --account NAME --amount N');
  const { account: name, amount } = values;
  await withRegistry(values, async (registry) => {
    await registry.addCredits(name, Number(amount));
    console.log(`added ${amount} credits to ${name}`);
  });
}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  switch (command) {
    case 'serve':
      return serveCommand(args);
    case 'compress':
      // An interrupted run ends as a Ctrl-C does, without waiting for a thread still inside a native call.
      exitProcess(await compressCommand(args), busyThreads(), 'SIGINT');
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
