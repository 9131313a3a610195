// Start-up with remembered jobs: the server answers before its first retention sweep has run (that
// sweep may have thousands of jobs to expire after a long stop), and from its first answer what it
// says about the remembered jobs is right; the sweep then does what a sweep before listening did.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { AccountRegistry } from '../src/accounts/registry.ts';
import { openFilesBackend } from '../src/jobs/files/index.ts';
import { Lifecycle } from '../src/jobs/lifecycle.ts';
import type { Job } from '../src/jobs/types.ts';
import { webhookNotifier } from '../src/webhooks/notify.ts';
import { ManualClock } from './helpers/clock.ts';
import { waitUntil } from './helpers/poll.ts';
import { startTestServer } from './helpers/server.ts';

const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

const HOUR = 3600_000;

/** Jobs that succeeded `agesMs` ago (output stored), under the server's default retentions. */
async function rememberedJobs(dir: string, agesMs: Record<string, number>): Promise<void> {
  const registry = new AccountRegistry(dir);
  registry.ensureAccount('default');
  registry.close();
  const backend = await openFilesBackend(dir, { granted: () => 1e6, sync: false });
  const clock = new ManualClock(0);
  const lifecycle = new Lifecycle(backend, webhookNotifier({ site: 't', downloadUrl: (id) => `https://c.example.com/${id}` }), {
    nodeId: 'local',
    retentionSeconds: 3600,
    admission: { maxOpenPerAccount: 18 },
    claim: { maxRunningPerAccount: 6, maxRunningPerJobType: {} },
    leaseMs: 30_000,
    clock: clock.now,
  });
  try {
    for (const [id, age] of Object.entries(agesMs).sort((a, b) => b[1] - a[1])) {
      clock.at = Date.now() - age;
      await lifecycle.admit({ id, account: 'default', jobType: 'image.jpg-compress', format: 'jpg', fileName: id, options: {}, inputBytes: 10, creditCost: 1, webhook: null });
      const job = (await lifecycle.start()) as Job;
      const out = join(dir, `${id}.out`);
      await writeFile(out, `output of ${id}`);
      assert.ok(await lifecycle.succeed(job, { path: out, format: 'jpg', contentType: 'image/jpeg' }));
    }
  } finally {
    await backend.close();
  }
}

it('from the first answer after a start, remembered jobs read right; the first sweep, run after it, expires and forgets what is due', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'compressd-startup-'));
  dirs.push(dir);
  // Default retentions: outputs 1 h, records 24 h more.
  await rememberedJobs(dir, { fresh: 10 * 60_000, overdue: 2 * HOUR, 'overdue-untouched': 2 * HOUR, forgotten: 26 * HOUR });
  const server = await startTestServer({ dataDir: dir, workers: '1' });
  try {
    const fresh = await server.api('/compress/job/fresh/download');
    assert.equal(fresh.status, 200);
    assert.equal(await fresh.text(), 'output of fresh');
    const overdue = await server.api('/compress/job/overdue/download');
    assert.equal(overdue.status, 410);
    assert.equal(((await overdue.json()) as { error: string }).error, 'jobs.expired');
    const status = (await (await server.api('/compress/job/overdue')).json()) as { status: string; expired: boolean };
    assert.deepEqual([status.status, status.expired], ['Succeeded', true]);
    const freshStatus = (await (await server.api('/compress/job/fresh')).json()) as { status: string; expired: boolean };
    assert.deepEqual([freshStatus.status, freshStatus.expired], ['Succeeded', false]);

    await waitUntil('the first sweep forgets the job past its record retention', async () => (await server.api('/compress/job/forgotten')).status === 404);
    await waitUntil('the first sweep expires the overdue job nobody asked for', async () => ((await (await server.api('/compress/job/overdue-untouched')).json()) as { expired: boolean }).expired);
    await waitUntil('only the output within its retention is left', async () => (await readdir(join(dir, 'spool'))).join() === 'fresh');
  } finally {
    await server.stop();
  }
});
