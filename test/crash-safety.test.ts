// docs/operating.md "Crash safety": an error that escapes every handler is logged with its request id and
// stack; the server stops accepting, drains within the grace period and exits 1 for its
// supervisor; the job journal's recovery finishes the work on the next start.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { openAsBlob } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import { firstKeyIn } from '../src/accounts/first-key.ts';
import { fatalErrorHandler, inRequestScope } from '../src/ops/fatal.ts';
import { freePort } from './helpers/daemons.ts';
import { waitForJobStatus } from './helpers/poll.ts';
import { CORPUS, startTestServer } from './helpers/server.ts';

const PHONE = join(CORPUS, 'jpg/phone-IMG_20180725_163423.jpg');
const children: ChildProcess[] = [];
after(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

function memoryLogger() {
  const lines: Record<string, any>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

describe('the fatal error handler', () => {
  it('logs the request id and stack, stops accepting, drains, then exits 1 once', async () => {
    const s = await startTestServer({ workers: '1' });
    const { log, lines } = memoryLogger();
    let closes = 0;
    const exited = new Promise<number>((resolve) => {
      const handler = fatalErrorHandler({
        log,
        graceMs: 2_000,
        close: async (graceMs) => {
          closes++;
          await s.service.close(graceMs);
        },
        exit: resolve,
      });
      void inRequestScope('req-fatal-1', async () => {
        await new Promise((r) => setTimeout(r, 1));
        handler(new Error('boom from a stream callback'), 'uncaughtException');
        handler(new Error('a second one while draining'), 'uncaughtException');
      });
    });
    assert.equal(await exited, 1);
    assert.equal(closes, 1, 'a second fatal error must not start another shutdown');
    const fatal = lines.filter((l) => l.level === 60);
    assert.equal(fatal.length, 2);
    assert.equal(fatal[0]!.requestId, 'req-fatal-1');
    assert.deepEqual(fatal[0]!.requestsInFlight, ['req-fatal-1']);
    assert.match(fatal[0]!.err.stack, /boom from a stream callback\n\s+at /);
    assert.equal(fatal[0]!.origin, 'uncaughtException');
    await assert.rejects(fetch(`${s.url}/healthz`), 'the server still accepts connections after a fatal error');
    await s.stop();
  });

  it('turns a thrown non-Error into an Error with a stack', async () => {
    const { log, lines } = memoryLogger();
    await new Promise<number>((resolve) => fatalErrorHandler({ log, graceMs: 10, close: async () => {}, exit: resolve })('plain string', 'unhandledRejection'));
    assert.equal(lines[0]!.requestId, null);
    assert.match(lines[0]!.err.message, /plain string/);
    assert.ok(lines[0]!.err.stack);
  });
});

function serve(dataDir: string, port: number, preload: string[] = []) {
  const child = spawn(process.execPath, ['--import', 'tsx', ...preload, 'src/main.ts', 'serve', '--data-dir', dataDir, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const listening = new Promise<string | null>((resolve, reject) => {
    // The first API key if this start made one.
    const check = () => out.includes('listening') && resolve(out.includes('created account "default"') ? firstKeyIn(dataDir) : null);
    child.stdout!.on('data', check);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, listening, exited, output: () => out };
}

it('a real uncaught exception in a running server: logged, drained, exit 1, and a restart finishes every job', { timeout: 180_000 }, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'compressd-crash-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const first = serve(dataDir, port, ['--import', './test/fixtures/fault-on-sigusr2.mjs']);
  const key = (await first.listening)!;
  const headers = { 'x-service-api-key': key };
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const form = new FormData();
    form.set('file', await openAsBlob(PHONE), 'photo.jpg');
    const res = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
    assert.equal(res.status, 202);
    ids.push(((await res.json()) as { id: string }).id);
  }
  first.child.kill('SIGUSR2');
  assert.equal(await first.exited, 1, 'the process must exit non-zero so its supervisor restarts it');
  const fatal = first
    .output()
    .split('\n')
    .filter((l) => l.includes('"level":60'))
    .map((l) => JSON.parse(l));
  assert.equal(fatal.length, 1);
  assert.match(fatal[0].err.stack, /injected fault for the crash-handling test/);
  assert.equal(fatal[0].origin, 'uncaughtException');

  const second = serve(dataDir, port);
  assert.equal(await second.listening, null);
  for (const id of ids) {
    const read = async () => (await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as Record<string, any>;
    const job = await waitForJobStatus(id, read, ['Succeeded', 'Failed', 'Canceled'], { timeoutMs: 90_000 });
    assert.equal(job.status, 'Succeeded');
  }
  const me = (await (await fetch(`${base}/compress/entitlements/me`, { headers })).json()) as Record<string, any>;
  assert.equal(me.credits.reserved, 0);
  assert.equal(me.credits.spent, 3);
  second.child.kill('SIGTERM');
  assert.equal(await second.exited, 0);
  await rm(dataDir, { recursive: true, force: true });
});
