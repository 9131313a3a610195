import { statfs } from 'node:fs/promises';
import { ApiError } from '../errors.ts';

/** Free space under the data dir, cached briefly so a burst of requests costs one statfs. */
export class DiskGuard {
  private cached: { at: number; free: number } | null = null;
  /** Bytes promised to uploads in progress in this process, not yet on disk. */
  private reserved = 0;

  constructor(private readonly dir: string, readonly minFreeBytes: number) {}

  async freeBytes(): Promise<number> {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > 1000) {
      const s = await statfs(this.dir);
      this.cached = { at: now, free: s.bavail * s.bsize };
    }
    return this.cached.free;
  }

  /**
   * Holds `bytes` of free space for a write about to start, so concurrent uploads cannot together
   * promise more than the volume has. Throws 503 `server.insufficient_storage` when free space,
   * less what earlier reservations hold, would fall below the threshold. Returns the release
   * (safe to call more than once).
   */
  async reserve(bytes: number): Promise<() => void> {
    // Taken before the await, so that of two uploads racing in, the later one sees the earlier.
    const ahead = this.reserved;
    this.reserved += bytes;
    let held = true;
    const release = () => {
      if (held) this.reserved -= bytes;
      held = false;
    };
    try {
      const room = (await this.freeBytes()) - ahead - this.minFreeBytes;
      // No figures: a client told the exact room could fill it precisely (issue 41), and rounded ones read "needs 0 MB; 0 MB are free".
      if (bytes > room) throw insufficientStorage('Not enough free disk space for this upload now; try again later.');
    } catch (err) {
      release();
      throw err;
    }
    return release;
  }
}

export function insufficientStorage(detail: string): ApiError {
  return new ApiError('server.insufficient_storage', 503, detail, {}, { 'Retry-After': '60' });
}
