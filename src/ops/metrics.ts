import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Job } from '../jobs/types.ts';
import type { IoPath, IoSink } from './io-counts.ts';

export interface MetricSources {
  counts(): Promise<{ queued: number; running: number }>;
  poolUtilization(): number;
}

/** The Prometheus metrics of one server (`GET /metrics`). */
export class ServiceMetrics implements IoSink {
  readonly registry = new Registry();
  private readonly jobs = new Counter({ name: 'compressd_jobs_total', help: 'Jobs that ended, by job type and final status', labelNames: ['job_type', 'status'], registers: [this.registry] });
  private readonly duration = new Histogram({
    name: 'compressd_job_duration_seconds',
    help: 'Time from start to end of finished jobs',
    labelNames: ['job_type'],
    buckets: [0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 60, 300],
    registers: [this.registry],
  });
  private readonly wait = new Histogram({
    name: 'compressd_job_queue_wait_seconds',
    help: 'Time jobs spent queued before they started',
    buckets: [0.01, 0.1, 0.5, 1, 5, 15, 60, 300],
    registers: [this.registry],
  });
  private readonly bytesIn = new Counter({ name: 'compressd_input_bytes_total', help: 'Input bytes of succeeded jobs', labelNames: ['job_type'], registers: [this.registry] });
  private readonly bytesOut = new Counter({ name: 'compressd_output_bytes_total', help: 'Output bytes of succeeded jobs', labelNames: ['job_type'], registers: [this.registry] });
  private readonly bytesSaved = new Counter({ name: 'compressd_saved_bytes_total', help: 'Bytes saved by succeeded jobs', labelNames: ['job_type'], registers: [this.registry] });
  private readonly webhooks = new Counter({ name: 'compressd_webhook_attempts_total', help: 'Webhook delivery attempts by outcome', labelNames: ['outcome'], registers: [this.registry] });
  private readonly fetches = new Counter({ name: 'compressd_url_fetches_total', help: 'URL input downloads by outcome (ok or the error code)', labelNames: ['outcome'], registers: [this.registry] });
  private readonly http = new Counter({ name: 'compressd_http_requests_total', help: 'HTTP requests by method and status', labelNames: ['method', 'status'], registers: [this.registry] });
  // Cluster mode's cost per job: see IoPath for what each path covers.
  private readonly dbQueries = new Counter({ name: 'compressd_db_queries_total', help: 'PostgreSQL queries sent (one round trip each), by what they were for', labelNames: ['path'], registers: [this.registry] });
  private readonly dbConnects = new Counter({ name: 'compressd_db_connections_total', help: 'PostgreSQL connections opened, by what needed them', labelNames: ['path'], registers: [this.registry] });
  private readonly s3Requests = new Counter({ name: 'compressd_s3_requests_total', help: 'S3 requests sent (retries included), by what they were for and command', labelNames: ['path', 'command'], registers: [this.registry] });

  constructor(sources: MetricSources) {
    collectDefaultMetrics({ register: this.registry, prefix: 'compressd_' });
    new Gauge({ name: 'compressd_jobs_queued', help: 'Jobs waiting for a worker', registers: [this.registry], async collect() { this.set((await sources.counts()).queued); } });
    new Gauge({ name: 'compressd_jobs_running', help: 'Jobs being compressed', registers: [this.registry], async collect() { this.set((await sources.counts()).running); } });
    new Gauge({ name: 'compressd_pool_utilization', help: 'Share of worker-thread capacity in use (0-1)', registers: [this.registry], collect() { this.set(sources.poolUtilization()); } });
  }

  jobStarted(waitedMs: number): void {
    this.wait.observe(waitedMs / 1000);
  }

  jobFinished(job: Job): void {
    this.jobs.inc({ job_type: job.jobType, status: job.status });
    if (job.startedAt && job.completedAt) this.duration.observe({ job_type: job.jobType }, (Date.parse(job.completedAt) - Date.parse(job.startedAt)) / 1000);
    if (job.status === 'Succeeded' && job.output) {
      this.bytesIn.inc({ job_type: job.jobType }, job.inputBytes);
      this.bytesOut.inc({ job_type: job.jobType }, job.output.bytes);
      this.bytesSaved.inc({ job_type: job.jobType }, Math.max(0, job.inputBytes - job.output.bytes));
    }
  }

  webhookAttempt(outcome: string): void {
    this.webhooks.inc({ outcome });
  }

  urlFetch(outcome: string): void {
    this.fetches.inc({ outcome });
  }

  request(method: string, status: number): void {
    this.http.inc({ method, status: String(status) });
  }

  dbQuery(path: IoPath): void {
    this.dbQueries.inc({ path });
  }

  dbConnect(path: IoPath): void {
    this.dbConnects.inc({ path });
  }

  s3Request(path: IoPath, command: string): void {
    this.s3Requests.inc({ path, command });
  }
}
