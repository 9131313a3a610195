/**
 * Every failure the client reports is a CompressdError carrying the spec's code: the `error` of
 * the server's envelope (`jobs.not_found`, `queue.limit_exceeded`, …), the code of a failed job
 * (`jobs.timeout`, …), or one of the client's own, all prefixed `client.`:
 *   client.network          the server could not be reached (after the retries)
 *   client.invalid_response the server answered something that is not the API's JSON
 *   client.job_canceled     wait() saw the job Canceled
 *   client.timeout          wait() gave up (its timeoutMs)
 *   client.invalid_input    compress() was given something it cannot send
 *   webhook.invalid_signature, webhook.timestamp_out_of_tolerance, webhook.invalid_payload  (verifyWebhook)
 */
export class CompressdError extends Error {
  override readonly name = 'CompressdError';
  constructor(
    readonly code: string,
    /** The HTTP status, when the error came in a response. */
    readonly status: number | null,
    readonly detail: string | null,
    /** The whole error body: extra fields such as `isRetryable`, `supportedFormats`, `megabytes`. */
    readonly body: Record<string, unknown> = {},
    /** Seconds from a Retry-After header. */
    readonly retryAfter: number | null = null,
  ) {
    super(detail ? `${code}: ${detail}` : code);
  }
}

/** wait() on a job that ended Failed: `code` is the job's error code. */
export class JobFailedError extends CompressdError {
  constructor(
    code: string,
    detail: string | null,
    /** The job's final status record. */
    readonly job: unknown,
  ) {
    super(code, null, detail);
  }
}
