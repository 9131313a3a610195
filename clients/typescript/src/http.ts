import { CompressdError } from './errors.ts';

export interface RetryPolicy {
  /**
   * Retries after the first attempt, for 5xx, 429 and network errors (default 4: waits of 1, 2, 4
   * and 8 s). A refused connection (nothing listens there) is retried once only.
   */
  retries: number;
  /** First back-off delay in ms; it doubles up to maxDelayMs (the spec: 1, 2, 4, 8 … 30 s). */
  baseDelayMs: number;
  maxDelayMs: number;
}

/** @internal */
export const DEFAULT_RETRY: RetryPolicy = { retries: 4, baseDelayMs: 1000, maxDelayMs: 30_000 };

/** @internal How long one attempt may make no progress (sending its body, awaiting or reading the answer). */
export const DEFAULT_TIMEOUT_MS = 60_000;

/** @internal */
export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), or null. */
function retryAfterSeconds(value: string | null): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The response's error envelope as a CompressdError. */
async function errorOf(res: Response): Promise<CompressdError> {
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
  return new CompressdError(code, res.status, detail, { body, retryAfter: retryAfterSeconds(res.headers.get('retry-after')), requestId: res.headers.get('x-request-id') });
}

/** @internal A request body, opened afresh for every attempt; `replayable: false` when it cannot be sent twice. */
export interface Payload {
  contentType: string;
  replayable: boolean;
  open(): { body: string | ReadableStream<Uint8Array>; length?: number };
}

/** @internal */
export interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: Payload;
  signal?: AbortSignal | undefined;
}

/** Aborts an attempt that has made no progress for `ms`; every chunk sent or received re-arms it. */
class Watchdog {
  readonly controller = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly ms: number,
    private readonly what: string,
  ) {
    this.arm();
  }

  arm(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.controller.abort(new CompressdError('client.timeout', null, `${this.what}: no progress for ${this.ms} ms`)), this.ms);
    // A download stream dropped unread must not hold the process open.
    this.#timer.unref?.();
  }

  stop(): void {
    clearTimeout(this.#timer);
  }

  /** The stream passed through, re-arming on each chunk; at its end, `then` (arm: await the answer; stop: done). */
  watch(stream: ReadableStream<Uint8Array>, then: 'arm' | 'stop'): ReadableStream<Uint8Array> {
    return stream.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform: (chunk, controller) => {
          this.arm();
          controller.enqueue(chunk);
        },
        flush: () => (then === 'arm' ? this.arm() : this.stop()),
      }),
    );
  }
}

/** The low-level error code of a failed fetch (undici puts it on `cause`, or on each of an AggregateError's). */
function networkCode(err: unknown): string | undefined {
  const cause = (err as { cause?: { code?: unknown; errors?: { code?: unknown }[] } }).cause;
  const code = cause?.code ?? cause?.errors?.[0]?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Nothing listens (or the name does not resolve): retrying for a minute would not help. */
const REFUSED = new Set(['ECONNREFUSED', 'ENOTFOUND']);

/** @internal
 * One API call with the spec's retries: 5xx and network errors back off 1, 2, 4, 8 … 30 s (a
 * refused connection once, a fetch failure with no system error code never), 429 waits what Retry-After says. A body that cannot be sent again (a
 * stream) gets no retry, and neither does an attempt that timed out. Any other non-2xx becomes a
 * CompressdError. `read: 'json'` resolves with the parsed body, `'stream'` with the Response,
 * whose body stays under the watchdog.
 */
export async function request(fetchFn: typeof fetch, call: Call, policy: RetryPolicy, timeoutMs: number, read: 'json'): Promise<unknown>;
/** @internal */
export async function request(fetchFn: typeof fetch, call: Call, policy: RetryPolicy, timeoutMs: number, read: 'stream'): Promise<Response>;
export async function request(fetchFn: typeof fetch, call: Call, policy: RetryPolicy, timeoutMs: number, read: 'json' | 'stream'): Promise<unknown> {
  const what = `${call.method} ${call.url}`;
  for (let attempt = 0; ; attempt++) {
    const backoff = Math.min(policy.baseDelayMs * 2 ** attempt, policy.maxDelayMs);
    let last = attempt >= policy.retries || call.payload?.replayable === false;
    const dog = new Watchdog(timeoutMs, what);
    const signal = call.signal ? AbortSignal.any([call.signal, dog.controller.signal]) : dog.controller.signal;
    const headers = { ...call.headers };
    let body: RequestInit['body'];
    if (call.payload) {
      const opened = call.payload.open();
      headers['content-type'] = call.payload.contentType;
      if (opened.length !== undefined) headers['content-length'] = String(opened.length);
      body = typeof opened.body === 'string' ? opened.body : dog.watch(opened.body, 'arm');
    }
    const failed = (err: unknown): unknown => {
      dog.stop();
      if (call.signal?.aborted) return call.signal.reason;
      if (dog.controller.signal.aborted) return dog.controller.signal.reason;
      return err instanceof CompressdError ? err : null;
    };
    let res: Response;
    try {
      res = await fetchFn(call.url, { method: call.method, headers, body, signal, ...(body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit);
    } catch (err) {
      const known = failed(err);
      if (known) throw known;
      const code = networkCode(err);
      // No system code: the request itself is at fault (a blocked port, a bad URL), not the network.
      if (code === undefined || (REFUSED.has(code) && attempt >= 1)) last = true;
      const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message || code : (err as Error).message;
      if (last) throw new CompressdError('client.network', null, `${what}: ${cause}`, { cause: err });
      await sleep(backoff, call.signal);
      continue;
    }
    try {
      if (res.ok) {
        if (read === 'stream') return res.body ? new Response(dog.watch(res.body, 'stop'), res) : (dog.stop(), res);
        const text = await res.text();
        dog.stop();
        try {
          return JSON.parse(text) as unknown;
        } catch {
          throw new CompressdError('client.invalid_response', res.status, `${what} did not answer JSON`, { requestId: res.headers.get('x-request-id') });
        }
      }
      if (last || (res.status !== 429 && res.status < 500)) throw await errorOf(res);
      await res.body?.cancel();
    } catch (err) {
      throw failed(err) ?? new CompressdError('client.network', res.status, `${what}: ${(err as Error).message}`, { cause: err, requestId: res.headers.get('x-request-id') });
    }
    dog.stop();
    const wait = res.status === 429 ? (retryAfterSeconds(res.headers.get('retry-after')) ?? backoff / 1000) * 1000 : backoff;
    await sleep(wait, call.signal);
  }
}
