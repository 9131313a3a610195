import { createWriteStream, openAsBlob } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { basename } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CompressdError, JobFailedError } from './errors.ts';
import { DEFAULT_RETRY, request, sleep, type RetryPolicy } from './http.ts';
import { streamingForm } from './multipart.ts';
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
  apiKey: string;
  retry?: Partial<RetryPolicy>;
  /** A fetch of your own (a proxy agent, say); the global one by default. */
  fetch?: typeof fetch;
}

/**
 * What compress() sends. A string is a file path, or an input URL when it starts with `https://`
 * (also a URL object); a Blob/File, bytes or a stream (web or Node) is uploaded as it is: bytes
 * and streams need `fileName`, whose extension names the format.
 */
export type CompressInput = string | URL | Blob | Uint8Array | ReadableStream<Uint8Array> | NodeJS.ReadableStream;

export interface CompressOptions {
  /** The compressor's options (resize, PNG mode…), as the schema at /compress/schema gives them. */
  options?: CompressOptionsObject;
  /** Name (with extension) of an upload given as bytes or a stream; overrides a File's name. */
  fileName?: string;
  /** Format of URL input (`jpg`, `pdf`…), required by the API with inputUrl. */
  sourceFormat?: string;
  webhook?: { url: string; secret: string; events?: ('succeeded' | 'failed')[] };
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** Give up after this long (client.timeout); none by default. */
  timeoutMs?: number;
  /** First poll delay (default 500 ms); it grows by half each poll up to maxIntervalMs (5 s). */
  intervalMs?: number;
  maxIntervalMs?: number;
  onProgress?: (status: JobStatus) => void;
  signal?: AbortSignal;
}

const TERMINAL = new Set(['Succeeded', 'Failed', 'Canceled']);

/** A submitted job. Created by compress(), or by job(id) for one submitted earlier. */
export class Job {
  constructor(
    private readonly client: CompressdClient,
    readonly id: string,
    /** The 202 answer, when this handle came from compress(). */
    readonly accepted: JobAccepted | null = null,
  ) {}

  private path(suffix = '') {
    return `/compress/job/${encodeURIComponent(this.id)}${suffix}`;
  }

  status(signal?: AbortSignal): Promise<JobStatus> {
    return this.client.json<JobStatus>('GET', this.path(), undefined, signal);
  }

  /**
   * Polls until the job ends, with a growing interval; 429 answers wait their Retry-After and
   * 5xx answers back off (1, 2, 4 … 30 s). Resolves with the Succeeded status; rejects with
   * JobFailedError (the job's error code) when it Failed, client.job_canceled when Canceled.
   */
  async wait(options: WaitOptions = {}): Promise<JobStatus> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    let interval = options.intervalMs ?? 500;
    for (;;) {
      const status = await this.status(options.signal);
      options.onProgress?.(status);
      if (TERMINAL.has(status.status)) {
        if (status.status === 'Succeeded') return status;
        if (status.status === 'Failed') throw new JobFailedError(status.error?.code ?? 'server.internal_error', status.error?.detail ?? null, status);
        throw new CompressdError('client.job_canceled', null, `job ${this.id} was canceled`);
      }
      if (Date.now() + interval > deadline) throw new CompressdError('client.timeout', null, `job ${this.id} still ${status.status} after ${options.timeoutMs} ms`);
      await sleep(interval, options.signal);
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
    const res = await this.client.send('GET', this.path('/download'), undefined, signal);
    if (!res.body) throw new CompressdError('client.invalid_response', res.status, 'the download has no body');
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
      throw err;
    }
    return target;
  }

  /** Cancels a Queued or Running job (409 jobs.not_cancellable once it has ended). */
  cancel(signal?: AbortSignal): Promise<JobStatus> {
    return this.client.json<JobStatus>('POST', this.path('/cancel'), undefined, signal);
  }

  /** Deletes a finished job and its output (409 jobs.not_deletable while it runs). */
  async delete(signal?: AbortSignal): Promise<void> {
    await this.client.json('DELETE', this.path(), undefined, signal);
  }
}

type Body = { make(): { body: RequestInit['body']; contentType?: string; duplex?: boolean }; replayable: boolean };

export class CompressdClient {
  private readonly base: string;
  private readonly policy: RetryPolicy;
  private readonly fetchFn: typeof fetch;

  constructor(private readonly options: ClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.policy = { ...DEFAULT_RETRY, ...options.retry };
    this.fetchFn = options.fetch ?? fetch;
  }

  /** @internal One call with the retry policy; non-2xx answers become CompressdError. */
  send(method: string, path: string, body?: Body, signal?: AbortSignal): Promise<Response> {
    return request(
      this.fetchFn,
      this.base + path,
      () => {
        const made = body?.make();
        const headers: Record<string, string> = { 'x-service-api-key': this.options.apiKey, accept: 'application/json' };
        if (made?.contentType) headers['content-type'] = made.contentType;
        return { method, headers, body: made?.body, replayable: body?.replayable ?? true, ...(made?.duplex ? { duplex: 'half' } : {}) } as RequestInit & { replayable: boolean };
      },
      this.policy,
      signal,
    );
  }

  /** @internal */
  async json<T>(method: string, path: string, body?: Body, signal?: AbortSignal): Promise<T> {
    const res = await this.send(method, path, body, signal);
    try {
      return (await res.json()) as T;
    } catch {
      throw new CompressdError('client.invalid_response', res.status, `${method} ${path} did not answer JSON`);
    }
  }

  /** Submits one file (path, Blob, bytes or stream) or an HTTPS URL; resolves with its job. */
  async compress(input: CompressInput, options: CompressOptions = {}): Promise<Job> {
    const accepted = await this.json<JobAccepted>('POST', '/compress', await this.submission(input, options), options.signal);
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
    return this.json('GET', `/compress/estimate/${encodeURIComponent(format.replace(/^\./, ''))}${query.size ? `?${query}` : ''}`, undefined, signal);
  }

  /** The account's credit balance and plan limits. */
  entitlements(signal?: AbortSignal): Promise<Entitlements> {
    return this.json('GET', '/compress/entitlements/me', undefined, signal);
  }

  /** Compressors, the format graph and limits for this key. */
  compressors(signal?: AbortSignal): Promise<Compressors> {
    return this.json('GET', '/compress/compressors', undefined, signal);
  }

  private async submission(input: CompressInput, options: CompressOptions): Promise<Body> {
    const webhook: Record<string, string> = {};
    if (options.webhook) {
      webhook.webhookUrl = options.webhook.url;
      webhook.webhookSecret = options.webhook.secret;
      if (options.webhook.events) webhook.webhookEvents = options.webhook.events.join(',');
    }
    const url = input instanceof URL ? input.href : typeof input === 'string' && /^https?:\/\//i.test(input) ? input : null;
    if (url !== null) {
      const json = JSON.stringify({ inputUrl: url, sourceFormat: options.sourceFormat, options: options.options, ...webhook });
      return { replayable: true, make: () => ({ body: json, contentType: 'application/json' }) };
    }
    const fields = { ...(options.options === undefined ? {} : { options: JSON.stringify(options.options) }), ...webhook };
    const named = (fallback?: string) => {
      const name = options.fileName ?? fallback;
      if (!name) throw new CompressdError('client.invalid_input', null, 'an upload from bytes or a stream needs options.fileName (its extension names the format)');
      return name;
    };
    let blob: Blob;
    let fileName: string;
    if (typeof input === 'string') {
      blob = await openAsBlob(input);
      fileName = named(basename(input));
    } else if (input instanceof Blob) {
      blob = input;
      fileName = named((input as File).name || undefined);
    } else if (input instanceof Uint8Array) {
      blob = new Blob([input as Uint8Array<ArrayBuffer>]);
      fileName = named();
    } else {
      fileName = named();
      const web = input instanceof ReadableStream ? input : (Readable.toWeb(input as Readable) as unknown as ReadableStream<Uint8Array>);
      const { body, contentType } = streamingForm(fields, fileName, web);
      return { replayable: false, make: () => ({ body, contentType, duplex: true }) };
    }
    return {
      replayable: true,
      make: () => {
        const form = new FormData();
        for (const [k, v] of Object.entries(fields)) form.set(k, v);
        form.set('file', blob, fileName);
        return { body: form };
      },
    };
  }
}
