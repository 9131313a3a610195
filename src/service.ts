import type { ServerType } from '@hono/node-server';
import type { Server } from 'node:http';
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.ts';
import { saveFirstKey } from './accounts/first-key.ts';
import { defaultPlan } from './accounts/plan.ts';
import type { ServeConfig } from './config.ts';
import { migrateDataDir } from './durable/data-format.ts';
import { acquireServerLock } from './durable/lock.ts';
import { FETCH_DEFAULTS, parseDnsOverrides, parseUrlAllow, type FetchConfig } from './fetch/config.ts';
import { guardedDispatcher } from './fetch/egress.ts';
import { UrlFetcher } from './fetch/fetch-input.ts';
import { COMPRESSORS } from './catalog/index.ts';
import { JobEngine } from './jobs/engine.ts';
import { Lifecycle } from './jobs/lifecycle.ts';
import { MemoryBudget } from './jobs/memory-budget.ts';
import { CompressorPool } from './jobs/pool.ts';
import { DiskGuard, insufficientStorage } from './ops/disk.ts';
import { withIoPath } from './ops/io-counts.ts';
import { ServiceMetrics } from './ops/metrics.ts';
import { StartupPhases } from './ops/startup-phases.ts';
import { createApp, type AppServices } from './server/app.ts';
import { openNodeBackend, type NodeBackend } from './node-backend.ts';
import { createHttpServer } from './server/http-server.ts';
import { presignedDownloadUrl } from './webhooks/download-token.ts';
import { webhookNotifier } from './webhooks/notify.ts';
import { WebhookOutbox } from './webhooks/outbox.ts';

export interface RunningService {
  server: ServerType;
  port: number;
  /** The API key of the `default` account when this start created it (first start). */
  firstKey: string | null;
  /** Where the start's time went: milliseconds per phase (see StartupPhases). */
  startupMs: Record<string, number>;
  /** The HTTP routes served (method and path pattern). */
  routes(): { method: string; path: string }[];
  close(graceMs?: number): Promise<void>;
}

export interface ServiceOptions {
  config: ServeConfig;
  log: Logger;
  /** URL-fetch settings over those the configuration gives (tests: a CA to trust). */
  fetch?: Partial<FetchConfig>;
  /** Shows where the first start's key was saved (`path`, see FIRST_KEY_FILE); called before any request is answered. */
  announceFirstKey?: (key: string, path: string) => void;
  /** What leases, retention, webhook retries, rate windows and the key cache read (tests move it). */
  clock?: Clock;
}

/**
 * The composition root: builds every component from its part of the configuration,
 * recovers the data dir's state, and starts listening.
 */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { config, log, clock = systemClock } = options;
  const phases = new StartupPhases();
  phases.mark('runtime and modules');
  const releaseLock = await openDataDir(config, log);
  phases.mark('data format');
  // Made first: it counts the backend's database queries and storage requests from the start.
  const metrics = new ServiceMetrics({ counts: () => jobs.engine.counts(), poolUtilization: () => jobs.pool.utilization });
  const node = await openNodeBackend(config, log, { clock, phases, io: metrics });
  phases.mark('backend');
  const jobs = jobMachinery(config, node, clock, log);
  const fetchConfig: FetchConfig = { ...FETCH_DEFAULTS, urlAllow: parseUrlAllow(config.urlAllow), dnsOverrides: parseDnsOverrides(config.dnsOverrides), ...options.fetch };
  const outbox = new WebhookOutbox({
    store: node.backend.outbox,
    nodeId: node.nodeId,
    retryDelaysSec: config.webhookRetryDelays,
    site: config.site,
    dispatcher: guardedDispatcher(fetchConfig),
    log: (entry) => log.info(entry, 'webhook'),
    clock,
  });
  reportJobs({ lifecycle: jobs.lifecycle, outbox, metrics, log });
  await jobs.engine.start();
  await outbox.start();
  phases.mark('recovery');

  let closed = false;
  const app = createApp({
    ...appParts(node, jobs),
    fetcher: countedFetcher(new UrlFetcher(fetchConfig), metrics),
    rateLimitPerMinute: config.rateLimitPerMinute,
    clock,
    trustProxy: config.trustProxy,
    log,
    dataDir: config.dataDir,
    disk: new DiskGuard(config.dataDir, config.minFreeDiskBytes, config.accountDiskShare),
    metrics,
    metricsToken: config.metricsToken,
    poolReady: () => !closed,
  });
  const { server, port, open } = await listen(app, config);
  // Only now, with the port bound, can nothing stop the start any more: the first key is made and shown.
  phases.mark('listen');
  const firstKey = await node.firstStart();
  if (firstKey) options.announceFirstKey?.(firstKey, await saveFirstKey(config.dataDir, firstKey));
  open();
  phases.mark('first key');

  return {
    server,
    port,
    firstKey,
    startupMs: phases.ms,
    routes: () => app.routes.map(({ method, path }) => ({ method, path })),
    async close(graceMs = 0) {
      if (closed) return;
      closed = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      });
      await jobs.engine.stop(graceMs);
      await outbox.stop();
      await jobs.pool.close();
      await node.close();
      releaseLock();
    },
  };
}

/** Makes the data dir private, takes its lock and upgrades its format (files mode); returns the lock's release. */
async function openDataDir(config: ServeConfig, log: Logger): Promise<() => void> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  // Users' files live below it: private even when the directory existed before (a volume made 0755).
  chmodSync(config.dataDir, 0o700);
  const releaseLock = acquireServerLock(join(config.dataDir, 'server.lock'));
  if (config.databaseUrl) return releaseLock;
  try {
    const format = await migrateDataDir(config.dataDir);
    if (format.from !== null && format.from !== format.to) log.info(format, 'data directory format upgraded');
  } catch (err) {
    releaseLock();
    throw err;
  }
  return releaseLock;
}

interface JobMachinery {
  planOf: AppServices['planOf'];
  pool: CompressorPool;
  lifecycle: Lifecycle;
  engine: JobEngine;
}

/** The worker pool, the lifecycle the backend's moves go through, and the engine that claims and runs jobs. */
function jobMachinery(config: ServeConfig, node: NodeBackend, clock: Clock, log: Logger): JobMachinery {
  const plan = defaultPlan(config.maxFileSizeBytes);
  const pool = new CompressorPool(config.workers, (err) => log.error({ err }, 'worker thread error'), new MemoryBudget(config.memoryBudgetMb * 1024 ** 2));
  const lifecycle = new Lifecycle(
    node.backend,
    webhookNotifier({ site: config.site, downloadUrl: (id, expiresAt) => presignedDownloadUrl(config.publicUrl, id, node.tokens.create(id, expiresAt)) }),
    {
      nodeId: node.nodeId,
      retentionSeconds: config.retentionSeconds,
      admission: { maxOpenPerAccount: plan.maxQueuedJobs },
      claim: { maxRunningPerAccount: plan.maxConcurrentJobs, maxRunningPerJobType: Object.fromEntries(COMPRESSORS.map((c) => [c.jobType, c.maxConcurrentJobs])) },
      leaseMs: node.leaseMs,
      // 0 would fail a job that never ran: the first crash is the least that fails one.
      maxCrashes: Math.max(1, config.jobMaxCrashes),
      clock,
    },
  );
  const engine = new JobEngine({ lifecycle, backend: node.backend, runner: pool, spool: node.spool }, {
    retentionSeconds: config.retentionSeconds,
    jobTimeoutSeconds: config.jobTimeoutSeconds,
    recordRetentionSeconds: config.recordRetentionSeconds,
    pollMs: node.pollMs,
  });
  return { planOf: () => plan, pool, lifecycle, engine };
}

/** What the app takes from the node's state and the job machinery. */
function appParts(node: NodeBackend, jobs: JobMachinery) {
  const { accounts, backend, spool, tokens } = node;
  return { accounts, ledger: backend.ledger, engine: jobs.engine, blobs: backend.blobs, spool, pool: jobs.pool, tokens, planOf: jobs.planOf };
}

/** URL downloads counted by outcome; a full data volume answers as the upload path does. */
function countedFetcher(urlFetcher: UrlFetcher, metrics: ServiceMetrics): Pick<UrlFetcher, 'fetchToFile'> {
  return {
    async fetchToFile(...args: Parameters<UrlFetcher['fetchToFile']>) {
      try {
        const fetched = await urlFetcher.fetchToFile(...args);
        metrics.urlFetch('ok');
        return fetched;
      } catch (err) {
        const code = (err as { code?: string }).code;
        metrics.urlFetch(typeof code === 'string' && code.startsWith('url_fetch.') ? code : 'error');
        if (code === 'ENOSPC') throw insufficientStorage('The data volume is full.');
        throw err;
      }
    },
  };
}

/** Metrics and log lines of each job's start and end; an end wakes the webhook outbox. */
function reportJobs({ lifecycle, outbox, metrics, log }: { lifecycle: Lifecycle; outbox: WebhookOutbox; metrics: ServiceMetrics; log: Logger }): void {
  lifecycle.on('ended', (job) => {
    metrics.jobFinished(job);
    log.info({ jobId: job.id, jobType: job.jobType, status: job.status, error: job.error?.code, outputBytes: job.output?.bytes, inputBytes: job.inputBytes }, 'job finished');
    // Deliveries are background work, not the run of the job that owes one.
    withIoPath('background', () => outbox.wake());
  });
  lifecycle.on('started', (job, waitedMs) => {
    metrics.jobStarted(waitedMs);
    log.info({ jobId: job.id, jobType: job.jobType, waitedMs, attempt: job.attempts }, 'job started');
  });
  outbox.on('attempt', (a) => metrics.webhookAttempt(a.outcome));
}

/**
 * Binds the port. Requests wait until `open()`, the end of start-up, so whoever sees the server
 * answer can already read the first key.
 */
async function listen(app: ReturnType<typeof createApp>, config: ServeConfig): Promise<{ server: Server; port: number; open: () => void }> {
  let open = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  const server = createHttpServer(
    async (...args: Parameters<typeof app.fetch>) => {
      await opened;
      return app.fetch(...args);
    },
    { idleMs: config.bodyIdleSeconds * 1000, minBytesPerSecond: config.bodyMinBytesPerSecond },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  // Large uploads may take long: one too slow to finish is ended by the body's pace watch instead, whose deadline grows with its bytes.
  server.requestTimeout = 0;
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : config.port, open };
}
