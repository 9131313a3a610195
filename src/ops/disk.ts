import { statfs } from 'node:fs/promises';
import { ApiError } from '../errors.ts';

/** Free space under the data dir, cached briefly so a burst of requests costs one statfs. */
export class DiskGuard {
  private cached: { at: number; free: number } | null = null;

  constructor(private readonly dir: string, readonly minFreeBytes: number) {}

  async freeBytes(): Promise<number> {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > 1000) {
      const s = await statfs(this.dir);
      this.cached = { at: now, free: s.bavail * s.bsize };
    }
    return this.cached.free;
  }

  /** Throws 503 `server.insufficient_storage` when free space is below the threshold. */
  async assertRoom(): Promise<void> {
    const free = await this.freeBytes();
    if (free < this.minFreeBytes) throw insufficientStorage(`Only ${Math.floor(free / 1048576)} MB free on the data volume; new jobs are refused until space is freed.`);
  }
}

export function insufficientStorage(detail: string): ApiError {
  return new ApiError('server.insufficient_storage', 503, detail, {}, { 'Retry-After': '60' });
}
