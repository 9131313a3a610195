import { join } from 'node:path';
import { systemClock, type Clock } from '../../clock.ts';
import { COMPACTION_DEFAULTS, type CompactionSettings } from '../../durable/compaction.ts';
import { Journal, type JournalOptions } from '../../durable/journal.ts';
import type { AttemptOutcome, Delivery, DeliveryClaim, Outbox, OwedWebhook } from '../backend.ts';

/**
 * Journal records. `enqueue` carries a delivery's whole state, so a compacted journal is one
 * `enqueue` per pending delivery; `start` is synced before an attempt is sent, `result` after it:
 * `next` is when the following attempt is due, null when the delivery is over.
 */
type OutboxRecord =
  | { op: 'enqueue'; id: string; webhook: { url: string; secret: string }; payload: OwedWebhook['payload']; started: number; startedAt: number | null; next: number | null }
  | { op: 'start'; id: string; n: number; at: number }
  | ({ op: 'result'; id: string; n: number; next: number | null } & AttemptOutcome);

interface Pending {
  owed: OwedWebhook;
  /** The highest attempt number ever started; never sent again. */
  started: number;
  startedAt: number | null;
  /** When attempt `started + 1` is due; null while an attempt is in flight (or its outcome was lost). */
  next: number | null;
  /** Claimed by a process that is gone (loaded in flight): the attempt is spent. */
  orphan: boolean;
}

/** The files backend's outbox: `webhooks/outbox.jsonl` in the data dir, pending deliveries in memory. */
export class FilesOutbox implements Outbox {
  private readonly pending = new Map<string, Pending>();

  private constructor(
    private readonly journal: Journal<OutboxRecord>,
    private readonly clock: Clock,
  ) {}

  /**
   * Loads the journal (compacted, at open too, once dead records outweigh live ones); deliveries in
   * flight when the last process stopped are orphans. `clock` stamps what is enqueued due (default: the system clock).
   */
  static async open(
    dataDir: string,
    log: (entry: Record<string, unknown>) => void = () => {},
    { clock = systemClock, ...opts }: JournalOptions & { compaction?: CompactionSettings; clock?: Clock } = {},
  ): Promise<FilesOutbox> {
    const journal = new Journal<OutboxRecord>(join(dataDir, 'webhooks', 'outbox.jsonl'), opts);
    const outbox = new FilesOutbox(journal, clock);
    const { skipped } = journal.replay((r) => outbox.replay(r));
    if (skipped > 0) log({ msg: 'webhook outbox: skipped unreadable journal lines', skipped });
    for (const p of outbox.pending.values()) if (p.next === null) p.orphan = true;
    // Taken at once: pending deliveries are few, and their state moves on with every attempt.
    const snapshot = () => [...outbox.pending.values()].map((p) => outbox.snapshot(p));
    journal.compactWhen({ ...(opts.compaction ?? COMPACTION_DEFAULTS), live: () => outbox.pending.size, snapshot });
    await journal.compactIfDueNow();
    return outbox;
  }

  async enqueue(owed: OwedWebhook): Promise<boolean> {
    if (this.pending.has(owed.eventId)) return false;
    const p: Pending = { owed, started: 0, startedAt: null, next: this.clock().getTime(), orphan: false };
    this.pending.set(owed.eventId, p);
    try {
      await this.write(this.snapshot(p));
    } catch (err) {
      this.pending.delete(owed.eventId);
      throw err;
    }
    return true;
  }

  async claimDue(_nodeId: string, claim: DeliveryClaim): Promise<Delivery[]> {
    const now = claim.now.getTime();
    const due: Pending[] = [];
    const abandoned: Pending[] = [];
    for (const p of this.pending.values()) {
      if (p.next === null) {
        if (!p.orphan && (p.startedAt ?? 0) + claim.ttlMs > now) continue;
        // Its outcome is unknown but it may have reached the receiver: the number is spent and the
        // schedule carries on with the next one.
        p.orphan = false;
        if (p.started >= claim.retryDelaysMs.length) {
          abandoned.push(p);
          continue;
        }
        p.next = (p.startedAt ?? now) + claim.retryDelaysMs[p.started]!;
      }
      if (p.next <= now) due.push(p);
    }
    due.sort((a, b) => a.next! - b.next!);
    // Marked in memory before any write, so a concurrent claim in this process cannot take them too.
    const claimed = due.slice(0, claim.limit).map((p) => {
      p.started += 1;
      p.startedAt = now;
      p.next = null;
      return p;
    });
    for (const p of abandoned) await this.settle(p.owed.eventId, p.started, { outcome: 'retry', status: null, error: 'attempt interrupted; no attempts left' }, null);
    await Promise.all(claimed.map((p) => this.write({ op: 'start', id: p.owed.eventId, n: p.started, at: now })));
    return claimed.map((p) => ({ ...p.owed, attempt: p.started }));
  }

  async settle(eventId: string, attempt: number, outcome: AttemptOutcome, nextAt: number | null): Promise<void> {
    const p = this.pending.get(eventId);
    if (!p || p.started !== attempt) return;
    if (nextAt === null) this.pending.delete(eventId);
    else p.next = nextAt;
    await this.write({ op: 'result', id: eventId, n: attempt, ...outcome, next: nextAt });
  }

  async nextDueAt(): Promise<number | null> {
    let earliest: number | null = null;
    for (const p of this.pending.values()) {
      const at = p.orphan ? 0 : p.next;
      if (at !== null && (earliest === null || at < earliest)) earliest = at;
    }
    return earliest;
  }

  async pendingCount(): Promise<number> {
    return this.pending.size;
  }

  close(): Promise<void> {
    return this.journal.close();
  }

  private replay(record: OutboxRecord): void {
    switch (record.op) {
      case 'enqueue':
        if (!this.pending.has(record.id)) {
          const { id, webhook, payload, started, startedAt, next } = record;
          const jobId = typeof payload.jobId === 'string' ? payload.jobId : '';
          this.pending.set(id, { owed: { eventId: id, jobId, url: webhook.url, secret: webhook.secret, payload }, started, startedAt, next, orphan: false });
        }
        break;
      case 'start': {
        const p = this.pending.get(record.id);
        if (p) {
          p.started = record.n;
          p.startedAt = record.at;
          p.next = null;
        }
        break;
      }
      case 'result': {
        const p = this.pending.get(record.id);
        if (p && p.started === record.n) {
          if (record.next === null) this.pending.delete(record.id);
          else p.next = record.next;
        }
        break;
      }
    }
  }

  private snapshot(p: Pending): OutboxRecord {
    const { eventId, url, secret, payload } = p.owed;
    return { op: 'enqueue', id: eventId, webhook: { url, secret }, payload, started: p.started, startedAt: p.startedAt, next: p.next };
  }

  private write(record: OutboxRecord): Promise<void> {
    return this.journal.append(record);
  }
}
