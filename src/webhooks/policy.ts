/** Seconds before attempts 1-5: the spec's schedule, about 2.5 minutes in all. */
export const DEFAULT_RETRY_DELAYS_SEC: readonly number[] = [0, 1, 5, 30, 120];

/** The spec gives the receiver 10 seconds to answer. */
export const DEFAULT_TIMEOUT_MS = 10_000;

export type AttemptOutcome = 'delivered' | 'retry' | 'terminal';

/**
 * What a receiver's HTTP status means for the delivery. 3xx is terminal: redirects are not
 * followed (the signed payload goes only to the URL the caller registered and we validated),
 * and repeating the same request would only be redirected again.
 */
export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 429 || status >= 500) return 'retry';
  return 'terminal';
}

/**
 * Parses `COMPRESSD_WEBHOOK_RETRY_DELAYS` ("0,1,5,30,120"): one delay per attempt, so its
 * length is the number of attempts. Fractions are allowed (tests use tiny delays).
 */
export function parseRetryDelays(text: string): number[] {
  const delays = text.split(',').map((part) => part.trim()).filter((part) => part !== '').map(Number);
  checkRetryDelays(delays);
  return delays;
}

export function checkRetryDelays(delays: readonly number[]): void {
  if (delays.length === 0) throw new RangeError('webhook retry delays: at least one attempt is needed');
  for (const delay of delays) {
    if (!Number.isFinite(delay) || delay < 0) {
      throw new RangeError(`webhook retry delays: ${delay} is not a number of seconds >= 0`);
    }
  }
}
