import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

export const SAFE_ID = /^[A-Za-z0-9-]+$/;

/** `<root>/<job>`; paths come from job ids only, never from client file names. */
export function jobDir(root: string, id: string): string {
  if (!SAFE_ID.test(id)) throw new Error(`unsafe job id: ${id}`);
  return join(root, id);
}

/**
 * A node's scratch space for one job: where an upload or URL download lands before it becomes the
 * job's input blob, and where a compressor writes before its output becomes the output blob.
 */
export interface Spool {
  /** Creates the job's scratch directory; resolves the path an input is to be written to. */
  prepare(id: string): Promise<string>;
  /** The job's scratch directory (where copies of blobs are made when the blobs are elsewhere). */
  dir(id: string): string;
  /** The directory a compressor writes into (emptied before each attempt). */
  outputDir(id: string): string;
  /** Deletes the job's scratch files (not its blobs). */
  discard(id: string): Promise<void>;
  /** Deletes copies of the job's blobs made in its scratch (`BlobStore.localFile`) for a reader other than its runner. */
  discardCopies(id: string): Promise<void>;
}

/**
 * Scratch under `<root>/<job>/`. With the files backend the root is the blob store's own, so the
 * scratch input already is the input blob and the output is one rename away from its blob.
 */
export class LocalSpool implements Spool {
  constructor(readonly root: string) {}

  async prepare(id: string): Promise<string> {
    await mkdir(this.dir(id), { recursive: true, mode: 0o700 });
    return join(this.dir(id), 'input');
  }

  dir(id: string): string {
    return jobDir(this.root, id);
  }

  outputDir(id: string): string {
    return join(this.dir(id), 'out');
  }

  async discard(id: string): Promise<void> {
    await rm(this.outputDir(id), { recursive: true, force: true });
  }

  /** None are made: the blobs are files here. */
  async discardCopies(_id: string): Promise<void> {}
}

/**
 * Scratch of a node whose blobs live elsewhere (cluster mode): once a job's files are stored or
 * read, nothing of it stays on this node's disk.
 */
export class ScratchSpool extends LocalSpool {
  override async discard(id: string): Promise<void> {
    await rm(this.dir(id), { recursive: true, force: true });
  }

  override discardCopies(id: string): Promise<void> {
    return this.discard(id);
  }
}
