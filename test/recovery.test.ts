// DESIGN "Data directory": a SIGKILLed server restarted on the same data dir finishes every job, with the balance right.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { openAsBlob } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import sharp from 'sharp';
import { firstKeyIn } from '../src/accounts/first-key.ts';
import { freePort } from './helpers/daemons.ts';
import { waitForJobStatus, waitUntil } from './helpers/poll.ts';
import { CORPUS } from './helpers/server.ts';
import { startTestHttpsServer } from './helpers/tls.ts';

const PHONE = join(CORPUS, 'jpg/phone-IMG_20180725_163423.jpg');
const SMALL = join(CORPUS, 'jpg/jpeg420exif.jpg');
const children: ChildProcess[] = [];
after(() => children.forEach((c) => c.kill('SIGKILL')));

/** Starts `compressd serve` as a real process; resolves once it listens, with the first API key if this start made one. */
function serve(dataDir: string, port: number, env: NodeJS.ProcessEnv = process.env): Promise<{ child: ChildProcess; key: string | null }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--data-dir', dataDir, '--port', String(port), '--host', '127.0.0.1', '--workers', '1'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('listening')) resolve({ child, key: out.includes('created account "default"') ? firstKeyIn(dataDir) : null });
    });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
}

it('recovers queued and running jobs after SIGKILL, charging each exactly once', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'compressd-recovery-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const first = await serve(dataDir, port);
  const key = first.key!;
  const headers = { 'x-service-api-key': key };
  const post = async (path: string) => {
    const form = new FormData();
    form.set('file', await openAsBlob(path), 'photo.jpg');
    const res = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
    assert.equal(res.status, 202);
    return ((await res.json()) as { id: string }).id;
  };
  const status = async (id: string) => (await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as Record<string, any>;

  const done = await post(SMALL);
  await waitForJobStatus(done, () => status(done), ['Succeeded'], { timeoutMs: 120_000 });
  const ids = [await post(PHONE), await post(PHONE), await post(PHONE)];
  await waitForJobStatus(ids[0]!, () => status(ids[0]!), ['Running'], { timeoutMs: 120_000, intervalMs: 20 });
  first.child.kill('SIGKILL');
  await new Promise((r) => first.child.once('exit', r));

  const second = await serve(dataDir, port);
  assert.equal(second.key, null, 'a restart must not create another first key');
  const final = [];
  for (const id of ids) final.push(await waitForJobStatus(id, () => status(id), ['Succeeded', 'Failed', 'Canceled'], { timeoutMs: 60_000 }).catch(() => status(id)));
  assert.deepEqual(final.map((j) => j.status), ['Succeeded', 'Succeeded', 'Succeeded']);
  const download = await fetch(`${base}/compress/job/${done}/download`, { headers });
  assert.equal(download.status, 200, 'a job finished before the crash stays downloadable');
  const me = (await (await fetch(`${base}/compress/entitlements/me`, { headers })).json()) as Record<string, any>;
  assert.deepEqual(me.credits, { granted: 500, spent: 4, reserved: 0, available: 496 });
  second.child.kill('SIGTERM');
  await new Promise((r) => second.child.once('exit', r));
  await rm(dataDir, { recursive: true, force: true });
});

it('a job whose runs end with their process fails with jobs.crashed at the third, releasing its credits and sending job.failed; a graceful stop never counts', { timeout: 600_000 }, async () => {
  const work = await mkdtemp(join(tmpdir(), 'compressd-poison-'));
  const dataDir = join(work, 'data');
  const hooks: Record<string, any>[] = [];
  const receiver = await startTestHttpsServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      hooks.push(JSON.parse(body));
      res.writeHead(200).end();
    });
  });
  const env = { ...process.env, NODE_EXTRA_CA_CERTS: receiver.ca.caPath, COMPRESSD_URL_ALLOW: 'hooks.test', COMPRESSD_DNS_OVERRIDES: 'hooks.test=127.0.0.1' };
  // A real photo enlarged to 90 MP as PNG: about a minute of lossless work on an idle machine, far more
  // than the 10 s a graceful stop gives a running job (the same photo as a 90 MP JPEG was done within
  // them on an idle machine), so each stop lands while it runs.
  const big = join(work, 'big.png');
  await sharp(PHONE).resize({ width: 11_000 }).png({ compressionLevel: 1 }).toFile(big);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let server = await serve(dataDir, port, env);
  const headers = { 'x-service-api-key': server.key! };
  const status = async (id: string) => (await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as Record<string, any>;
  const form = new FormData();
  form.set('file', await openAsBlob(big), 'big.png');
  form.set('webhookUrl', receiver.url('hooks.test', '/hook'));
  form.set('webhookSecret', 'whsec_poison_test_0123456789');
  const accepted = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
  assert.equal(accepted.status, 202);
  const { id } = (await accepted.json()) as { id: string };
  const untilRunning = async () => {
    const job = await waitUntil(`job ${id} to leave Queued`, async () => {
      const j = await status(id);
      return j.status !== 'Queued' && j;
    }, { timeoutMs: 120_000, intervalMs: 20 });
    assert.equal(job.status, 'Running', 'the job runs again after every restart');
  };
  const stop = async (signal: NodeJS.Signals) => {
    const since = Date.now();
    server.child.kill(signal);
    await new Promise((r) => server.child.once('exit', r));
    return Date.now() - since;
  };
  try {
    await untilRunning();
    // The job's thread is inside one long oxipng call when its 7 s are up: the stop hands the job back
    // at once and ends the process without waiting for that call, within Docker's default stop timeout.
    const stopMs = await stop('SIGTERM');
    assert.ok(stopMs < 10_000, `the graceful stop took ${stopMs} ms`);
    for (let crash = 1; crash <= 3; crash++) {
      server = await serve(dataDir, port, env);
      await untilRunning();
      await stop('SIGKILL');
    }
    server = await serve(dataDir, port, env);
    const failed = await status(id);
    assert.equal(failed.status, 'Failed');
    assert.equal(failed.error.code, 'jobs.crashed');
    const me = (await (await fetch(`${base}/compress/entitlements/me`, { headers })).json()) as Record<string, any>;
    assert.deepEqual(me.credits, { granted: 500, spent: 0, reserved: 0, available: 500 }, 'its credits are released');
    await waitUntil('the job.failed webhook', () => hooks.length > 0, { timeoutMs: 10_000, intervalMs: 50 }).catch(() => undefined);
    assert.deepEqual(hooks.map((h) => [h.event, h.jobId, h.error?.code]), [['job.failed', id, 'jobs.crashed']]);
    await stop('SIGTERM');
  } finally {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await receiver.close();
    await rm(work, { recursive: true, force: true });
  }
});
