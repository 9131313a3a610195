// A CI-sized run of `npm run bench soak` (bench/sections/soak.ts): two hundred jobs of the seeded
// mix against a real server with short retentions. It asserts only what cannot be noise (no RSS or
// latency figures): the spool is empty after retention, the journal holds only live records after
// compaction, the server restarts and runs a job, and nothing answered 5xx.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { runSoak } from '../bench/sections/soak.ts';
import { CORPUS } from './helpers/server.ts';

it('soak, CI-sized: spool empty after retention, journals compacted to their live records, restart works', { timeout: 600_000 }, async () => {
  const r = await runSoak({ jobs: 200, minutes: 5, seed: 7, sampleSeconds: 5, retentionSeconds: 3, corpus: CORPUS, root: process.cwd(), workers: 2 });
  assert.ok(r.jobs >= 200, `${r.jobs} jobs accepted`);
  assert.equal(r.fiveXx, 0, `statuses: ${[...r.statuses].map(([s, n]) => `${s}×${n}`).join(' ')}`);
  assert.equal(r.spoolEntriesAtRest, 0, 'every input and output is deleted once its retention is over');
  // Every record was forgotten: a restart's compaction leaves nothing, and at rest the running
  // compaction had already kept the log within its threshold (100 records), whatever the history.
  assert.equal(r.jobsLogAfterRestart, 0);
  assert.ok(r.jobsLogAtRest < 100 * 1024, `jobs.log at rest: ${r.jobsLogAtRest} B`);
  assert.ok(r.restartWorks, 'a job submitted after the restart succeeds');
});
