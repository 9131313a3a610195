import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chownSync, mkdtempSync, openAsBlob, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { firstKeyIn } from '../src/accounts/first-key.ts';
import { EngineFailed, engineUnavailable, startEngine, type Engine } from '../scripts/docker-engine.ts';
import { freePort } from './helpers/daemons.ts';
import { waitForJobStatus, waitUntil } from './helpers/poll.ts';
import { IMAGE, RELEASE_DIR, releaseFiles, sharedRelease } from './helpers/release.ts';
import { ONE_OF_EACH_KIND } from './helpers/samples.ts';

/**
 * The release's Docker image (the project's Dockerfile with the release's x64 executable, saved by
 * `npm run release`) loaded into a fresh engine that has no other image, as at a site without a
 * registry; run read-only as a uid the image does not know with a host directory as its volume,
 * driven through the API, restarted, and checked for what survived.
 */

const CORPUS = fileURLToPath(new URL('../../shared/corpus/', import.meta.url));
const PHONE = join(CORPUS, 'jpg/phone-IMG_20180725_163423.jpg');
const SAMPLES = ONE_OF_EACH_KIND;
const CONTAINER = `compressd-test-${process.pid}`;
/** A uid the image has no user for: the volume is a host directory chowned to it. */
const UID = 10123;

const unavailable = engineUnavailable();
if (unavailable) console.log(`docker test skipped: ${unavailable}`);

let engine: Engine | undefined;
let engineFailure: string | undefined;
let volume: string | undefined;
const started = Date.now();

const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

before(async () => {
  if (unavailable) return;
  try {
    await sharedRelease();
    engine = await startEngine();
  } catch (err) {
    if (!(err instanceof EngineFailed)) throw err;
    engineFailure = err.message;
    console.log(`docker test skipped: ${err.message}`);
  }
});

after(async () => {
  if (engine) {
    await engine.docker(['rm', '-f', CONTAINER]).catch(() => undefined);
    await engine.stop();
  }
  if (volume) rmSync(volume, { recursive: true, force: true });
  if (engine) console.log(`docker test: ${seconds(started)} in all, engine stopped and cleaned up`);
});

describe('Docker image', { skip: unavailable ?? false }, () => {
  test("the release's image archive loads into an empty engine, runs read-only as another uid on jemalloc behind its own init, compresses every kind, keeps jobs over a restart, stops inside Docker's timeout during a long native call", async (t) => {
    if (!engine) return t.skip(engineFailure);
    const docker = engine.docker;

    let since = Date.now();
    assert.equal((await docker(['image', 'ls', '-q'])).trim(), '', 'the engine starts with no image');
    const loaded = await docker(['load', '-i', join(RELEASE_DIR, releaseFiles.image)]);
    assert.ok(loaded.includes(`Loaded image: ${IMAGE}`), loaded);
    const size = Number((await docker(['image', 'inspect', '-f', '{{.Size}}', IMAGE])).trim());
    t.diagnostic(`image loaded in ${seconds(since)}: ${(size / 1e6).toFixed(0)} MB`);
    const version = (await docker(['run', '--rm', '--network=none', IMAGE, '--version'])).trim().split('\n');
    assert.match(version[0]!, /^compressd \S+ \(node v24\.\d+\.\d+\)$/);
    assert.match(version.at(-1)!, /^allocator jemalloc \d+\.\d+\.\d+ \(bundled\)$/);

    volume = mkdtempSync(join(tmpdir(), 'compressd-volume-'));
    chownSync(volume, UID, UID);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    // Host networking (the engine has no bridge): the port comes from COMPRESSD_PORT, which the
    // HEALTHCHECK must follow. A short health interval keeps the image's own check command.
    await docker([
      'run', '-d', '--name', CONTAINER, '--network=host', '--read-only', '--tmpfs', '/tmp:rw,exec,mode=1777',
      '--user', `${UID}:${UID}`, '-v', `${volume}:/data`, '-e', `COMPRESSD_PORT=${port}`, '-e', 'COMPRESSD_HOST=127.0.0.1',
      '--health-interval', '2s', '--health-start-period', '60s', IMAGE,
    ]);
    const healthy = () =>
      waitUntil('the container to be healthy', async () => (await docker(['inspect', '-f', '{{.State.Health.Status}}', CONTAINER])).trim() === 'healthy', { timeoutMs: 120_000, intervalMs: 500, retryErrors: true });
    since = Date.now();
    await healthy();
    t.diagnostic(`healthy in ${seconds(since)}`);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const key = await waitUntil('the first API key in the data dir', () => firstKeyIn(volume!) ?? undefined, { timeoutMs: 10_000, intervalMs: 500, retryErrors: true });
    // The operator contract: the first start prints its key once (docs/security.md: how to keep it out of the log).
    assert.equal((await docker(['logs', CONTAINER])).split(key).length - 1, 1, 'the key is printed once');
    // As PID 1 the executable put its init in front (src/runtime/pid1.ts); the server, the init's child,
    // re-executed itself onto its bundled jemalloc.
    const init = await docker(['exec', CONTAINER, 'cat', '/proc/1/cmdline']);
    assert.match(init.split('\0')[0]!, /^\/tmp\/compressd\/[^/]+\/lib\/compressd-init$/);
    const server = (await docker(['exec', CONTAINER, 'cat', '/proc/1/task/1/children'])).trim();
    assert.match(server, /^\d+$/, 'the init runs one child');
    const maps = await docker(['exec', CONTAINER, 'cat', `/proc/${server}/maps`]);
    assert.match(maps, / \/usr\/local\/bin\/compressd$/m);
    assert.match(maps, / \/tmp\/compressd\/[^/\n]+\/lib\/libjemalloc\.so\.2$/m);
    assert.match(await docker(['logs', CONTAINER]), /"allocator":"jemalloc \d+\.\d+\.\d+ \(bundled\)".*"msg":"compressd listening/);
    const headers = { 'x-service-api-key': key };
    const written = readdirSync(volume);
    assert.ok(written.length > 0, 'the service keeps nothing in its volume');
    for (const name of written) assert.equal(statSync(join(volume, name)).uid, UID, `${name} is owned by the container user`);

    since = Date.now();
    const jobs = new Map<string, { id: string; inputBytes: number }>();
    for (const sample of SAMPLES) {
      const form = new FormData();
      form.set('file', await openAsBlob(join(CORPUS, sample)), basename(sample));
      const res = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
      assert.equal(res.status, 202, `${sample}: ${await res.clone().text()}`);
      jobs.set(sample, { id: ((await res.json()) as { id: string }).id, inputBytes: statSync(join(CORPUS, sample)).size });
    }
    const outputs = new Map<string, string>();
    for (const [sample, { id, inputBytes }] of jobs) {
      const read = async () => (await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as { status: string; metrics: { outputBytes: number } };
      const job = await waitForJobStatus(id, read, ['Succeeded', 'Failed', 'Canceled'], { timeoutMs: 300_000, intervalMs: 500, retryErrors: true });
      assert.equal(job.status, 'Succeeded', `${sample}: ${JSON.stringify(job)}`);
      const body = new Uint8Array(await (await fetch(`${base}/compress/job/${id}/download`, { headers })).arrayBuffer());
      assert.equal(body.length, job.metrics.outputBytes, sample);
      assert.ok(body.length <= inputBytes, `${sample}: output larger than input`);
      outputs.set(id, sha256(body));
    }
    t.diagnostic(`${SAMPLES.length} kinds compressed in ${seconds(since)}`);

    since = Date.now();
    await docker(['restart', '-t', '20', CONTAINER]);
    await healthy();
    t.diagnostic(`restarted and healthy in ${seconds(since)}`);
    for (const [id, digest] of outputs) {
      const job = (await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as { status: string };
      assert.equal(job.status, 'Succeeded', `job ${id} after the restart`);
      const res = await fetch(`${base}/compress/job/${id}/download`, { headers });
      assert.equal(res.status, 200);
      assert.equal(sha256(new Uint8Array(await res.arrayBuffer())), digest, `output of ${id} after the restart`);
    }
    assert.equal((await docker(['inspect', '-f', '{{.RestartCount}} {{.State.Running}}', CONTAINER])).trim(), '0 true');

    // A stop while a job's thread is inside one long native call (oxipng on a 90 MP PNG, about a minute):
    // the server hands the job back after its 7 s and ends by a signal, which it can do because the init,
    // not the server, is PID 1. Without the init the container waited for Docker's timeout and SIGKILL (137).
    const bigDir = mkdtempSync(join(tmpdir(), 'compressd-big-'));
    const big = join(bigDir, 'big.png');
    await sharp(PHONE).resize({ width: 11_000 }).png({ compressionLevel: 1 }).toFile(big);
    const form = new FormData();
    form.set('file', await openAsBlob(big), 'big.png');
    const accepted = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
    rmSync(bigDir, { recursive: true, force: true });
    assert.equal(accepted.status, 202);
    const { id } = (await accepted.json()) as { id: string };
    const jobStatus = async () => ((await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as { status: string }).status;
    await waitUntil('the 90 MP PNG to run', async () => (await jobStatus()) === 'Running', { timeoutMs: 60_000, intervalMs: 100 });
    since = Date.now();
    await docker(['stop', '-t', '30', CONTAINER]);
    const stopMs = Date.now() - since;
    t.diagnostic(`stopped during a long native call in ${seconds(since)}`);
    assert.notEqual((await docker(['inspect', '-f', '{{.State.ExitCode}}', CONTAINER])).trim(), '137', 'Docker did not have to kill it');
    assert.ok(stopMs < 20_000, `the stop took ${stopMs} ms (Docker's timeout was 30 s)`);
    await docker(['start', CONTAINER]);
    await healthy();
    assert.notEqual(await jobStatus(), 'Failed', 'the job was handed back, not failed');
    assert.equal((await fetch(`${base}/compress/job/${id}/cancel`, { method: 'POST', headers })).status, 200);
  });
});
