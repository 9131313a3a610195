import { DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { finished, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BlobKind, BlobStore, ByteRange } from '../jobs/backend.ts';
import { countIo, type IoSink } from '../ops/io-counts.ts';

export interface S3Location {
  bucket: string;
  /** Key prefix, empty or ending in `/`. */
  prefix: string;
}

/** Upload part size: the memory an upload holds per part in flight (two in flight). */
const PART_BYTES = 8 * 1024 * 1024;

/**
 * A local file up to this size is stored in one PutObject of known length. S3 servers take one PUT
 * much faster than a multipart upload of the same bytes (Swift, 20 MB on loopback: 120–180 ms
 * against 370–610 ms in 8 MB parts); a bigger file goes in parts, so that a failure costs a part.
 */
const SINGLE_PUT_BYTES = 64 * 1024 * 1024;

/**
 * A client for any S3-compatible server. Credentials, region and endpoint come from the AWS SDK's
 * standard environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL_S3);
 * path-style addressing from COMPRESSD_S3_FORCE_PATH_STYLE for servers without virtual-host buckets.
 */
export function s3ClientFromEnv(io?: IoSink): S3Client {
  const client = new S3Client({
    forcePathStyle: /^(1|true|yes)$/i.test(process.env.COMPRESSD_S3_FORCE_PATH_STYLE ?? ''),
    // Many S3-compatible servers (Swift s3api, older MinIO, Ceph) refuse the SDK's default
    // streaming checksums with 501; S3 itself needs them only where an operation requires one.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  if (io) {
    // The deserialize step runs once per HTTP request, retries included (they are made in an earlier step).
    client.middlewareStack.add(
      (next, context) => (args) => {
        const command = (context.commandName ?? 'Unknown').replace(/Command$/, '');
        countIo((path) => io.s3Request(path, command));
        return next(args);
      },
      { step: 'deserialize', name: 'compressdCountRequests' },
    );
  }
  return client;
}

function notFound(err: unknown): boolean {
  return err instanceof S3ServiceException && (err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata.httpStatusCode === 404);
}

/** Counts the bytes that pass through. */
function counter(): Transform & { bytes: number } {
  const t = new Transform({
    transform(chunk: Buffer, _enc, done) {
      t.bytes += chunk.length;
      done(null, chunk);
    },
  }) as Transform & { bytes: number };
  t.bytes = 0;
  return t;
}

/**
 * Job blobs as objects `PREFIX<jobId>/input` and `PREFIX<jobId>/output`. A stream up to 8 MB is
 * stored in one PutObject, a longer one in multipart parts (bounded memory whatever the size); a
 * local file in one PutObject up to 64 MB; deletes go one object at a time, because
 * batch DeleteObjects needs a Content-MD5 some servers insist on and the SDK no longer sends.
 */
export class S3BlobStore implements BlobStore {
  /**
   * @param orphanGraceMs `ids()` leaves out jobs whose blobs are younger than this: another node
   * may be storing an upload whose job it has not admitted yet, and recovery must not take it.
   */
  constructor(
    private readonly client: S3Client,
    private readonly at: S3Location,
    private readonly orphanGraceMs = 3600_000,
  ) {}

  private key(jobId: string, kind: BlobKind): string {
    return `${this.at.prefix}${jobId}/${kind}`;
  }

  /** Fails with the server's reason when the bucket cannot be reached with these credentials. */
  async check(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.at.bucket }));
    } catch (err) {
      const status = err instanceof S3ServiceException ? ` (HTTP ${err.$metadata.httpStatusCode})` : '';
      throw new Error(`storage s3://${this.at.bucket}: ${(err as Error).message || (err as Error).name}${status}`);
    }
  }

  async put(jobId: string, kind: BlobKind, body: Readable): Promise<number> {
    const count = counter();
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.at.bucket, Key: this.key(jobId, kind), Body: body.pipe(count) },
      partSize: PART_BYTES,
      queueSize: 2,
      leavePartsOnError: false,
    });
    // An error or an end before the last byte (a client gone mid-upload) aborts the upload.
    finished(body, (err) => err && count.destroy(err));
    try {
      await upload.done();
    } catch (err) {
      body.destroy();
      throw err;
    }
    return count.bytes;
  }

  async putFile(jobId: string, kind: BlobKind, path: string): Promise<number> {
    const { size } = await stat(path);
    if (size <= SINGLE_PUT_BYTES) {
      await this.client.send(new PutObjectCommand({ Bucket: this.at.bucket, Key: this.key(jobId, kind), Body: createReadStream(path), ContentLength: size }));
    } else await this.put(jobId, kind, createReadStream(path));
    await rm(path, { force: true });
    return size;
  }

  async get(jobId: string, kind: BlobKind, range?: ByteRange): Promise<{ body: Readable; size: number } | null> {
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.at.bucket, Key: this.key(jobId, kind), Range: range && `bytes=${range.start}-${range.end}` }),
      );
      // A ranged answer's Content-Length is the part's; the whole size is after the slash of Content-Range.
      const whole = range ? Number(res.ContentRange?.split('/')[1]) : res.ContentLength;
      return { body: res.Body as Readable, size: whole ?? 0 };
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  async localFile(jobId: string, kind: BlobKind, scratchDir: string): Promise<string | null> {
    const blob = await this.get(jobId, kind);
    if (!blob) return null;
    await mkdir(scratchDir, { recursive: true, mode: 0o700 });
    const path = join(scratchDir, `${jobId}-${kind}`);
    await pipeline(blob.body, createWriteStream(path, { mode: 0o600 }));
    return path;
  }

  async size(jobId: string, kind: BlobKind): Promise<number | null> {
    try {
      const res = await this.client.send(new HeadObjectCommand({ Bucket: this.at.bucket, Key: this.key(jobId, kind) }));
      return res.ContentLength ?? 0;
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  async delete(jobId: string): Promise<void> {
    for (const kind of ['input', 'output'] as const) {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.at.bucket, Key: this.key(jobId, kind) }));
      } catch (err) {
        if (!notFound(err)) throw err;
      }
    }
  }

  async ids(): Promise<string[]> {
    const newest = new Map<string, number>();
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.at.bucket, Prefix: this.at.prefix, ContinuationToken: token }));
      for (const o of page.Contents ?? []) {
        const slash = o.Key!.indexOf('/', this.at.prefix.length);
        if (slash < 0) continue;
        const id = o.Key!.slice(this.at.prefix.length, slash);
        newest.set(id, Math.max(newest.get(id) ?? 0, o.LastModified?.getTime() ?? Date.now()));
      }
      token = page.NextContinuationToken;
    } while (token);
    // The server's clock and its whole-second times make a comparison at zero grace meaningless.
    const before = this.orphanGraceMs > 0 ? Date.now() - this.orphanGraceMs : Infinity;
    return [...newest].filter(([, at]) => at <= before).map(([id]) => id);
  }
}
