import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { request, type Dispatcher } from 'undici';
import { ApiError } from '../errors.ts';
import { ConcurrencyLimit } from './account-limit.ts';
import { CircuitBreaker, type Outcome } from './circuit-breaker.ts';
import type { FetchConfig } from './config.ts';
import { DnsFailureError, EgressDeniedError, guardedDispatcher } from './egress.ts';
import { urlFetchError } from './errors.ts';
import { pickFileName } from './file-name.ts';
import { EXPIRY_STATUSES, isExpiredPresignedAnswer } from './presigned.ts';
import { unfetchableReason, validateInputUrl } from './validate-url.ts';

export { validateInputUrl } from './validate-url.ts';

export interface FetchToFileOptions {
  /** Where the body is written; removed again if the download fails. */
  destPath: string;
  /** The compressor's size cap for this account. */
  maxBytes: number;
  accountId: string;
  /** Dotless format the caller declared; decides the file name's extension. */
  sourceFormat: string;
  /** Aborts the download (e.g. the client went away); the abort reason is rethrown as is. */
  signal?: AbortSignal;
  /** Called with the remote Content-Length (null when none) before a byte of the body is written; what it throws ends the download. */
  beforeBody?(length: number | null): Promise<void>;
  /** Told the bytes written so far as they arrive; what it returns is awaited, and what it throws ends the download. */
  received?(bytes: number): Promise<void> | undefined;
}

export interface FetchedInput {
  bytes: number;
  fileName: string;
  /** The URL the body finally came from, after redirects. */
  finalUrl: string;
  contentType?: string;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/;
/** Enough of an error body to recognise an object store's "expired" answer. */
const ERROR_BODY_SNIPPET = 16 * 1024;

/**
 * Downloads URL inputs during the submit request: HTTPS only, every connection through the
 * egress guard, redirects followed by hand and re-checked, size capped while streaming, and
 * every failure answered with a spec `url_fetch.*` error carrying `isRetryable`.
 */
export class UrlFetcher {
  private readonly dispatcher: Dispatcher;
  private readonly breaker: CircuitBreaker;
  private readonly perAccount: ConcurrencyLimit;

  constructor(private readonly config: FetchConfig) {
    this.dispatcher = guardedDispatcher(config);
    this.breaker = new CircuitBreaker({
      failureThreshold: config.circuitFailureThreshold,
      windowMs: config.circuitWindowMs,
      openMs: config.circuitOpenMs,
    });
    this.perAccount = new ConcurrencyLimit(config.maxConcurrentPerAccount);
  }

  async fetchToFile(rawUrl: string, opts: FetchToFileOptions): Promise<FetchedInput> {
    const url = validateInputUrl(rawUrl);
    const release = this.perAccount.tryAcquire(opts.accountId);
    if (!release) {
      throw urlFetchError(
        'rate_limited',
        `at most ${this.config.maxConcurrentPerAccount} URL downloads may run at once per account`,
        true,
        { status: 429, headers: { 'Retry-After': String(this.config.rateLimitRetryAfterSeconds) } },
      );
    }
    const deadline = AbortSignal.timeout(this.config.totalTimeoutMs);
    const signal = opts.signal ? AbortSignal.any([deadline, opts.signal]) : deadline;
    try {
      return await this.download(url, opts, signal, deadline);
    } catch (err) {
      await rm(opts.destPath, { force: true });
      throw err;
    } finally {
      release();
    }
  }

  /** Closes pooled connections. */
  close(): Promise<void> {
    return this.dispatcher.close();
  }

  private async download(first: URL, opts: FetchToFileOptions, signal: AbortSignal, deadline: AbortSignal): Promise<FetchedInput> {
    const visited = [first];
    for (let hop = 0; ; hop++) {
      const url = visited[visited.length - 1]!;
      // One breaker entry per host however it is spelled (`Files.test.` is `files.test`).
      const host = url.hostname.replace(/\.$/, '');
      const waitMs = this.breaker.admit(host);
      if (waitMs > 0) {
        const seconds = Math.ceil(waitMs / 1000);
        throw urlFetchError('domain_circuit_open', `${host} failed repeatedly and is blocked for ${seconds} s`, true, {
          headers: { 'Retry-After': String(seconds) },
        });
      }
      let outcome: Outcome = 'neutral';
      try {
        let res: Dispatcher.ResponseData;
        try {
          res = await request(url, {
            dispatcher: this.dispatcher,
            method: 'GET',
            headers: { accept: '*/*', 'accept-encoding': 'identity', 'user-agent': 'compressd-url-fetch' },
            headersTimeout: this.config.headersTimeoutMs,
            bodyTimeout: this.config.bodyTimeoutMs,
            signal,
          });
        } catch (err) {
          const mapped = this.networkError(err, hop, url, { caller: opts.signal, deadline });
          outcome = mapped.outcome;
          throw mapped.error;
        }
        // Whoever reads the body sees its errors; until then (or if nobody does) they must not go unhandled.
        res.body.on('error', () => {});
        const status = res.statusCode;
        outcome = status >= 500 || status === 429 ? 'failure' : 'success';

        if (REDIRECT_STATUSES.has(status)) {
          discard(res.body);
          visited.push(this.nextHop(res.headers.location, url, visited, hop));
          continue;
        }
        if (status < 200 || status > 299) {
          const body = EXPIRY_STATUSES.has(status) ? await readSnippet(res.body) : (discard(res.body), '');
          if (isExpiredPresignedAnswer(status, body, url)) {
            throw urlFetchError('url_expired', `the presigned URL has expired (${host} answered ${status})`, false);
          }
          throw urlFetchError('http_error', `${host} answered HTTP ${status}`, status >= 500 || status === 429);
        }
        const fileName = pickFileName(header(res.headers['content-disposition']), [...visited].reverse(), opts.sourceFormat);
        if (!fileName) {
          discard(res.body);
          throw urlFetchError('no_filename', 'no file name in Content-Disposition or in the URL path', false);
        }
        const declared = Number(header(res.headers['content-length']));
        if (Number.isFinite(declared) && declared > opts.maxBytes) {
          discard(res.body);
          throw tooLarge(opts.maxBytes);
        }
        try {
          await opts.beforeBody?.(Number.isFinite(declared) ? declared : null);
        } catch (err) {
          discard(res.body);
          throw err;
        }
        let bytes: number;
        try {
          bytes = await streamToFile(res.body, opts);
        } catch (err) {
          if (err instanceof ApiError) throw err;
          const mapped = this.networkError(err, hop, url, { caller: opts.signal, deadline });
          outcome = mapped.outcome;
          throw mapped.error;
        }
        if (bytes === 0) throw urlFetchError('invalid_content', `${host} answered with an empty body`, false);
        const contentType = header(res.headers['content-type']);
        return { bytes, fileName, finalUrl: url.href, ...(contentType ? { contentType } : {}) };
      } finally {
        this.breaker.record(host, outcome);
      }
    }
  }

  private nextHop(location: string | string[] | undefined, from: URL, visited: URL[], hop: number): URL {
    const loc = header(location);
    if (!loc) throw urlFetchError('http_error', `${from.hostname} answered a redirect without a Location`, false);
    if (hop + 1 > this.config.maxRedirects) {
      throw urlFetchError('redirect_loop', `more than ${this.config.maxRedirects} redirects`, false);
    }
    let next: URL;
    try {
      next = new URL(loc, from);
    } catch {
      throw urlFetchError('redirect_denied', 'redirect Location is not a valid URL', false);
    }
    const reason = unfetchableReason(next);
    if (reason) throw urlFetchError('redirect_denied', `redirect target ${reason}`, false);
    if (visited.some((v) => v.href === next.href)) throw urlFetchError('redirect_loop', 'redirect chain loops', false);
    return next;
  }

  /** Maps a transport failure to its spec error and to what it says about the host's health. */
  private networkError(
    err: unknown,
    hop: number,
    url: URL,
    { caller, deadline }: { caller: AbortSignal | undefined; deadline: AbortSignal },
  ): { error: unknown; outcome: Outcome } {
    const host = url.hostname;
    if (caller?.aborted) return { error: caller.reason, outcome: 'neutral' };
    if (err instanceof EgressDeniedError) {
      const error =
        hop === 0
          ? urlFetchError('private_ip', `${host} is or resolves to a private or reserved address`, false)
          : urlFetchError('redirect_denied', `redirect target ${host} is or resolves to a private or reserved address`, false);
      return { error, outcome: 'neutral' };
    }
    if (err instanceof DnsFailureError) {
      return { error: urlFetchError('dns_failure', `could not resolve ${host}`, err.transient), outcome: 'failure' };
    }
    const code = (err as { code?: unknown }).code;
    if (deadline.aborted || (typeof code === 'string' && TIMEOUT_CODES.has(code))) {
      return { error: urlFetchError('timeout', `${host} was too slow to answer`, true), outcome: 'failure' };
    }
    if (typeof code === 'string' && TLS_CODE.test(code)) {
      return { error: urlFetchError('http_error', `TLS with ${host} failed (${code})`, false), outcome: 'failure' };
    }
    if (typeof code === 'string') {
      return { error: urlFetchError('http_error', `connection to ${host} failed (${code})`, true), outcome: 'failure' };
    }
    return { error: err, outcome: 'neutral' };
  }
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Drops a body we will not read; undici reports that as an abort error nobody needs to hear. */
function discard(body: Readable): void {
  body.on('error', () => {});
  body.destroy();
}

function tooLarge(maxBytes: number): ApiError {
  return urlFetchError('too_large', `the remote file exceeds the size limit of ${maxBytes} bytes`, false);
}

async function streamToFile(body: Readable, opts: FetchToFileOptions): Promise<number> {
  let bytes = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > opts.maxBytes) return done(tooLarge(opts.maxBytes));
      try {
        const room = opts.received?.(bytes);
        if (room) room.then(() => done(null, chunk), done);
        else done(null, chunk);
      } catch (err) {
        done(err as Error);
      }
    },
  });
  await pipeline(body, cap, createWriteStream(opts.destPath, { mode: 0o600 }));
  return bytes;
}

async function readSnippet(body: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= ERROR_BODY_SNIPPET) break;
    }
  } catch {
    // The error body is only a hint; the status alone still gives a sound answer.
  } finally {
    discard(body);
  }
  return Buffer.concat(chunks).subarray(0, ERROR_BODY_SNIPPET).toString('utf8');
}
