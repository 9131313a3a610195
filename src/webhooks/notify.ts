import type { Notifier, OwedWebhook } from '../jobs/backend.ts';
import type { Job } from '../jobs/types.ts';
import { expectedOutputFormat, outputFileName } from '../options.ts';
import { buildPayload, type JobOutcome } from './payload.ts';
import type { WebhookConfig } from './validate.ts';

/**
 * What a webhook says about a job that has just ended, or null while it has not ended Succeeded or
 * Failed (a canceled job owes no webhook). Pure: the presigned link is made by the caller.
 */
export function jobOutcome(job: Job, links: { downloadUrl: string }): JobOutcome | null {
  if (job.status !== 'Succeeded' && job.status !== 'Failed') return null;
  const succeeded = job.status === 'Succeeded' && job.output !== null;
  const processingTimeMs = job.startedAt && job.completedAt ? Date.parse(job.completedAt) - Date.parse(job.startedAt) : null;
  return {
    jobId: job.id,
    status: job.status,
    completedAt: job.completedAt ?? new Date(0).toISOString(),
    ...(succeeded
      ? {
          output: {
            fileName: outputFileName(job.fileName, expectedOutputFormat(job)),
            contentType: job.output!.contentType,
            fileCount: 1,
            downloadUrl: links.downloadUrl,
            expiresAt: job.expiresAt!,
          },
        }
      : { error: job.error ?? { code: 'jobs.internal_error', detail: 'The job failed.' } }),
    metrics: {
      inputBytes: job.inputBytes,
      outputBytes: succeeded ? job.output!.bytes : null,
      creditCost: succeeded ? job.creditCost : 0,
      processingTimeMs,
    },
  };
}

/** The delivery a job's end owes its webhook, or null when the webhook's events do not select it. */
export function owedDelivery(webhook: WebhookConfig, outcome: JobOutcome, site: string): OwedWebhook | null {
  if (!webhook.events.includes(outcome.status === 'Succeeded' ? 'succeeded' : 'failed')) return null;
  const payload = buildPayload(outcome, site);
  return { eventId: payload.eventId, jobId: outcome.jobId, url: webhook.url, secret: webhook.secret, payload: { ...payload } };
}

/**
 * Subscribes webhooks to job ends: the engine calls the notifier inside the move that ends a job,
 * so the delivery it owes is stored in the same step. `downloadUrl` makes the presigned link.
 */
export function webhookNotifier(opts: { site: string; downloadUrl(jobId: string, expiresAt: Date): string }): Notifier {
  return (job) => {
    if (!job.webhook) return null;
    const downloadUrl = job.status === 'Succeeded' && job.expiresAt ? opts.downloadUrl(job.id, new Date(job.expiresAt)) : '';
    const outcome = jobOutcome(job, { downloadUrl });
    return outcome && owedDelivery(job.webhook, outcome, opts.site);
  };
}
