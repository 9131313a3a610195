// A data dir as a files-mode server leaves it after a busy day: `count` jobs admitted, run and ended
// over the last `hours` by the service's own Lifecycle, job store, ledger and outbox (with their
// online compaction), on an injected clock, so that at the end every job is still remembered (its
// record within `--record-retention-seconds`), the outputs older than the retention expired by the
// sweep, the newer ones on disk. The mix: 20 accounts, 85 % Succeeded, 10 % Failed, 5 % Canceled,
// 30 % with a webhook (delivered), 20 % with an idempotency key.
import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AccountRegistry } from '../src/accounts/registry.ts';
import { migrateDataDir } from '../src/durable/data-format.ts';
import type { Runner } from '../src/jobs/backend.ts';
import { JobEngine } from '../src/jobs/engine.ts';
import { openFilesBackend } from '../src/jobs/files/index.ts';
import { Lifecycle } from '../src/jobs/lifecycle.ts';
import { LocalSpool } from '../src/jobs/spool.ts';
import type { Job } from '../src/jobs/types.ts';
import { DownloadTokens, presignedDownloadUrl } from '../src/webhooks/download-token.ts';
import { webhookNotifier } from '../src/webhooks/notify.ts';

const ACCOUNTS = 20;
const RETENTION_SECONDS = 3600; // the server's default
const SWEEP_EVERY_MS = 60_000;

export interface RememberedDir {
  jobs: number;
  accounts: number;
  seconds: number;
}

/** Fills `dataDir` (new or empty); jobs end `hours` ago up to now. */
export async function writeRememberedJobs(dataDir: string, count: number, hours = 22): Promise<RememberedDir> {
  const started = performance.now();
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await migrateDataDir(dataDir);
  const registry = new AccountRegistry(dataDir);
  const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `acct-${i}`);
  for (const a of accounts) {
    registry.ensureAccount(a, 100_000_000);
    registry.createKey(a);
  }
  const tokens = await DownloadTokens.open(dataDir);
  const backend = await openFilesBackend(dataDir, { granted: (a) => registry.granted(a), sync: false });
  const step = (hours * 3600 * 1000) / count;
  const base = Date.now() - hours * 3600 * 1000;
  let now = base;
  const lifecycle = new Lifecycle(
    backend,
    webhookNotifier({ site: 'compressd', downloadUrl: (id, expiresAt) => presignedDownloadUrl('https://compress.example.org', id, tokens.create(id, expiresAt)) }),
    {
      nodeId: 'local',
      retentionSeconds: RETENTION_SECONDS,
      admission: { maxOpenPerAccount: 18 },
      claim: { maxRunningPerAccount: 6, maxRunningPerJobType: {} },
      leaseMs: 30_000,
      clock: () => new Date(now),
    },
  );
  const idle: Runner = { slots: 0, run: () => Promise.reject(new Error('not used')) };
  const engine = new JobEngine({ lifecycle, backend, runner: idle, spool: new LocalSpool(backend.blobs.root) }, {
    retentionSeconds: RETENTION_SECONDS,
    recordRetentionSeconds: 86_400,
    jobTimeoutSeconds: 600,
  });
  const scratch = join(dataDir, 'bench-scratch');
  await mkdir(scratch, { recursive: true });
  let nextSweep = now + SWEEP_EVERY_MS;
  const finish = async (job: Job, r: number) => {
    if (((r >>> 8) % 20) <= 2) return lifecycle.fail(job, { code: 'image.format_mismatch', detail: 'The file is not a JPEG image (it is a PNG image).' });
    const out = join(scratch, job.id);
    await writeFile(out, 'x');
    return lifecycle.succeed(job, { path: out, format: 'jpg', contentType: 'image/jpeg', width: 4032, height: 3024 });
  };
  try {
    // A round: one job per account, admitted, started and ended together (the journals batch their appends).
    for (let first = 0; first < count; first += ACCOUNTS) {
      const round = Array.from({ length: Math.min(ACCOUNTS, count - first) }, (_, k) => first + k);
      now = base + first * step;
      const mix = new Map<string, number>();
      await Promise.all(
        round.map((i) => {
          const r = (i * 2654435761) >>> 0; // a fixed spread of the mix
          const id = randomUUID();
          mix.set(id, r);
          const account = accounts[i % ACCOUNTS]!;
          const webhook = r % 10 < 3 ? { url: `https://hooks.example.net/compressd/${account}`, secret: 'whsec_bench_0123456789abcdef', events: ['succeeded' as const, 'failed' as const] } : null;
          const idem = (r >>> 4) % 5 === 0 ? { key: `order-${i}`, fingerprint: (r * 31).toString(16).padStart(64, '0') } : undefined;
          const options = { compression: { enabled: true, mode: 'lossy' as const } };
          return lifecycle.admit({ id, account, jobType: 'image.jpg-compress', format: 'jpg', fileName: `IMG_${20000 + i}`, options, inputBytes: 200_000 + (r % 3_000_000), creditCost: 1, webhook }, idem);
        }),
      );
      await Promise.all([...mix].filter(([, r]) => (r >>> 8) % 20 === 0).map(([id]) => lifecycle.cancel(id)));
      now += step / 10;
      const started: Job[] = [];
      for (let job = await lifecycle.start(); job; job = await lifecycle.start()) started.push(job);
      now += (step * ACCOUNTS) / 2;
      await Promise.all(started.map((job) => finish(job, mix.get(job.id)!)));
      // The receivers took every webhook at the first attempt.
      const claim = { now: new Date(Math.max(now, Date.now())), limit: 100, ttlMs: 60_000, retryDelaysMs: [0] };
      await Promise.all((await backend.outbox.claimDue('local', claim)).map((d) => backend.outbox.settle(d.eventId, d.attempt, { outcome: 'delivered', status: 200, error: null }, null)));
      if (now >= nextSweep) {
        nextSweep = now + SWEEP_EVERY_MS;
        await engine.sweep();
      }
    }
    await engine.sweep();
  } finally {
    await engine.stop();
    await backend.close();
    registry.close();
  }
  await rm(scratch, { recursive: true, force: true });
  return { jobs: count, accounts: ACCOUNTS, seconds: (performance.now() - started) / 1000 };
}
