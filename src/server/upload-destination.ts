import { PassThrough, type Writable } from 'node:stream';
import { MB } from '../catalog/index.ts';
import type { BlobStore } from '../jobs/backend.ts';
import type { Spool } from '../jobs/spool.ts';

/**
 * An upload whose request declares at most this length goes into the blob store as it arrives
 * (in cluster mode one PutObject from memory, the node's disk untouched); a longer one, or one of
 * unknown length, is spooled first, so that the store gets a file of known length (in cluster mode
 * one PutObject as well, where streaming would take a multipart upload, several times slower).
 */
export const STREAMED_UPLOAD_BYTES = 8 * MB;

/** Where one submission's input goes on its way into the blob store, and its removal when the submission fails. */
export class UploadDestination {
  private readonly streamed: boolean;
  /** A streamed upload's way into the blob store, once its file part begins. */
  private storing: Promise<number> | undefined;
  private storeFailure: unknown;

  constructor(
    private readonly store: { blobs: BlobStore; spool: Spool },
    private readonly jobId: string,
    contentLength: string | undefined,
  ) {
    this.streamed = Number(contentLength ?? Infinity) <= STREAMED_UPLOAD_BYTES;
  }

  /** The file part's destination (`UploadRules.destination`): the blob store's stream, or a spool file. */
  async open(): Promise<string | Writable> {
    if (!this.streamed) return this.store.spool.prepare(this.jobId);
    const body = new PassThrough();
    this.storing = this.store.blobs.put(this.jobId, 'input', body);
    this.storing.catch((err) => {
      if (body.destroyed) return;
      this.storeFailure = err;
      body.destroy(err);
    });
    return body;
  }

  /** What a failed receive is answered with: the store's own failure (storage unreachable) is not the client's; a full disk is already told as such. */
  blame(err: unknown): unknown {
    return this.storeFailure === undefined || (this.storeFailure as NodeJS.ErrnoException).code === 'ENOSPC' ? err : this.storeFailure;
  }

  /** The input's size once it is durable in the blob store (`spooled`: where `open` wrote a spooled file). */
  stored(spooled: string): Promise<number> {
    return this.streamed ? this.storing! : this.store.blobs.putFile(this.jobId, 'input', spooled);
  }

  /** Removes whatever of the input was kept (the spool file of a URL download as well). */
  async discard(): Promise<void> {
    // An upload still on its way must land (or fail) before its blob is deleted, or it would outlive the delete.
    await this.storing?.catch(() => {});
    await Promise.all([this.store.spool.discard(this.jobId), this.store.blobs.delete(this.jobId)]);
  }
}
