import busboy from 'busboy';
import { createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { MB } from '../catalog/index.ts';
import { ApiError } from '../errors.ts';
import { insufficientStorage } from '../ops/disk.ts';

export interface ReceivedUpload {
  fields: Record<string, string>;
  file: { name: string; bytes: number; path: string } | null;
}

export interface UploadRules {
  maxBytes: number;
  /** Called with the client's file name before any byte is stored; throws to refuse it. */
  accept(fileName: string): void;
  /** Where to store the file (created on demand, so a refused upload leaves nothing). */
  destination(): Promise<string>;
}

export function tooLarge(maxBytes: number): ApiError {
  const megabytes = Math.floor(maxBytes / MB);
  return new ApiError('request.file_too_large', 413, `The file exceeds the ${megabytes} MB limit.`, { megabytes });
}

/**
 * Streams a multipart/form-data request: the single file goes straight to disk with the
 * size limit enforced while it streams; fields are collected. The whole request is read
 * (refused parts are drained) so the client always gets the answer.
 */
export function receiveMultipart(req: IncomingMessage, rules: UploadRules): Promise<ReceivedUpload> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { files: 1, fileSize: rules.maxBytes, fields: 32, fieldSize: 64 * 1024, parts: 40 } });
    } catch (err) {
      reject(new ApiError('request.invalid_body', 400, `Malformed multipart request: ${(err as Error).message}`));
      return;
    }
    const fields: Record<string, string> = {};
    let file: ReceivedUpload['file'] = null;
    let failure: ApiError | null = null;
    let writing: Promise<void> = Promise.resolve();
    const fail = (e: ApiError) => {
      failure ??= e;
    };

    bb.on('field', (name, value) => {
      fields[name] = value;
    });
    bb.on('file', (_field, stream, info) => {
      if (failure || file) {
        stream.resume();
        return;
      }
      try {
        rules.accept(info.filename ?? '');
      } catch (e) {
        fail(e instanceof ApiError ? e : new ApiError('request.invalid_extension', 400, String(e)));
        stream.resume();
        return;
      }
      const received = { name: info.filename ?? '', bytes: 0, path: '' };
      file = received;
      stream.on('limit', () => fail(tooLarge(rules.maxBytes)));
      writing = rules
        .destination()
        .then(async (path) => {
          received.path = path;
          await pipeline(stream, createWriteStream(path));
          received.bytes = (await stat(path)).size;
        })
        .catch((err) => {
          stream.resume();
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') fail(insufficientStorage('The data volume is full; the upload could not be stored.'));
          else fail(err instanceof ApiError ? err : new ApiError('request.upload_failed', 400, `The upload could not be stored: ${(err as Error).message}`));
        });
    });
    bb.on('filesLimit', () => fail(new ApiError('request.multiple_files', 400, 'Exactly one file per request.')));
    bb.on('partsLimit', () => fail(new ApiError('request.invalid_body', 400, 'Too many form parts.')));
    bb.on('fieldsLimit', () => fail(new ApiError('request.invalid_body', 400, 'Too many form fields.')));
    bb.on('error', (err: Error) => {
      req.unpipe(bb);
      req.resume();
      writing.finally(() => reject(failure ?? new ApiError('request.invalid_body', 400, `Malformed multipart request: ${err.message}`)));
    });
    bb.on('close', () => {
      writing.then(() => (failure ? reject(failure) : resolve({ fields, file })));
    });
    req.on('aborted', () => reject(new ApiError('request.aborted', 400, 'The upload was interrupted.')));
    req.pipe(bb);
  });
}

/** Reads a JSON request body of at most `limit` bytes. */
export async function receiveJson(req: IncomingMessage, limit = 1024 * 1024): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new ApiError('request.invalid_body', 400, `The JSON body exceeds ${limit} bytes.`);
    chunks.push(chunk as Buffer);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new ApiError('request.invalid_body', 400, 'The body is not valid JSON.');
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new ApiError('request.invalid_body', 400, 'The JSON body must be an object.');
  return body as Record<string, unknown>;
}
