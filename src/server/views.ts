import { contentTypeOf } from '../catalog/index.ts';
import type { AcceptedJob } from '../jobs/backend.ts';
import type { Job } from '../jobs/types.ts';
import { expectedOutputFormat, outputFileName } from '../options.ts';

/**
 * The 202 answer of a submission (also replayed for its idempotency key): the job as admitted, so
 * Queued (the spec's job accepted response) even when a worker has started it since.
 */
export function acceptedView(job: AcceptedJob) {
  return {
    id: job.id,
    status: 'Queued' as const,
    fileName: job.fileName,
    format: job.format,
    jobType: job.jobType,
    createdAt: job.createdAt,
  };
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

/** `GET /compress/job/{id}`: the spec's status fields, plus `metrics.perceivedQuality`, timestamps and `expired`. */
export function statusView(job: Job) {
  const succeeded = job.status === 'Succeeded';
  const outputBytes = succeeded && job.output ? job.output.bytes : 0;
  const ratio = succeeded && job.inputBytes > 0 ? outputBytes / job.inputBytes : 0;
  const format = expectedOutputFormat(job);
  return {
    id: job.id,
    status: job.status,
    format: job.format,
    jobType: job.jobType,
    progress: job.progress,
    metrics: {
      inputBytes: job.inputBytes,
      outputBytes,
      creditCost: job.status === 'Failed' || job.status === 'Canceled' ? 0 : job.creditCost,
      compressionRatio: round(ratio, 4),
      savingsPercent: succeeded ? round((1 - ratio) * 100, 2) : 0,
      perceivedQuality: succeeded && job.output?.perceivedQuality !== undefined ? round(job.output.perceivedQuality, 1) : null,
    },
    error: job.status === 'Failed' ? job.error : null,
    output: {
      fileName: outputFileName(job.fileName, format),
      contentType: job.output?.contentType ?? contentTypeOf(format),
      fileCount: succeeded && !job.expired ? 1 : 0,
    },
    createdAt: job.createdAt,
    startedAt: job.startedAt,
    completedAt: job.completedAt,
    expiresAt: job.expiresAt,
    expired: job.expired,
  };
}
