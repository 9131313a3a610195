import busboy from 'busboy';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { MB } from '../catalog/index.ts';
import { ApiError } from '../errors.ts';
import { insufficientStorage } from '../ops/disk.ts';
import { inIoScope } from '../ops/io-counts.ts';

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
  /**
   * Text fields whose value may come as a file part (`curl -F options=@options.json`): the part's
   * name, not its filename attribute, says what it is. A file part under any other name than
   * FILE_FIELD is skipped, as unknown fields are.
   */
  textFields?: ReadonlySet<string>;
  /** Told the file's bytes so far as they arrive; what it returns is awaited, and what it throws fails the upload. */
  received?(bytes: number): Promise<void> | undefined;
}

export function tooLarge(maxBytes: number): ApiError {
  const megabytes = Math.floor(maxBytes / MB);
  return new ApiError('request.file_too_large', 413, `The file exceeds the ${megabytes} MB limit.`, { megabytes });
}

/** The form field whose file part is the upload. */
const FILE_FIELD = 'file';
/** A text field's size limit, whether sent as a plain field or as a file part. */
const FIELD_SIZE = 64 * 1024;
/** File parts beside the upload that busboy lets through: those of `UploadRules.textFields`, read as text. */
const MAX_TEXT_FILES = 8;

const fieldTooLarge = (name: string) => new ApiError('request.invalid_body', 400, `The form field "${name}" exceeds 64 KB.`);
const multipleFiles = () => new ApiError('request.multiple_files', 400, 'Exactly one file per request.');
const malformed = (why: string) => new ApiError('request.invalid_body', 400, `Malformed multipart request: ${why}`);
const aborted = () => new ApiError('request.aborted', 400, 'The upload was interrupted.');

type ReceivedFile = NonNullable<ReceivedUpload['file']>;

/**
 * The parser for the request, or a 400 for a request it cannot be: a boundary over RFC 2046's 70
 * characters (longer ones only make the parser's search slower), or headers busboy refuses.
 */
function openParser(req: IncomingMessage, rules: UploadRules): busboy.Busboy {
  const boundary = /;\s*boundary=(?:"([^"]*)"|([^;\s]*))/i.exec(req.headers['content-type'] ?? '');
  const length = (boundary?.[1] ?? boundary?.[2] ?? '').length;
  if (length > 70) throw malformed(`the boundary has ${length} characters; at most 70 are allowed`);
  try {
    // Browsers and HTTP clients send file names as raw UTF-8 (the WHATWG form encoding), not latin1.
    return busboy({ headers: req.headers, defParamCharset: 'utf8', limits: { files: 1 + MAX_TEXT_FILES, fileSize: rules.maxBytes, fields: 32, fieldSize: FIELD_SIZE, parts: 40 } });
  } catch (err) {
    throw malformed((err as Error).message);
  }
}

/** Where the file part's bytes go: a file on disk, the caller's stream, or nowhere (only the digest is wanted). */
const sink = (path: string | Writable | null): Writable =>
  path === null ? new Writable({ write: (_chunk, _encoding, done) => done() }) : typeof path === 'string' ? createWriteStream(path, { mode: 0o600 }) : path;

/** Streams the file part into `path`, counting its bytes into `file` (and hashing them when asked) as they pass. */
async function writePart(part: Readable, path: string | Writable | null, rules: UploadRules, file: ReceivedFile): Promise<void> {
  file.path = typeof path === 'string' ? path : '';
  const hash = rules.digest ? createHash('sha256') : null;
  await pipeline(
    part,
    async function* (chunks: AsyncIterable<Buffer>) {
      for await (const chunk of chunks) {
        file.bytes += chunk.length;
        const room = rules.received?.(file.bytes);
        if (room) await room;
        hash?.update(chunk);
        yield chunk;
      }
    },
    sink(path),
  );
  if (hash) file.sha256 = hash.digest('hex');
}

/** What a failed write of the file part is answered with (`ended`: the request had ended by then). */
function writeFailure(err: unknown, ended: boolean): ApiError {
  const code = (err as NodeJS.ErrnoException).code;
  if (err instanceof ApiError) return err;
  if (code === 'ENOSPC') return insufficientStorage('The data volume is full; the upload could not be stored.');
  // The parser's own errors carry no code: the part was torn down by a malformed body.
  if (ended || code === undefined) return malformed((err as Error).message);
  return new ApiError('request.upload_failed', 400, `The upload could not be stored: ${(err as Error).message}`);
}

/**
 * One multipart request being received: the fields collected, the single file part written, and
 * the first failure kept. It settles once (`end`), and only after the file on disk is closed.
 */
class Reception {
  readonly fields: Record<string, string> = {};
  file: ReceivedUpload['file'] = null;
  private part: Readable | null = null;
  /** File parts being read as text fields (receiveText). */
  private readonly texts: Readable[] = [];
  private failure: ApiError | null = null;
  private writing: Promise<void> = Promise.resolve();
  private ended = false;
  private readonly onAbort = () => this.end(aborted());

  constructor(
    private readonly req: IncomingMessage,
    private readonly bb: busboy.Busboy,
    private readonly rules: UploadRules,
    private readonly settle: { resolve(upload: ReceivedUpload): void; reject(err: ApiError): void },
  ) {}

  /** Listens to the parser and the request, then feeds the request to the parser. */
  start(): void {
    const { bb, req } = this;
    bb.on('field', (name, value, info) => {
      if (info.valueTruncated) this.end(fieldTooLarge(name));
      else this.fields[name] = value;
    });
    // The parser's events arrive from the socket, outside the request's scope: the file's store
    // (a PutObject in cluster mode) is counted under the request's I/O path only when bound to it.
    bb.on('file', inIoScope((field: string, stream: Readable, info: { filename?: string }) => this.receivePart(field, stream, info.filename ?? '')));
    bb.on('filesLimit', () => this.fail(multipleFiles()));
    bb.on('partsLimit', () => this.fail(new ApiError('request.invalid_body', 400, 'Too many form parts.')));
    bb.on('fieldsLimit', () => this.fail(new ApiError('request.invalid_body', 400, 'Too many form fields.')));
    bb.on('error', (err: Error) => this.end(malformed(err.message)));
    bb.on('close', () => this.end());
    req.on('aborted', this.onAbort);
    req.on('error', this.onAbort);
    req.pipe(bb);
  }

  /** Keeps the first failure; the reception goes on to its end. */
  private fail(error: ApiError): void {
    this.failure ??= error;
  }

  private end(error?: ApiError): void {
    this.failure ??= error ?? null;
    if (this.ended) return;
    this.ended = true;
    this.req.off('aborted', this.onAbort);
    this.req.off('error', this.onAbort);
    this.req.unpipe(this.bb);
    // On failure a part still open (the request ended inside it) is closed so its write or read
    // settles; on success busboy has ended it and what it still buffers is written out.
    if (this.failure) for (const part of [this.part, ...this.texts]) part?.destroy();
    this.writing.then(() => (this.failure ? this.settle.reject(this.failure) : this.settle.resolve({ fields: this.fields, file: this.file })));
  }

  private receivePart(field: string, stream: Readable, fileName: string): void {
    if (field === FILE_FIELD) this.receiveFile(stream, fileName);
    else if (this.rules.textFields?.has(field)) this.receiveText(field, stream);
    else stream.on('error', () => {}).resume();
  }

  /** A file part under a text field's name: its content is that field's value (FIELD_SIZE at most). */
  private receiveText(name: string, stream: Readable): void {
    stream.on('error', () => {});
    this.texts.push(stream);
    const chunks: Buffer[] = [];
    let size = 0;
    const read = new Promise<void>((resolve) => {
      stream.on('close', resolve);
      stream.on('end', () => {
        this.fields[name] = Buffer.concat(chunks).toString('utf8');
        resolve();
      });
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        chunks.push(chunk);
        if (size > FIELD_SIZE) this.end(fieldTooLarge(name));
      });
    });
    this.writing = Promise.all([this.writing, read]).then(() => {});
  }

  private receiveFile(stream: Readable, name: string): void {
    // Parser errors (a body that ends inside the part) are also reported on the parser;
    // this listener only keeps them from being unhandled on the part.
    stream.on('error', () => {});
    if (this.file) this.fail(multipleFiles());
    if (this.ended || this.failure || this.file) {
      stream.resume();
      return;
    }
    try {
      this.rules.accept(name);
    } catch (e) {
      this.fail(e instanceof ApiError ? e : new ApiError('request.invalid_extension', 400, String(e)));
      stream.resume();
      return;
    }
    const file: ReceivedFile = { name, bytes: 0, path: '' };
    this.file = file;
    this.part = stream;
    stream.on('limit', () => this.fail(tooLarge(this.rules.maxBytes)));
    this.writing = this.rules
      .destination()
      .then((path) => {
        if (stream.destroyed) {
          if (path instanceof Writable) path.destroy();
          throw this.failure ?? aborted();
        }
        return writePart(stream, path, this.rules, file);
      })
      .catch((err) => {
        stream.resume();
        this.fail(writeFailure(err, this.ended));
      });
  }
}

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
    let bb: busboy.Busboy;
    try {
      bb = openParser(req, rules);
    } catch (err) {
      reject(err);
      return;
    }
    new Reception(req, bb, rules, { resolve, reject }).start();
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
