import type { components } from './openapi.ts';

/**
 * Every failure the client reports is a CompressdError carrying the spec's code: the `error` of
 * the server's envelope (`jobs.not_found`, `queue.limit_exceeded`, …), the code of a failed job
 * (`jobs.timeout`, …), or one of the client's own, all prefixed `client.`:
 *   client.network          the server could not be reached (after the retries)
 *   client.timeout          a request made no progress for the client's timeoutMs, or wait() gave up
 *   client.invalid_response the server answered something that is not the API's JSON
 *   client.job_canceled     wait() saw the job Canceled
 *   client.invalid_input    compress() was given something it cannot send (a missing file, say)
 *   webhook.invalid_signature, webhook.timestamp_out_of_tolerance, webhook.invalid_payload  (verifyWebhook)
 * Only an AbortSignal of your own rejects with its reason instead.
 */
export class CompressdError extends Error {
  override readonly name: string = 'CompressdError';
  /** The whole error body: extra fields such as `isRetryable`, `supportedFormats`, `megabytes`. */
  readonly body: Record<string, unknown>;
  /** Seconds from a Retry-After header. */
  readonly retryAfter: number | null;
  /** The server's `X-Request-Id` of the answer, to find its log line. */
  readonly requestId: string | null;

  constructor(
    readonly code: string,
    /** The HTTP status, when the error came in a response. */
    readonly status: number | null,
    readonly detail: string | null,
    extra: { body?: Record<string, unknown>; retryAfter?: number | null; requestId?: string | null; cause?: unknown } = {},
  ) {
    super(detail ? `${code}: ${detail}` : code, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.body = extra.body ?? {};
    this.retryAfter = extra.retryAfter ?? null;
    this.requestId = extra.requestId ?? null;
  }
}

/** wait() on a job that ended Failed: `code` is the job's error code. */
export class JobFailedError extends CompressdError {
  override readonly name: string = 'JobFailedError';

  constructor(
    /** The job's final status record. */
    readonly job: components['schemas']['JobStatus'],
  ) {
    super(job.error?.code ?? 'server.internal_error', null, job.error?.detail ?? null);
  }
}
