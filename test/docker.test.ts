import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chownSync, mkdtempSync, openAsBlob, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
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
  test("the release's image archive loads into an empty engine, runs read-only as another uid on jemalloc as PID 1, compresses every kind, keeps jobs over a restart", async (t) => {
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
    // The executable re-executed itself onto its bundled jemalloc and is still the container's PID 1.
    const maps = await docker(['exec', CONTAINER, 'cat', '/proc/1/maps']);
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
  });
});
