import { request, type Dispatcher } from 'undici';
import { classifyStatus, type AttemptOutcome } from './policy.ts';

export interface AttemptResult {
  outcome: AttemptOutcome;
  /** The receiver's HTTP status, or null when none arrived (connection, TLS, DNS, timeout). */
  status: number | null;
  error: string | null;
}

const RESPONSE_BODY_LIMIT = 64 * 1024;

function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${code ?? err.name}: ${err.message}${cause}`.slice(0, 300);
  }
  return String(err).slice(0, 300);
}

/**
 * One POST to the receiver. Never throws: every failure becomes an outcome. The timeout covers
 * connecting, sending and the response head; the response body is read (and discarded) within
 * what remains of it, so a receiver that trickles its body cannot hold a delivery slot.
 * undici's request() does not follow redirects, so a 3xx reaches classifyStatus as it is.
 */
export async function postOnce(opts: {
  url: string;
  headers: Record<string, string>;
  body: string;
  dispatcher: Dispatcher;
  timeoutMs: number;
  signal?: AbortSignal;
}): Promise<AttemptResult> {
  if (opts.signal?.aborted) return { outcome: 'retry', status: null, error: 'outbox stopping' };
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new Error(`receiver did not answer within ${opts.timeoutMs} ms`)),
    opts.timeoutMs,
  );
  const onStop = () => controller.abort(new Error('outbox stopping'));
  opts.signal?.addEventListener('abort', onStop, { once: true });
  try {
    const response = await request(opts.url, {
      method: 'POST',
      headers: opts.headers,
      body: opts.body,
      dispatcher: opts.dispatcher,
      signal: controller.signal,
    });
    try {
      await response.body.dump({ limit: RESPONSE_BODY_LIMIT, signal: controller.signal });
    } catch {
      // The status is the answer; an unread or broken response body does not change it.
    }
    return { outcome: classifyStatus(response.statusCode), status: response.statusCode, error: null };
  } catch (err) {
    const reason = controller.signal.aborted ? controller.signal.reason : err;
    return { outcome: 'retry', status: null, error: describe(reason) };
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onStop);
  }
}
