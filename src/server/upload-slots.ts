import type { Reservation } from '../ops/disk.ts';

/** One upload's slot among its account's uploads in progress. */
export interface UploadSlot {
  /** How many of the account's uploads that took a slot before this one are still in progress. */
  ahead(): number;
  /** Gives the slot back (safe to call twice). */
  free(): void;
}

/** What the upload gate hands a submission: its slot and its hold on free disk space, given back together. */
export interface UploadPlace {
  /** Grown as the body's bytes arrive. */
  disk: Reservation;
  /** Gives back both (safe to call twice). */
  release(): void;
}

/**
 * The submissions of each account whose body is still arriving. Each counts as an open job of its
 * account until it is admitted or abandoned, so that uploads racing in cannot together overfill a
 * queue that each alone would fit in. Slots are numbered in the order they are taken.
 */
export class UploadSlots {
  private readonly byAccount = new Map<string, Set<number>>();
  private taken = 0;

  /** A slot for a new upload of `account`. Synchronous: of uploads racing in, each is ordered before any await. */
  take(account: string): UploadSlot {
    const ticket = ++this.taken;
    const tickets = this.byAccount.get(account) ?? new Set<number>();
    tickets.add(ticket);
    this.byAccount.set(account, tickets);
    let held = true;
    return {
      ahead: () => [...tickets].filter((t) => t < ticket).length,
      free: () => {
        if (!held) return;
        held = false;
        tickets.delete(ticket);
        if (tickets.size === 0 && this.byAccount.get(account) === tickets) this.byAccount.delete(account);
      },
    };
  }
}
