import { CompressdError } from './errors.ts';

export interface RetryPolicy {
  /** Retries after the first attempt, for 5xx, 429 and unreachable servers (default 6). */
  retries: number;
  /** First back-off delay in ms; it doubles up to maxDelayMs (the spec: 1, 2, 4, 8 … 30 s). */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { retries: 6, baseDelayMs: 1000, maxDelayMs: 30_000 };

export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), or null. */
export function retryAfterSeconds(value: string | null): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The response's error envelope as a CompressdError. */
export async function errorOf(res: Response): Promise<CompressdError> {
  const text = await res.text().catch(() => '');
  let body: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object') body = parsed as Record<string, unknown>;
  } catch {
    // Not the API's envelope (a proxy's page, say): the status says what happened.
  }
  const code = typeof body.error === 'string' ? body.error : res.status >= 500 ? 'server.internal_error' : 'client.invalid_response';
  const detail = typeof body.detail === 'string' ? body.detail : body.error === undefined ? text.slice(0, 200) || null : null;
  return new CompressdError(code, res.status, detail, body, retryAfterSeconds(res.headers.get('retry-after')));
}

/** Builds the request afresh for every attempt; `replayable: false` when its body cannot be sent twice. */
export type Send = () => RequestInit & { replayable: boolean };

/**
 * One API call with the spec's retries: 5xx and unreachable servers back off 1, 2, 4, 8 … 30 s,
 * 429 waits what Retry-After says. A body that cannot be sent again (a stream) gets no retry.
 * Any other non-2xx becomes a CompressdError.
 */
export async function request(fetchFn: typeof fetch, url: string, make: Send, policy: RetryPolicy, signal?: AbortSignal): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    const { replayable, ...init } = make();
    const backoff = Math.min(policy.baseDelayMs * 2 ** attempt, policy.maxDelayMs);
    const last = attempt >= policy.retries || !replayable;
    let res: Response;
    try {
      res = await fetchFn(url, { ...init, signal });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (last) throw new CompressdError('client.network', null, `${url}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
      await sleep(backoff, signal);
      continue;
    }
    if (res.ok) return res;
    if (last || (res.status !== 429 && res.status < 500)) throw await errorOf(res);
    const wait = res.status === 429 ? (retryAfterSeconds(res.headers.get('retry-after')) ?? backoff / 1000) * 1000 : backoff;
    await res.body?.cancel();
    await sleep(wait, signal);
  }
}
