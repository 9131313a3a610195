// The retention sweep with an injected clock (in process, the files backend, no worker threads):
// expiry keeps up with a busy server, and a sweep's work is what it expires, not what is held.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import type { Runner } from '../src/jobs/backend.ts';
import { JobEngine } from '../src/jobs/engine.ts';
import { openFilesBackend } from '../src/jobs/files/index.ts';
import { Lifecycle } from '../src/jobs/lifecycle.ts';
import { LocalSpool } from '../src/jobs/spool.ts';
import { queuedJob, type Job } from '../src/jobs/types.ts';
import { webhookNotifier } from '../src/webhooks/notify.ts';
import { ManualClock } from './helpers/clock.ts';

const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

const RATE = 50; // jobs ended per simulated second
const RETENTION = 60;
const RECORD_RETENTION = 120;
const SWEEP_EVERY = 60;
const SECONDS = 600;

it(`expiry keeps up at ${RATE} jobs/s: after every sweep nothing is past its retention, and what is held stays flat`, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'compressd-retention-'));
  dirs.push(dir);
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const backend = await openFilesBackend(dir, { granted: () => 1e9, sync: false });
  const settings = { retentionSeconds: RETENTION, recordRetentionSeconds: RECORD_RETENTION, jobTimeoutSeconds: 60 };
  const lifecycle = new Lifecycle(backend, webhookNotifier({ site: 't', downloadUrl: (id) => `https://c.example.com/${id}` }), {
    nodeId: 'local',
    retentionSeconds: RETENTION,
    admission: { maxOpenPerAccount: 18 },
    claim: { maxRunningPerAccount: 6, maxRunningPerJobType: {} },
    leaseMs: 30_000,
    clock: clock.now,
  });
  const idle: Runner = { slots: 0, run: () => Promise.reject(new Error('not used')) };
  const engine = new JobEngine({ lifecycle, backend, runner: idle, spool: new LocalSpool(backend.blobs.root) }, settings);
  const held: number[] = [];
  try {
    let seq = 0;
    for (let second = 1; second <= SECONDS; second++) {
      clock.advance(1000);
      for (let i = 0; i < RATE; i++) {
        const job = queuedJob(
          { id: `job-${++seq}`, account: `acct-${seq % 3}`, jobType: 'image.jpg-compress', format: 'jpg', fileName: 'a.jpg', options: {}, inputBytes: 10, creditCost: 1, webhook: null },
          clock.now(),
        );
        assert.ok((await backend.jobs.admit(job, { maxOpenPerAccount: 18 })).ok);
        const at = clock.now();
        const claimed = (await backend.jobs.claim('local', { maxRunningPerAccount: 6, maxRunningPerJobType: {} }, at, 30_000)) as Job;
        const ending = { status: 'Succeeded' as const, completedAt: at.toISOString(), expiresAt: new Date(clock.at + RETENTION * 1000).toISOString(), output: { format: 'jpg', contentType: 'image/jpeg', bytes: 5 }, progress: { percent: 100, phase: 'done' as const } };
        assert.ok((await backend.jobs.move(claimed.id, { move: 'succeed', nodeId: 'local', attempt: claimed.attempts, ending, owed: null })).ok);
      }
      if (second % SWEEP_EVERY !== 0) continue;
      await engine.sweep();
      const all = backend.jobs.all();
      held.push(all.length);
      const late = all.filter((j) => !j.expired && Date.parse(j.completedAt!) < clock.at - RETENTION * 1000);
      assert.equal(late.length, 0, `at ${second} s, ${late.length} outputs are past their retention`);
      const stale = all.filter((j) => Date.parse(j.completedAt!) < clock.at - (RETENTION + RECORD_RETENTION) * 1000);
      assert.equal(stale.length, 0, `at ${second} s, ${stale.length} records are past their retention`);
    }
    // Held records plateau at what the two retentions hold: no growth once they have filled.
    const plateau = held.slice(Math.ceil((RETENTION + RECORD_RETENTION) / SWEEP_EVERY));
    // (Jobs that ended exactly at the cutoff are kept: one second more.)
    assert.ok(Math.max(...plateau) <= RATE * (RETENTION + RECORD_RETENTION + 1), `held after each sweep: ${held.join(', ')}`);
    assert.ok(Math.max(...plateau) - Math.min(...plateau) <= RATE, `held after each sweep: ${held.join(', ')}`);
  } finally {
    await engine.stop();
    await backend.close();
  }
});
