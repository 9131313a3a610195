import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { systemClock, type Clock } from '../../clock.ts';
import type { BlobKind, BlobStore, ByteRange } from '../backend.ts';
import { jobDir, SAFE_ID } from '../spool.ts';

/**
 * The files backend's blobs: `spool/<job>/input` and `spool/<job>/output` in the data dir, beside
 * the node's scratch for the same job (`LocalSpool`), so storing a scratch file is a rename.
 */
export class LocalBlobStore implements BlobStore {
  /**
   * @param orphanGraceMs `ids()` leaves out jobs whose files are younger than this: on a directory
   * shared by several nodes, another node may be storing an upload it has not admitted yet.
   * @param clock What their age is measured by (default: the system clock, as the files' times are).
   */
  constructor(
    readonly root: string,
    private readonly orphanGraceMs = 0,
    private readonly clock: Clock = systemClock,
  ) {}

  private path(jobId: string, kind: BlobKind): string {
    return join(jobDir(this.root, jobId), kind);
  }

  async put(jobId: string, kind: BlobKind, body: Readable): Promise<number> {
    await mkdir(jobDir(this.root, jobId), { recursive: true, mode: 0o700 });
    await pipeline(body, createWriteStream(this.path(jobId, kind), { mode: 0o600 }));
    return (await stat(this.path(jobId, kind))).size;
  }

  async putFile(jobId: string, kind: BlobKind, path: string): Promise<number> {
    const target = this.path(jobId, kind);
    if (path !== target) {
      await mkdir(jobDir(this.root, jobId), { recursive: true, mode: 0o700 });
      try {
        await rename(path, target);
      } catch (err) {
        // A shared directory on another file system than this node's scratch.
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
        await this.put(jobId, kind, createReadStream(path));
        await rm(path, { force: true });
      }
    }
    return (await stat(target)).size;
  }

  async get(jobId: string, kind: BlobKind, range?: ByteRange): Promise<{ body: Readable; size: number } | null> {
    const path = await this.localFile(jobId, kind);
    if (!path) return null;
    const size = await this.size(jobId, kind);
    return size === null ? null : { body: createReadStream(path, range), size };
  }

  async localFile(jobId: string, kind: BlobKind): Promise<string | null> {
    const path = this.path(jobId, kind);
    try {
      await stat(path);
      return path;
    } catch {
      return kind === 'output' ? this.legacyOutput(jobId) : null;
    }
  }

  async size(jobId: string, kind: BlobKind): Promise<number | null> {
    const path = await this.localFile(jobId, kind);
    if (!path) return null;
    try {
      return (await stat(path)).size;
    } catch {
      return null;
    }
  }

  async delete(jobId: string): Promise<void> {
    await rm(jobDir(this.root, jobId), { recursive: true, force: true });
  }

  async ids(): Promise<string[]> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    const ids = (await readdir(this.root)).filter((n) => SAFE_ID.test(n));
    if (this.orphanGraceMs === 0) return ids;
    const before = this.clock().getTime() - this.orphanGraceMs;
    const old = await Promise.all(ids.map(async (id) => (await stat(jobDir(this.root, id)).catch(() => null))?.mtimeMs ?? Infinity));
    return ids.filter((_, i) => old[i]! <= before);
  }

  /** Outputs finished before blobs had fixed names stayed in the job's scratch `out/` directory. */
  private async legacyOutput(jobId: string): Promise<string | null> {
    const dir = join(jobDir(this.root, jobId), 'out');
    try {
      const names = await readdir(dir);
      return names.length === 1 ? join(dir, names[0]!) : null;
    } catch {
      return null;
    }
  }
}
