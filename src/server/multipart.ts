import busboy from 'busboy';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { MB } from '../catalog/index.ts';
import { ApiError } from '../errors.ts';
import { insufficientStorage } from '../ops/disk.ts';

export interface ReceivedUpload {
  fields: Record<string, string>;
  /**
   * `path`: where the file was written ('' when `destination` gave a stream or nothing). `sha256`:
   * hex digest of the file's bytes, when `UploadRules.digest` asked for it.
   */
  file: { name: string; bytes: number; path: string; sha256?: string } | null;
}

export interface UploadRules {
  maxBytes: number;
  /** Called with the client's file name before any byte is stored; throws to refuse it. */
  accept(fileName: string): void;
  /**
   * Where to store the file (created on demand, so a refused upload leaves nothing): a path, or a
   * stream that stores it elsewhere (an error it raises fails the upload); null keeps nothing (only
   * the digest is wanted).
   */
  destination(): Promise<string | Writable | null>;
  /** Hash the file's bytes (sha256) as they stream. */
  digest?: boolean;
  /** Told the file's bytes so far as they arrive; what it returns is awaited, and what it throws fails the upload. */
  received?(bytes: number): Promise<void> | undefined;
}

export function tooLarge(maxBytes: number): ApiError {
  const megabytes = Math.floor(maxBytes / MB);
  return new ApiError('request.file_too_large', 413, `The file exceeds the ${megabytes} MB limit.`, { megabytes });
}

const malformed = (why: string) => new ApiError('request.invalid_body', 400, `Malformed multipart request: ${why}`);
const aborted = () => new ApiError('request.aborted', 400, 'The upload was interrupted.');

/**
 * Streams a multipart/form-data request: the single file goes straight to disk with the
 * size limit enforced while it streams; fields are collected.
 *
 * Every stream involved (the request, the parser, the file part, the file on disk) has an
 * error listener from the moment it exists, and the promise settles only once the file on
 * disk is closed, so a caller that removes it on failure really leaves nothing behind.
 * A refused request stops being read; the HTTP layer drains what is left after the answer.
 */
export function receiveMultipart(req: IncomingMessage, rules: UploadRules): Promise<ReceivedUpload> {
  return new Promise((resolve, reject) => {
    // RFC 2046 caps a boundary at 70 characters; longer ones only make the parser's search slower.
    const boundary = /;\s*boundary=(?:"([^"]*)"|([^;\s]*))/i.exec(req.headers['content-type'] ?? '');
    const length = (boundary?.[1] ?? boundary?.[2] ?? '').length;
    if (length > 70) {
      reject(malformed(`the boundary has ${length} characters; at most 70 are allowed`));
      return;
    }
    let bb: busboy.Busboy;
    try {
      // Browsers and HTTP clients send file names as raw UTF-8 (the WHATWG form encoding), not latin1.
      bb = busboy({ headers: req.headers, defParamCharset: 'utf8', limits: { files: 1, fileSize: rules.maxBytes, fields: 32, fieldSize: 64 * 1024, parts: 40 } });
    } catch (err) {
      reject(malformed((err as Error).message));
      return;
    }
    const fields: Record<string, string> = {};
    let file: ReceivedUpload['file'] = null;
    let part: Readable | null = null;
    let failure: ApiError | null = null;
    let writing: Promise<void> = Promise.resolve();
    let ended = false;

    const end = (error?: ApiError) => {
      failure ??= error ?? null;
      if (ended) return;
      ended = true;
      req.off('aborted', onAborted);
      req.off('error', onRequestError);
      req.unpipe(bb);
      // On failure a file part still open (the request ended inside it) is closed so its write
      // settles; on success busboy has ended it and what it still buffers is written out.
      if (failure) part?.destroy();
      writing.then(() => (failure ? reject(failure) : resolve({ fields, file })));
    };
    const onAborted = () => end(aborted());
    const onRequestError = () => end(aborted());

    bb.on('field', (name, value, info) => {
      if (info.valueTruncated) end(new ApiError('request.invalid_body', 400, `The form field "${name}" exceeds 64 KB.`));
      else fields[name] = value;
    });
    bb.on('file', (_field, stream, info) => {
      // Parser errors (a body that ends inside the part) are also reported on the parser;
      // this listener only keeps them from being unhandled on the part.
      stream.on('error', () => {});
      if (ended || failure || file) {
        stream.resume();
        return;
      }
      try {
        rules.accept(info.filename ?? '');
      } catch (e) {
        failure ??= e instanceof ApiError ? e : new ApiError('request.invalid_extension', 400, String(e));
        stream.resume();
        return;
      }
      const received: NonNullable<ReceivedUpload['file']> = { name: info.filename ?? '', bytes: 0, path: '' };
      file = received;
      part = stream;
      stream.on('limit', () => (failure ??= tooLarge(rules.maxBytes)));
      writing = rules
        .destination()
        .then(async (path) => {
          if (stream.destroyed) {
            if (path instanceof Writable) path.destroy();
            throw failure ?? aborted();
          }
          received.path = typeof path === 'string' ? path : '';
          const hash = rules.digest ? createHash('sha256') : null;
          await pipeline(
            stream,
            async function* (chunks: AsyncIterable<Buffer>) {
              for await (const chunk of chunks) {
                received.bytes += chunk.length;
                const room = rules.received?.(received.bytes);
                if (room) await room;
                hash?.update(chunk);
                yield chunk;
              }
            },
            path === null ? new Writable({ write: (_chunk, _encoding, done) => done() }) : typeof path === 'string' ? createWriteStream(path, { mode: 0o600 }) : path,
          );
          if (hash) received.sha256 = hash.digest('hex');
        })
        .catch((err) => {
          stream.resume();
          const code = (err as NodeJS.ErrnoException).code;
          if (err instanceof ApiError) failure ??= err;
          else if (code === 'ENOSPC') failure ??= insufficientStorage('The data volume is full; the upload could not be stored.');
          // The parser's own errors carry no code: the part was torn down by a malformed body.
          else if (ended || code === undefined) failure ??= malformed((err as Error).message);
          else failure ??= new ApiError('request.upload_failed', 400, `The upload could not be stored: ${(err as Error).message}`);
        });
    });
    bb.on('filesLimit', () => (failure ??= new ApiError('request.multiple_files', 400, 'Exactly one file per request.')));
    bb.on('partsLimit', () => (failure ??= new ApiError('request.invalid_body', 400, 'Too many form parts.')));
    bb.on('fieldsLimit', () => (failure ??= new ApiError('request.invalid_body', 400, 'Too many form fields.')));
    bb.on('error', (err: Error) => end(malformed(err.message)));
    bb.on('close', () => end());
    req.on('aborted', onAborted);
    req.on('error', onRequestError);
    req.pipe(bb);
  });
}

/**
 * Reads a JSON request body of at most `limit` bytes. Past the limit the request stops being
 * read (the HTTP layer drains the rest after the answer) instead of being destroyed, so the
 * client still gets its 400.
 */
export async function receiveJson(req: IncomingMessage, limit = 1024 * 1024): Promise<Record<string, unknown>> {
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (err: ApiError | null) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
      if (err) {
        req.pause();
        reject(err);
      } else resolve(Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) stop(new ApiError('request.invalid_body', 400, `The JSON body exceeds ${limit} bytes.`));
      else chunks.push(chunk);
    };
    const onEnd = () => stop(null);
    const onAborted = () => stop(new ApiError('request.aborted', 400, 'The request body was interrupted.'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('aborted', onAborted);
    req.on('error', onAborted);
  });
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError('request.invalid_body', 400, 'The body is not valid JSON.');
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new ApiError('request.invalid_body', 400, 'The JSON body must be an object.');
  return body as Record<string, unknown>;
}
