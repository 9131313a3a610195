import { randomUUID } from 'node:crypto';
import { createWriteStream, openAsBlob, statSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { basename } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CompressdError, JobFailedError } from './errors.ts';
import { DEFAULT_RETRY, DEFAULT_TIMEOUT_MS, request, sleep, type Payload, type RetryPolicy } from './http.ts';
import { blobForm, streamForm } from './multipart.ts';
import type { components } from './openapi.ts';

type Schemas = components['schemas'];
export type JobAccepted = Schemas['JobAccepted'];
export type JobStatus = Schemas['JobStatus'];
export type CostEstimate = Schemas['CostEstimate'];
export type Entitlements = Schemas['Entitlements'];
export type Compressors = Schemas['Compressors'];
export type CompressOptionsObject = Schemas['Options'];

export interface ClientOptions {
  /** Where compressd listens, e.g. `http://localhost:8080`. */
  baseUrl: string;
  /** The API key; `COMPRESSD_API_KEY` from the environment when not given. */
  apiKey?: string | undefined;
  retry?: Partial<RetryPolicy>;
  /** How long one request may make no progress, sending or receiving (default 60 s): client.timeout. */
  timeoutMs?: number;
  /** wait()'s overall limit when its call gives none (default 1 hour): client.timeout. */
  waitTimeoutMs?: number;
  /** A fetch of your own (a proxy agent, say); the global one by default. */
  fetch?: typeof fetch;
}

export type CompressInput = string | URL | Blob | Uint8Array | ReadableStream<Uint8Array> | NodeJS.ReadableStream;

export interface CompressOptions {
  /** The compressor's options (resize, PNG mode…), as the schema at /compress/schema gives them. */
  options?: CompressOptionsObject;
  /** Name (with extension) of an upload given as bytes or a stream; overrides a File's name. */
  fileName?: string;
  /** Format of URL input (`jpg`, `pdf`…), required by the API with inputUrl. */
  sourceFormat?: string;
  webhook?: { url: string; secret: string; events?: ('succeeded' | 'failed')[] };
  /**
   * Sent as `Idempotency-Key`: the server answers a repeat of it (same account, within 24 h)
   * with the first job. A random UUID per compress() call by default, the same on its retries;
   * give your own to make a submission safe to repeat across restarts of your program.
   */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** Give up after this long (client.timeout); the client's waitTimeoutMs (1 hour) by default. */
  timeoutMs?: number;
  /** First poll delay (default 500 ms); it grows by half each poll up to maxIntervalMs (5 s). */
  intervalMs?: number;
  maxIntervalMs?: number;
  onProgress?: (status: JobStatus) => void;
  signal?: AbortSignal;
}

const TERMINAL = new Set(['Succeeded', 'Failed', 'Canceled']);
const DEFAULT_WAIT_MS = 60 * 60 * 1000;

/** How a client talks to the server; kept off the public classes so that it is not part of the API. */
interface Transport {
  json<T>(method: string, path: string, payload?: Payload, signal?: AbortSignal, headers?: Record<string, string>): Promise<T>;
  stream(method: string, path: string, signal?: AbortSignal): Promise<Response>;
  waitTimeoutMs: number;
}

const transports = new WeakMap<CompressdClient, Transport>();

function transportOf(client: CompressdClient): Transport {
  const transport = transports.get(client);
  if (!transport) throw new CompressdError('client.invalid_input', null, 'a Job needs a CompressdClient');
  return transport;
}

/** A submitted job. Created by compress(), or by client.job(id) for one submitted earlier. */
export class Job {
  readonly #transport: Transport;

  constructor(
    client: CompressdClient,
    readonly id: string,
    /** The 202 answer, when this handle came from compress(). */
    readonly accepted: JobAccepted | null = null,
  ) {
    this.#transport = transportOf(client);
  }

  #path(suffix = '') {
    return `/compress/job/${encodeURIComponent(this.id)}${suffix}`;
  }

  status(signal?: AbortSignal): Promise<JobStatus> {
    return this.#transport.json<JobStatus>('GET', this.#path(), undefined, signal);
  }

  /**
   * Polls until the job ends, with a growing interval; 429 answers wait their Retry-After and
   * 5xx answers back off (1, 2, 4, 8 s). Resolves with the Succeeded status; rejects with
   * JobFailedError (the job's error code) when it Failed, client.job_canceled when Canceled,
   * client.timeout past timeoutMs (the client's waitTimeoutMs, 1 hour, by default).
   */
  async wait(options: WaitOptions = {}): Promise<JobStatus> {
    const limit = options.timeoutMs ?? this.#transport.waitTimeoutMs;
    // A monotonic clock: Date.now() counts whole milliseconds and can step, which let a wait give
    // up a fraction of a millisecond before its limit.
    const deadline = performance.now() + limit;
    let interval = options.intervalMs ?? 500;
    for (;;) {
      const status = await this.status(options.signal);
      options.onProgress?.(status);
      if (TERMINAL.has(status.status)) {
        if (status.status === 'Succeeded') return status;
        if (status.status === 'Failed') throw new JobFailedError(status);
        throw new CompressdError('client.job_canceled', null, `job ${this.id} was canceled`);
      }
      // The last sleep is cut to the deadline and followed by one more poll, so a job that ends
      // just before it is seen and a timeout is never reported before the limit has passed.
      const left = deadline - performance.now();
      if (left <= 0) throw new CompressdError('client.timeout', null, `job ${this.id} still ${status.status} after ${limit} ms`);
      await sleep(Math.min(interval, left), options.signal);
      interval = Math.min(interval * 1.5, options.maxIntervalMs ?? 5000);
    }
  }

  /**
   * The output: to a file path (written beside it first, renamed when complete; resolves with
   * the path), into a writable stream (Node or web; resolves when written), or, with no
   * argument, as a web ReadableStream to consume yourself.
   */
  download(): Promise<ReadableStream<Uint8Array>>;
  download(target: string | NodeJS.WritableStream | WritableStream<Uint8Array>, signal?: AbortSignal): Promise<string | undefined>;
  async download(target?: string | NodeJS.WritableStream | WritableStream<Uint8Array>, signal?: AbortSignal): Promise<ReadableStream<Uint8Array> | string | undefined> {
    const res = await this.#transport.stream('GET', this.#path('/download'), signal);
    if (!res.body) throw new CompressdError('client.invalid_response', res.status, 'the download has no body', { requestId: res.headers.get('x-request-id') });
    if (target === undefined) return res.body;
    const source = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>);
    if (typeof target !== 'string') {
      await pipeline(source, target instanceof WritableStream ? Writable.fromWeb(target) : (target as NodeJS.WritableStream));
      return undefined;
    }
    const partial = `${target}.partial-${process.pid}`;
    try {
      await pipeline(source, createWriteStream(partial));
      await rename(partial, target);
    } catch (err) {
      await rm(partial, { force: true });
      if (err instanceof CompressdError) throw err;
      throw new CompressdError('client.invalid_input', null, `cannot write ${target}: ${(err as Error).message}`, { cause: err });
    }
    return target;
  }

  /** Cancels a Queued or Running job (409 jobs.not_cancellable once it has ended). */
  cancel(signal?: AbortSignal): Promise<JobStatus> {
    return this.#transport.json<JobStatus>('POST', this.#path('/cancel'), undefined, signal);
  }

  /** Deletes a finished job and its output (409 jobs.not_deletable while it runs). */
  async delete(signal?: AbortSignal): Promise<void> {
    await this.#transport.json('DELETE', this.#path(), undefined, signal);
  }
}

export class CompressdClient {
  constructor(options: ClientOptions) {
    const base = options.baseUrl.replace(/\/+$/, '');
    const apiKey = options.apiKey ?? process.env.COMPRESSD_API_KEY;
    if (!apiKey) throw new CompressdError('client.invalid_input', null, 'no API key: give apiKey or set COMPRESSD_API_KEY');
    const policy = { ...DEFAULT_RETRY, ...options.retry };
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const fetchFn = options.fetch ?? fetch;
    const call = (method: string, path: string, payload: Payload | undefined, signal: AbortSignal | undefined, headers: Record<string, string> = {}) => ({
      method,
      url: base + path,
      headers: { 'x-service-api-key': apiKey, accept: 'application/json', ...headers },
      ...(payload ? { payload } : {}),
      signal,
    });
    transports.set(this, {
      json: async <T>(method: string, path: string, payload?: Payload, signal?: AbortSignal, headers?: Record<string, string>) =>
        (await request(fetchFn, call(method, path, payload, signal, headers), policy, timeoutMs, 'json')) as T,
      stream: (method, path, signal) => request(fetchFn, call(method, path, undefined, signal), policy, timeoutMs, 'stream'),
      waitTimeoutMs: options.waitTimeoutMs ?? DEFAULT_WAIT_MS,
    });
  }

  /**
   * Submits one file (path, Blob, bytes or stream) or an HTTPS URL; resolves with its job. Every
   * attempt carries the same Idempotency-Key, so a retry after a lost answer never makes a second job.
   */
  async compress(input: CompressInput, options: CompressOptions = {}): Promise<Job> {
    const headers = { 'idempotency-key': options.idempotencyKey ?? randomUUID() };
    const accepted = await transportOf(this).json<JobAccepted>('POST', '/compress', await submission(input, options), options.signal, headers);
    return new Job(this, accepted.id, accepted);
  }

  /** A handle on a job submitted earlier. */
  job(id: string): Job {
    return new Job(this, id);
  }

  /** Credits a file of the format would cost (the base cost without a size). */
  estimate(format: string, size: { fileSizeBytes?: number; fileSizeMb?: number } = {}, signal?: AbortSignal): Promise<CostEstimate> {
    const query = new URLSearchParams();
    if (size.fileSizeBytes !== undefined) query.set('fileSizeBytes', String(size.fileSizeBytes));
    if (size.fileSizeMb !== undefined) query.set('fileSizeMb', String(size.fileSizeMb));
    return transportOf(this).json('GET', `/compress/estimate/${encodeURIComponent(format.replace(/^\./, ''))}${query.size ? `?${query}` : ''}`, undefined, signal);
  }

  /** The account's credit balance and plan limits. */
  entitlements(signal?: AbortSignal): Promise<Entitlements> {
    return transportOf(this).json('GET', '/compress/entitlements/me', undefined, signal);
  }

  /** Compressors, the format graph and limits for this key. */
  compressors(signal?: AbortSignal): Promise<Compressors> {
    return transportOf(this).json('GET', '/compress/compressors', undefined, signal);
  }
}

/** A local file as a Blob, or a CompressdError naming the path. */
async function fileBlob(path: string): Promise<Blob> {
  try {
    if (!statSync(path).isFile()) throw new Error('not a regular file');
    return await openAsBlob(path);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message;
    throw new CompressdError('client.invalid_input', null, `${path}: ${reason}`, { cause: err });
  }
}

async function submission(input: CompressInput, options: CompressOptions): Promise<Payload> {
  const webhook: Record<string, string> = {};
  if (options.webhook) {
    webhook.webhookUrl = options.webhook.url;
    webhook.webhookSecret = options.webhook.secret;
    if (options.webhook.events) webhook.webhookEvents = options.webhook.events.join(',');
  }
  const url = input instanceof URL ? input.href : typeof input === 'string' && /^https?:\/\//i.test(input) ? input : null;
  if (url !== null) {
    const json = JSON.stringify({ inputUrl: url, sourceFormat: options.sourceFormat, options: options.options, ...webhook });
    return { contentType: 'application/json', replayable: true, open: () => ({ body: json }) };
  }
  const fields = { ...(options.options === undefined ? {} : { options: JSON.stringify(options.options) }), ...webhook };
  const named = (fallback?: string) => {
    const name = options.fileName ?? fallback;
    if (!name) throw new CompressdError('client.invalid_input', null, 'an upload from bytes or a stream needs options.fileName (its extension names the format)');
    return name;
  };
  if (typeof input === 'string') return blobForm(fields, named(basename(input)), await fileBlob(input));
  if (input instanceof Blob) return blobForm(fields, named((input as File).name || undefined), input);
  if (input instanceof Uint8Array) return blobForm(fields, named(), new Blob([input as Uint8Array<ArrayBuffer>]));
  const web = input instanceof ReadableStream ? input : (Readable.toWeb(input as Readable) as unknown as ReadableStream<Uint8Array>);
  return streamForm(fields, named(), web);
}
