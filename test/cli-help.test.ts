// The command line's help (issue 29, finding 10): every setting and every environment variable the
// source reads is listed, and no line of any help is wider than 80 columns.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ENVIRONMENT_ONLY, SETTINGS } from '../src/config.ts';
import NODE_OPTIONS from '../src/runtime/node-options.json' with { type: 'json' };
import { systemJemalloc } from '../src/runtime/source-start.ts';
import { freePort } from './helpers/daemons.ts';
import { waitUntil } from './helpers/poll.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

async function help(...args: string[]): Promise<string> {
  const { code, stdout, stderr } = await cli(args);
  assert.equal(code, 0, stderr);
  return stdout;
}

/** Every environment variable named in the server's source. */
function variablesInSource(): Set<string> {
  const names = new Set<string>();
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) visit(path);
      else if (entry.name.endsWith('.ts')) for (const [name] of readFileSync(path, 'utf8').matchAll(/\b(?:COMPRESSD|AWS)_[A-Z0-9_]+\b|\bNODE_EXTRA_CA_CERTS\b/g)) names.add(name);
    }
  };
  visit(join(ROOT, 'src'));
  return names;
}

describe('serve --help', () => {
  test('lists every setting of the config table as its flag and environment twin, and every variable with no flag', async () => {
    const text = await help('serve', '--help');
    for (const s of SETTINGS) assert.match(text, new RegExp(`^  --${s.flag}(?: \\S+)? +${s.env}$`, 'm'), `--${s.flag} with ${s.env}`);
    for (const v of ENVIRONMENT_ONLY) for (const name of v.names) assert.match(text, new RegExp(`^  ${name}$`, 'm'), name);
    for (const name of ['COMPRESSD_LOG_LEVEL', 'COMPRESSD_CACHE_DIR', 'COMPRESSD_S3_FORCE_PATH_STYLE', 'NODE_EXTRA_CA_CERTS']) assert.ok(text.includes(name), name);
    assert.match(text, /^ {2}--trust-proxy HOPS\|CIDR,… +COMPRESSD_TRUST_PROXY$/m);
  });

  test('every environment variable the source reads is in the help', async () => {
    const text = await help('serve', '--help');
    const source = variablesInSource();
    assert.ok(source.has('COMPRESSD_LOG_LEVEL') && source.has('AWS_REGION'), 'the scan finds the variables');
    for (const name of source) assert.ok(text.includes(name), `${name} is read by src/ but missing from serve --help`);
  });
});

type Ran = { code: number; stdout: string; stderr: string };
const answers = new Map<string, Promise<Ran>>();

/**
 * Runs the CLI from source, in the checkout; resolves with its exit code and output whatever the
 * code. Each run is a Node start from source (over a second), and they only read: `prefetch` starts
 * them ahead, two at a time, and the same arguments share one run.
 */
function cli(args: string[]): Promise<Ran> {
  const key = JSON.stringify(args);
  if (!answers.has(key)) answers.set(key, exec(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args]));
  return answers.get(key)!;
}

function prefetch(argLists: string[][]): void {
  const queue = argLists.filter((args) => !answers.has(JSON.stringify(args)));
  const lane = async (): Promise<void> => {
    for (let args = queue.shift(); args; args = queue.shift()) await cli(args);
  };
  void Promise.all([lane(), lane()]);
}

async function exec(file: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(file, args, { cwd: options.cwd ?? ROOT, env: options.env ?? process.env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Every command with its options; a data dir or database URL option shows its environment twin. */
const COMMANDS: [string[], string[]][] = [
  [['serve'], ['--port', '--data-dir', '--config']],
  [['compress'], ['--out', '--options', '--jobs', '--in-place']],
  [['keys', 'create'], ['--account', '--credits', '--allow-ip', '--guest', '--data-dir', '--database-url']],
  [['keys', 'list'], ['--data-dir', '--database-url']],
  [['keys', 'revoke'], ['--data-dir', '--database-url']],
  [['credits', 'add'], ['--account', '--amount', '--data-dir', '--database-url']],
  [['migrate'], ['--database-url', '--check']],
  [['backup'], ['--data-dir', '--out']],
  [['restore'], ['--data-dir']],
];
const TWINS: Record<string, string> = { '--data-dir': 'COMPRESSD_DATA_DIR', '--database-url': 'COMPRESSD_DATABASE_URL', '--port': 'COMPRESSD_PORT' };
const GROUP_HELP = ['keys', 'credits'].flatMap((group) => [[group, '--help'], [group, '-h'], [group, 'help']]);
const USAGE_ERRORS = [
  [['keys'], /^compressd keys: which command\?$/m],
  [['keys', 'rotate'], /^compressd keys: unknown command rotate$/m],
  [['credits', 'remove'], /^compressd credits: unknown command remove$/m],
  [['keys', 'list', '--colour'], /^compressd keys list: Unknown option '--colour'/m],
  [['backup', '--data'], /^compressd backup: Unknown option '--data'/m],
] as const;
const TERMINAL = [['--help'], ...COMMANDS.map(([c]) => [...c, '--help']), ['keys', '--help'], ['credits', '--help']];
prefetch([['serve', '--help'], ...COMMANDS.flatMap(([c]) => [[...c, '--help'], [...c, '-h']]), ...GROUP_HELP, ...USAGE_ERRORS.map(([a]) => [...a]), ...TERMINAL]);

describe('every command has a help', () => {
  for (const [command, options] of COMMANDS) {
    for (const flag of ['--help', '-h']) {
      test(`compressd ${command.join(' ')} ${flag}: exit 0, its usage, each option with its default and environment twin`, async () => {
        const { code, stdout, stderr } = await cli([...command, flag]);
        assert.equal(code, 0, stderr);
        assert.match(stdout, new RegExp(`^Usage: compressd ${command.join(' ')}\\b`));
        for (const option of options) {
          const twin = command[0] === 'restore' ? undefined : TWINS[option];
          assert.match(stdout, new RegExp(`^  ${option}\\b.*${twin ? ` +${twin}$` : ''}`, 'm'), `${option} ${twin ?? ''}`);
        }
        if (command[0] !== 'serve') assert.match(stdout, /^ {2}-h, --help$/m);
        if (options.includes('--data-dir') && command[0] !== 'restore') assert.match(stdout, /\(default: \.\/data\)/);
      });
    }
  }

  for (const args of GROUP_HELP) {
    test(`compressd ${args.join(' ')} lists its commands and exits 0`, async () => {
      const { code, stdout } = await cli(args);
      assert.equal(code, 0);
      for (const [command] of COMMANDS.filter(([c]) => c[0] === args[0])) assert.match(stdout, new RegExp(`^  compressd ${command.join(' ')}\\b`, 'm'));
    });
  }

  for (const [args, message] of USAGE_ERRORS) {
    test(`compressd ${args.join(' ')}: a usage error exits 2 with the help on stderr`, async () => {
      const { code, stdout, stderr } = await cli([...args]);
      assert.equal(code, 2);
      assert.equal(stdout, '');
      assert.match(stderr, message);
      assert.match(stderr, /^Usage: compressd /m);
    });
  }

  test('an option read from its environment twin: keys list takes COMPRESSD_DATA_DIR', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-help-'));
    try {
      assert.equal((await cli(['keys', 'create', '--account', 'twin', '--data-dir', dir])).code, 0);
      const { code, stdout } = await exec(process.execPath, [join(ROOT, 'bin/compressd.mjs'), 'keys', 'list'], { cwd: tmpdir(), env: { ...process.env, COMPRESSD_DATA_DIR: dir } });
      assert.equal(code, 0);
      assert.match(stdout, /\ttwin\taccount\tactive\t/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('help fits a terminal', () => {
  for (const args of TERMINAL) {
    test(`compressd ${args.join(' ')}: no line reaches 80 columns`, async () => {
      const text = await help(...args);
      assert.ok(text.length > 200, 'the help is printed on stdout');
      for (const line of text.split('\n')) assert.ok([...line].length < 80, `${[...line].length} columns: ${line}`);
    });
  }
});

/** npm and npx as an operator runs them from the checkout, never reaching the registry. */
const npmEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ ...process.env, npm_config_offline: 'true', npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false', ...extra });

const listening = (port: number) =>
  new Promise<boolean>((done) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });

/** Whether any process of the group `pgid` is still alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('from a source checkout (README and docs/operating.md)', () => {
  test('npm start -- COMMAND runs that command: --version, keys create, keys list', async () => {
    const version = await exec('npm', ['start', '--', '--version'], { env: npmEnv() });
    assert.equal(version.code, 0, version.stderr);
    assert.match(version.stdout, /^compressd \d+\.\d+\.\d+ \(node v/m);
    const dir = await mkdtemp(join(tmpdir(), 'compressd-start-'));
    try {
      const created = await exec('npm', ['start', '--', 'keys', 'create', '--account', 'ops', '--data-dir', dir], { env: npmEnv() });
      assert.equal(created.code, 0, created.stderr);
      const listed = await exec('npm', ['start', '--', 'keys', 'list'], { env: npmEnv({ COMPRESSD_DATA_DIR: dir }) });
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /\tops\taccount\tactive\t/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('npx . COMMAND runs the checkout\'s compressd: compress a folder as the README shows', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-npx-'));
    try {
      await mkdir(join(dir, 'photos'));
      await copyFile(join(ROOT, '../shared/corpus/png/density_plot.png'), join(dir, 'photos/plot.png'));
      const r = await exec('npx', ['.', 'compress', join(dir, 'photos/'), '--out', join(dir, 'compressed/')], { env: npmEnv() });
      assert.equal(r.code, 0, r.stderr + r.stdout);
      assert.match(r.stdout, /^ok +.*plot\.png/m);
      assert.ok((await stat(join(dir, 'compressed/plot.png'))).size > 0);
      assert.match((await exec('npx', ['.', '--version'], { env: npmEnv() })).stdout, /^compressd /);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('npm link puts a compressd command on the PATH', async () => {
    const prefix = await mkdtemp(join(tmpdir(), 'compressd-link-'));
    try {
      const linked = await exec('npm', ['link'], { env: npmEnv({ npm_config_prefix: prefix }) });
      assert.equal(linked.code, 0, linked.stderr);
      const r = await exec(join(prefix, 'bin/compressd'), ['keys', '--help'], { cwd: tmpdir() });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^ {2}compressd keys create /m);
    } finally {
      await rm(prefix, { recursive: true, force: true });
    }
  });

  // npx keeps a shell that does not pass signals on (docs/operating.md): there the server's own pid,
  // unchanged by its re-execution, gets the signal.
  for (const [name, command, args, signalled] of [
    ['npm start', 'npm', ['start', '--', '--workers', '1'], 'npm'],
    ['npx tsx src/main.ts serve', 'npx', ['tsx', 'src/main.ts', 'serve', '--workers', '1'], 'server'],
  ] as const) {
    test(`${name} serves on jemalloc with the executable's Node options; SIGTERM to ${signalled} stops the server: the port closes and no process is left`, { timeout: 60_000 }, async (t) => {
      if (!systemJemalloc()) return t.skip("no libjemalloc.so.2 here: scripts/setup.mjs installs Debian's libjemalloc2");
      await serveFromSource(command, [...args], signalled);
    });
  }
});

/** The pid of the server: of the processes of group `pgid` whose command line holds `needle` (tsx's CLI and its child), the one that started no other. */
function serverOf(pgid: number, needle: string): number | undefined {
  const found = new Map<number, number>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const [ppid, pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(1, 3).map(Number);
      if (pgrp === pgid && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle)) found.set(Number(pid), ppid!);
    } catch {
      // The process ended meanwhile.
    }
  }
  const parents = new Set(found.values());
  return [...found.keys()].find((pid) => !parents.has(pid));
}

/**
 * Starts `command` (npm or npx) serving from the checkout, checks that the server process runs on
 * jemalloc (mapped) with the executable's Node options, then sends SIGTERM to `command` (or the server) and waits
 * for the whole group to end after a graceful shutdown.
 */
async function serveFromSource(command: string, args: string[], signalled: 'npm' | 'server'): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'compressd-sigterm-'));
  const port = await freePort();
  // Its own process group: whatever it starts can be looked for after it has gone.
  const child = spawn(command, args, { cwd: ROOT, detached: true, env: npmEnv({ COMPRESSD_PORT: String(port), COMPRESSD_HOST: '127.0.0.1', COMPRESSD_DATA_DIR: dir }) });
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += b));
  child.stderr.on('data', (b: Buffer) => (output += b));
  try {
    // The port is bound before the first key is made and shown: the start has ended at its "listening" line.
    await waitUntil(() => `listening on ${port}:\n${output}`, async () => /compressd listening on /.test(output) && (await listening(port)), { timeoutMs: 30_000, intervalMs: 200 });
    assert.match(output, /^API key: cpd_/m, 'the first start prints its key once (the operator contract)');
    assert.match(output, /"workers":1,/);
    assert.doesNotMatch(output, /format upgraded/, 'a new data dir is not an upgrade');
    const server = serverOf(child.pid!, `${args.includes('src/main.ts') ? 'src/main.ts' : 'scripts/start.mjs'}\0serve`);
    assert.ok(server, 'the server process is found');
    assert.match(readFileSync(`/proc/${server}/maps`, 'utf8'), /\/libjemalloc\.so\.2$/m, 'jemalloc is mapped');
    const argv = readFileSync(`/proc/${server}/cmdline`, 'utf8').split('\0');
    for (const option of NODE_OPTIONS) assert.ok(argv.includes(option), `${option} in ${argv.join(' ')}`);
    assert.match(readFileSync(`/proc/${server}/environ`, 'utf8'), /(^|\0)MALLOC_CONF=background_thread:true,narenas:1,oversize_threshold:0(\0|$)/);
    assert.match(readFileSync(`/proc/${server}/maps`, 'utf8'), /\/dist\/arena-tune\/[^/]+\/libcompressd-arena\.so$/m, 'the arena library scripts/setup.mjs built is preloaded after jemalloc');
    assert.match(output, /"allocator":"jemalloc \(/);
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    if (signalled === 'npm') child.kill('SIGTERM');
    else process.kill(server, 'SIGTERM');
    const stopping = Date.now();
    assert.equal(await exited, 0, output);
    await waitUntil(() => `nothing listening on ${port} 5 s after SIGTERM:\n${output}`, async () => !(await listening(port)), { timeoutMs: 5_000 - (Date.now() - stopping) });
    await waitUntil(`every process of ${command} to end`, () => !groupAlive(child.pid!), { timeoutMs: 5_000 - (Date.now() - stopping) });
    assert.match(output, /"signal":"SIGTERM".*shutting down/);
  } finally {
    if (groupAlive(child.pid!)) process.kill(-child.pid!, 'SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
}
