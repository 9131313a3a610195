import { closeSync, fdatasync, fstatSync, fsyncSync, mkdirSync, openSync, readSync, write, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { writeFileAtomic } from './atomic-write.ts';
import { frame, parseFramed } from './framing.ts';

const writeAsync = promisify(write);
const datasyncAsync = promisify(fdatasync);

type Op =
  | { kind: 'append'; text: string; resolve: () => void; reject: (err: unknown) => void }
  | { kind: 'compact'; text: string; resolve: () => void; reject: (err: unknown) => void };

/**
 * An append-only log of JSON records (see ./framing.ts), private to its owner (0600).
 *
 * Several processes may append (the server and the CLI): each record is one O_APPEND write, so
 * appends never interleave, and `readNew` picks up what others wrote. `append` is durable (fsync)
 * before it resolves; appends arriving while a sync runs are committed together by the next one,
 * so a burst costs a few syncs, not one each. `compact` replaces the whole log atomically, ordered
 * with the appends around it; only a log with a single writer may be compacted.
 */
export class Journal<T> {
  private fd: number;
  private readOffset = 0;
  private carry = '';
  private readonly queue: Op[] = [];
  private flushing: Promise<void> | null = null;
  private closed = false;

  /** `sync: false` skips the fsyncs: for state nobody must find after a crash (tests). */
  constructor(readonly path: string, private readonly sync = true) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    this.fd = openSync(path, 'a+', 0o600);
  }

  /**
   * Records appended (by anyone) since the last call; the first call returns them all. A torn
   * record is skipped (counted once it is followed by a newline).
   */
  readNew(): { records: T[]; skipped: number } {
    const size = fstatSync(this.fd).size;
    if (size <= this.readOffset) return { records: [], skipped: 0 };
    const buf = Buffer.alloc(size - this.readOffset);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(this.fd, buf, got, buf.length - got, this.readOffset + got);
      if (n === 0) break;
      got += n;
    }
    this.readOffset += got;
    const parsed = parseFramed<T>(this.carry + buf.subarray(0, got).toString('utf8'));
    this.carry = parsed.rest;
    return { records: parsed.records, skipped: parsed.skipped };
  }

  /** Appends and syncs at once, blocking: for short-lived writers (the CLI) and rare records. */
  appendSync(record: T): void {
    writeSync(this.fd, frame(record));
    if (this.sync) fsyncSync(this.fd);
  }

  /** Appends; resolves once the record is durable. */
  append(record: T): Promise<void> {
    return this.enqueue('append', frame(record));
  }

  /** Replaces the whole log by `records`, after every append queued before it. */
  compact(records: T[]): Promise<void> {
    return this.enqueue('compact', records.map(frame).join(''));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.flushing) await this.flushing;
    closeSync(this.fd);
  }

  private enqueue(kind: Op['kind'], text: string): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`${this.path} is closed`));
    return new Promise((resolve, reject) => {
      this.queue.push({ kind, text, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.flushing) return;
    this.flushing = this.drain().finally(() => {
      this.flushing = null;
      // An op queued between drain()'s last look at the queue and this callback found the flush
      // still running and did not start one.
      if (this.queue.length > 0) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (head.kind === 'compact') {
        this.queue.shift();
        await settle([head], () => this.replace(head.text));
        continue;
      }
      let end = 0;
      while (end < this.queue.length && this.queue[end]!.kind === 'append') end++;
      const batch = this.queue.splice(0, end);
      await settle(batch, async () => {
        await writeAsync(this.fd, batch.map((op) => op.text).join(''));
        if (this.sync) await datasyncAsync(this.fd);
      });
    }
  }

  private async replace(text: string): Promise<void> {
    await writeFileAtomic(this.path, text, { sync: this.sync });
    closeSync(this.fd);
    this.fd = openSync(this.path, 'a+', 0o600);
    this.readOffset = fstatSync(this.fd).size;
    this.carry = '';
  }
}

async function settle(ops: Op[], work: () => Promise<void>): Promise<void> {
  try {
    await work();
    for (const op of ops) op.resolve();
  } catch (err) {
    for (const op of ops) op.reject(err);
  }
}
