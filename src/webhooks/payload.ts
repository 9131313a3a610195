import { createHash } from 'node:crypto';
import { truncateDetail } from '../errors.ts';

export type WebhookEventName = 'job.succeeded' | 'job.failed';

/** What the engine knows about a job that has just ended, in the terms the payload needs. */
export interface JobOutcome {
  jobId: string;
  status: 'Succeeded' | 'Failed';
  completedAt: Date | string;
  /** Required when Succeeded. */
  output?: {
    fileName: string;
    contentType: string;
    fileCount: number;
    downloadUrl: string;
    expiresAt: Date | string;
  };
  /** Required when Failed. */
  error?: { code: string; detail: string };
  metrics: {
    inputBytes: number;
    outputBytes: number | null;
    creditCost: number;
    processingTimeMs: number | null;
  };
}

/** The webhook payload minus `deliveryAttempt`, which each attempt adds for itself. */
export interface WebhookPayload {
  event: WebhookEventName;
  eventId: string;
  jobId: string;
  jobType: 'compress';
  site: string;
  status: 'Succeeded' | 'Failed';
  output?: { fileName: string; contentType: string; fileCount: number; downloadUrl: string; expiresAt: string };
  error?: { code: string; detail: string };
  metrics: { inputBytes: number; outputBytes: number | null; creditCost: number; processingTimeMs: number | null };
  completedAt: string;
}

export type WebhookBody = Omit<WebhookPayload, 'output' | 'error' | 'metrics' | 'completedAt'> & {
  deliveryAttempt: number;
} & Pick<WebhookPayload, 'output' | 'error' | 'metrics' | 'completedAt'>;

/**
 * A job ends once, so its completion event is named by the job id and the event: the id is
 * stable across retries, and across a restart that makes the engine enqueue the same event again.
 */
export function eventIdFor(jobId: string, event: WebhookEventName): string {
  const digest = createHash('sha256').update(`compressd.webhook\0${jobId}\0${event}`).digest('base64url');
  return `evt_${digest.slice(0, 24)}`;
}

function iso(value: Date | string): string {
  const date = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(date.getTime())) throw new TypeError(`not a date: ${String(value)}`);
  return date.toISOString();
}

function int(value: number, name: string): number {
  if (!Number.isFinite(value)) throw new TypeError(`${name} must be a finite number`);
  return Math.round(value);
}

/** Builds the spec's payload for a job that ended Succeeded or Failed. */
export function buildPayload(job: JobOutcome, site: string): WebhookPayload {
  const succeeded = job.status === 'Succeeded';
  const event: WebhookEventName = succeeded ? 'job.succeeded' : 'job.failed';
  const payload: WebhookPayload = {
    event,
    eventId: eventIdFor(job.jobId, event),
    jobId: job.jobId,
    jobType: 'compress',
    site,
    status: job.status,
    metrics: {
      inputBytes: int(job.metrics.inputBytes, 'inputBytes'),
      outputBytes: succeeded && job.metrics.outputBytes !== null ? int(job.metrics.outputBytes, 'outputBytes') : null,
      creditCost: int(job.metrics.creditCost, 'creditCost'),
      processingTimeMs: job.metrics.processingTimeMs === null ? null : int(job.metrics.processingTimeMs, 'processingTimeMs'),
    },
    completedAt: iso(job.completedAt),
  };
  if (succeeded) {
    if (!job.output) throw new TypeError('a Succeeded job needs output');
    payload.output = {
      fileName: job.output.fileName,
      contentType: job.output.contentType,
      fileCount: int(job.output.fileCount, 'fileCount'),
      downloadUrl: job.output.downloadUrl,
      expiresAt: iso(job.output.expiresAt),
    };
  } else {
    if (!job.error) throw new TypeError('a Failed job needs error');
    payload.error = { code: job.error.code, detail: truncateDetail(job.error.detail) };
  }
  return payload;
}

/** The body of one attempt, fields in the spec's order. */
export function bodyForAttempt(payload: WebhookPayload, deliveryAttempt: number): WebhookBody {
  const { event, eventId, jobId, jobType, site, status, output, error, metrics, completedAt } = payload;
  return {
    event,
    eventId,
    jobId,
    jobType,
    site,
    status,
    deliveryAttempt,
    ...(output ? { output } : {}),
    ...(error ? { error } : {}),
    metrics,
    completedAt,
  };
}
