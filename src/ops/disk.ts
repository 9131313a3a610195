import { statfs } from 'node:fs/promises';
import { ApiError } from '../errors.ts';

/**
 * How far ahead of its bytes a write holds free space: an upload takes the space it needs in steps
 * of this size as its bytes arrive, never its whole declared length up front, so an upload that
 * stalls holds one step, not a gigabyte (issue 41).
 */
export const RESERVATION_STEP_BYTES = 8 * 1024 * 1024;

/** Free space promised to one write (an upload, a URL download) that is not on disk yet. */
export interface Reservation {
  /**
   * `received` bytes of the write are on disk (where free space counts them, so the hold no longer
   * does); when less than half a step is held ahead of them, another step is covered, up to `limit`.
   */
  advance(received: number): Promise<void> | undefined;
  /** Gives back what is held (safe to call more than once). */
  release(): void;
}

/**
 * Free space under the data dir (cached briefly so a burst of requests costs one statfs) and what
 * writes in progress in this process have been promised of it: by all of them together at most the
 * room above `minFreeBytes`, by one account's at most `accountShare` of that room.
 */
export class DiskGuard {
  private cached: { at: number; free: number } | null = null;
  /** Bytes promised to writes in progress and not on disk yet, in all and per account. */
  private held = 0;
  private readonly heldBy = new Map<string, number>();

  constructor(
    private readonly dir: string,
    readonly minFreeBytes: number,
    private readonly accountShare = 1,
  ) {}

  async freeBytes(): Promise<number> {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > 1000) {
      const s = await statfs(this.dir);
      this.cached = { at: now, free: s.bavail * s.bsize };
    }
    return this.cached.free;
  }

  /**
   * Opens a reservation for a write of `account` that may grow to `limit` bytes: 503 at once when
   * `expected` bytes (its declared length) would not fit in the room other writes leave, else the
   * first `first` bytes are held (503 when the volume, or the account's share of it, has no room
   * for them; so also for each later step).
   */
  async reserve(account: string, o: { first: number; expected: number; limit: number }): Promise<Reservation> {
    let covered = 0;
    let landed = 0;
    let open = true;
    const take = (bytes: number) => {
      this.held += bytes;
      this.heldBy.set(account, (this.heldBy.get(account) ?? 0) + bytes);
    };
    const give = (bytes: number) => {
      this.held -= bytes;
      const left = (this.heldBy.get(account) ?? 0) - bytes;
      if (left > 0) this.heldBy.set(account, left);
      else this.heldBy.delete(account);
    };
    const ahead = () => Math.max(0, covered - landed);
    /** Makes the hold cover `total` bytes of the write in all (nothing when it already does). */
    const cover = async (total: number) => {
      if (!open || total <= covered) return;
      // Taken before the await, so that of two writes racing in, each sees the other.
      const before = ahead();
      covered = total;
      take(ahead() - before);
      try {
        await this.check(account);
      } catch (err) {
        reservation.release();
        throw err;
      }
    };
    const reservation: Reservation = {
      advance: (received) => {
        if (!open) return undefined;
        const before = ahead();
        landed = Math.max(landed, received);
        give(before - ahead());
        if (covered >= o.limit || covered - landed >= RESERVATION_STEP_BYTES / 2) return undefined;
        return cover(Math.min(o.limit, landed + RESERVATION_STEP_BYTES));
      },
      release: () => {
        if (open) give(ahead());
        open = false;
      },
    };
    try {
      const room = (await this.freeBytes()) - this.held - this.minFreeBytes;
      if (o.expected > room) throw notEnoughRoom();
      await cover(o.first);
    } catch (err) {
      reservation.release();
      throw err;
    }
    return reservation;
  }

  /** Throws 503 unless what is held fits in the room, and what `account` holds in its share of it. */
  private async check(account: string): Promise<void> {
    const room = (await this.freeBytes()) - this.minFreeBytes;
    // No figures: a client told the exact room could fill it precisely (issue 41), and rounded ones read "needs 0 MB; 0 MB are free".
    if (this.held > room) throw notEnoughRoom();
    if ((this.heldBy.get(account) ?? 0) > Math.max(0, room) * this.accountShare) {
      throw insufficientStorage("This account's uploads in progress hold their share of the free disk space; try again when one has ended.");
    }
  }
}

const notEnoughRoom = () => insufficientStorage('Not enough free disk space for this upload now; try again later.');

export function insufficientStorage(detail: string): ApiError {
  return new ApiError('server.insufficient_storage', 503, detail, { headers: { 'Retry-After': '60' } });
}
