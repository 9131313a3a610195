import type { ServerType } from '@hono/node-server';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { CreditLedger } from './accounts/ledger.ts';
import { defaultPlan } from './accounts/plan.ts';
import { AccountRegistry, STARTING_CREDITS } from './accounts/registry.ts';
import type { ServeConfig } from './config.ts';
import { acquireServerLock } from './durable/lock.ts';
import { FETCH_DEFAULTS, parseDnsOverrides, parseUrlAllow, type FetchConfig } from './fetch/config.ts';
import { guardedDispatcher } from './fetch/egress.ts';
import { UrlFetcher } from './fetch/fetch-input.ts';
import { JobEngine } from './jobs/engine.ts';
import { CompressorPool } from './jobs/pool.ts';
import { LocalSpool } from './jobs/spool.ts';
import { JournaledJobStore } from './jobs/store.ts';
import type { Job } from './jobs/types.ts';
import { DiskGuard, insufficientStorage } from './ops/disk.ts';
import { ServiceMetrics } from './ops/metrics.ts';
import { createApp } from './server/app.ts';
import { createHttpServer } from './server/http-server.ts';
import { outputFileName } from './server/views.ts';
import { DownloadTokens, presignedDownloadUrl } from './webhooks/download-token.ts';
import { WebhookOutbox } from './webhooks/outbox.ts';

export interface RunningService {
  server: ServerType;
  port: number;
  /** The API key of the `default` account when this start created it (first start). */
  firstKey: string | null;
  /** The HTTP routes served (method and path pattern). */
  routes(): { method: string; path: string }[];
  close(graceMs?: number): Promise<void>;
}

/**
 * The composition root: builds every component from its part of the configuration,
 * recovers the data dir's state, and starts listening.
 */
export async function startService(config: ServeConfig, log: Logger, extra: Partial<FetchConfig> = {}): Promise<RunningService> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const releaseLock = acquireServerLock(join(config.dataDir, 'server.lock'));

  const accounts = new AccountRegistry(config.dataDir);
  let firstKey: string | null = null;
  if (accounts.isEmpty()) {
    accounts.ensureAccount('default', STARTING_CREDITS);
    firstKey = accounts.createKey('default').key;
  }
  accounts.watch();

  const plan = defaultPlan(config.maxFileSizeBytes);
  const planOf = () => plan;
  const ledger = new CreditLedger(config.dataDir, (a) => accounts.granted(a));
  const store = new JournaledJobStore(config.dataDir);
  const spool = new LocalSpool(join(config.dataDir, 'spool'));
  const pool = new CompressorPool(config.workers, (err) => log.error({ err }, 'worker thread error'));
  const engine = new JobEngine(store, spool, ledger, pool, {
    retentionSeconds: config.retentionSeconds,
    jobTimeoutSeconds: config.jobTimeoutSeconds,
    maxRunningPerAccount: plan.maxConcurrentJobs,
    maxQueuedPerAccount: plan.maxQueuedJobs,
    recordRetentionSeconds: 24 * 3600,
  });

  const fetchConfig: FetchConfig = {
    ...FETCH_DEFAULTS,
    urlAllow: parseUrlAllow(config.urlAllow),
    dnsOverrides: parseDnsOverrides(config.dnsOverrides),
    ...extra,
  };
  const urlFetcher = new UrlFetcher(fetchConfig);
  const disk = new DiskGuard(config.dataDir, config.minFreeDiskBytes);
  const fetcher = {
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
  const tokens = await DownloadTokens.open(config.dataDir);
  const outbox = new WebhookOutbox({
    dataDir: config.dataDir,
    retryDelaysSec: config.webhookRetryDelays,
    site: config.site,
    dispatcher: guardedDispatcher(fetchConfig),
    log: (entry) => log.info(entry, 'webhook'),
  });
  await outbox.start();

  const notify = async (job: Job) => {
    if (!job.webhook || job.notified || (job.status !== 'Succeeded' && job.status !== 'Failed')) return;
    const succeeded = job.status === 'Succeeded' && job.output;
    const processingTimeMs = job.startedAt && job.completedAt ? Date.parse(job.completedAt) - Date.parse(job.startedAt) : null;
    await outbox.enqueue(job.webhook, {
      jobId: job.id,
      status: job.status,
      completedAt: job.completedAt ?? new Date().toISOString(),
      ...(succeeded
        ? {
            output: {
              fileName: outputFileName(job),
              contentType: job.output!.contentType,
              fileCount: 1,
              downloadUrl: presignedDownloadUrl(config.publicUrl, job.id, tokens.create(job.id, new Date(job.expiresAt!))),
              expiresAt: job.expiresAt!,
            },
          }
        : { error: job.error ?? { code: 'jobs.failed', detail: 'The job failed.' } }),
      metrics: {
        inputBytes: job.inputBytes,
        outputBytes: succeeded ? job.output!.bytes : null,
        creditCost: succeeded ? job.creditCost : 0,
        processingTimeMs,
      },
    });
    store.update(job.id, { notified: true });
  };
  const metrics = new ServiceMetrics({ counts: () => engine.counts(), poolUtilization: () => pool.utilization });
  engine.on('finished', (job) => {
    metrics.jobFinished(job);
    log.info({ jobId: job.id, job: job.job, status: job.status, error: job.error?.code, outputBytes: job.output?.bytes, inputBytes: job.inputBytes }, 'job finished');
    notify(job).catch((err) => log.error({ err, jobId: job.id }, 'webhook enqueue failed'));
  });
  engine.on('started', (job, waitedMs) => {
    metrics.jobStarted(waitedMs);
    log.info({ jobId: job.id, job: job.job, waitedMs, attempt: job.attempts }, 'job started');
  });
  outbox.on('attempt', (a) => metrics.webhookAttempt(a.outcome));
  // Job ends that a crash kept from reaching the outbox.
  for (const job of [...store.all()]) await notify(job);
  await engine.start();

  let closed = false;
  const app = createApp({
    accounts,
    ledger,
    engine,
    spool,
    pool,
    fetcher,
    tokens,
    planOf,
    rateLimitPerMinute: config.rateLimitPerMinute,
    trustProxy: config.trustProxy,
    log,
    dataDir: config.dataDir,
    disk,
    metrics,
    metricsToken: config.metricsToken,
    poolReady: () => !closed,
  });
  const server = createHttpServer(app.fetch);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  // Large uploads may take long; idle connections are still closed by the keep-alive timeout.
  (server as import('node:http').Server).requestTimeout = 0;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;

  return {
    server,
    port,
    firstKey,
    routes: () => app.routes.map(({ method, path }) => ({ method, path })),
    async close(graceMs = 0) {
      if (closed) return;
      closed = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as import('node:http').Server).closeAllConnections?.();
      });
      await engine.stop(graceMs);
      await outbox.stop();
      await pool.close();
      accounts.close();
      ledger.close();
      store.close();
      releaseLock();
    },
  };
}
