import { randomBytes } from 'node:crypto';
import { closeSync, fdatasync, fstatSync, fsyncSync, mkdirSync, openSync, read, readdirSync, readSync, unlinkSync, write, writeSync } from 'node:fs';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { fsyncDir } from './fsync-dir.ts';
import { frame } from './framing.ts';

const writeAsync = promisify(write);
const readAsync = promisify(read);
const datasyncAsync = promisify(fdatasync);

/** Bytes read or copied at a time: start-up and compaction never hold a journal as one string. */
const CHUNK_BYTES = 1 << 20;
/** Records serialized between two writes of a compaction, so it never holds the loop for long. */
const RECORDS_PER_WRITE = 2_000;

/** A step of a compaction, named for fault injection in the conformance suite. */
export type CompactionStep = 'compact.written' | 'compact.swapped';

/**
 * The live records, called when a compaction starts: they must cover every append made before the
 * call and none made after. The iterable is consumed across several turns of the event loop, so
 * what it yields late must still be right when the appends made meanwhile are replayed after it.
 */
export type Snapshot<T> = () => Iterable<T>;

export interface CompactionPolicy<T> {
  /** Live records in the owner's memory now. */
  live(): number;
  snapshot: Snapshot<T>;
  /** Compact once the log holds more than `ratio` × live records, and more than `minRecords`. */
  ratio: number;
  minRecords: number;
}

export interface JournalOptions {
  /** False skips the fsyncs: for state nobody must find after a crash (tests). */
  sync?: boolean;
  /** Called between the steps of a compaction; a throw kills the journal as a crash would. */
  step?: (s: CompactionStep) => void;
  /** A compaction that failed (the old log stays in place, whole). */
  onError?: (err: unknown) => void;
}

type Op =
  | { kind: 'append'; text: string; resolve: () => void; reject: (err: unknown) => void }
  | { kind: 'barrier'; run: () => Promise<void>; resolve: () => void; reject: (err: unknown) => void };

/**
 * An append-only log of JSON records (see ./framing.ts), private to its owner (0600).
 *
 * Several processes may append (the server and the CLI): each record is one O_APPEND write, so
 * appends never interleave, and `readNew` picks up what others wrote. `append` is durable (fsync)
 * before it resolves; appends arriving while a sync runs are committed together by the next one,
 * so a burst costs a few syncs, not one each.
 *
 * `compact` replaces the log by its live records while appends go on: the records are written to a
 * fresh file, the appends made meanwhile are copied after them, and the file is renamed over the
 * log between two appends — so a crash at any point leaves the old log or the new one, each whole,
 * and the log is only ever appended to or replaced by a rename (what `compressd backup` relies on).
 * Only a log with a single writer may be compacted.
 */
export class Journal<T> {
  private fd: number;
  private readOffset = 0;
  /** Bytes of the log written by this process's completed appends (single-writer logs). */
  private size: number;
  /** Records in the log: replayed, appended, or written by the last compaction. */
  private recordCount = 0;
  private readonly queue: Op[] = [];
  private flushing: Promise<void> | null = null;
  private compacting: Promise<void> | null = null;
  private closed = false;
  /** Set when a compaction step was killed: like a dead process, the journal writes nothing more. */
  private dead: unknown = null;
  private policy: CompactionPolicy<T> | null = null;
  private readonly sync: boolean;

  constructor(readonly path: string, private readonly opts: JournalOptions = {}) {
    this.sync = opts.sync ?? true;
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    this.fd = openSync(path, 'a+', 0o600);
    this.size = fstatSync(this.fd).size;
  }

  /** Records in the log now (what the compaction policy weighs against the live ones). */
  get records(): number {
    return this.recordCount;
  }

  /** Bytes in the log now. */
  get bytes(): number {
    return this.size;
  }

  /** Compacts the log in the background whenever `policy` says it holds too many dead records. */
  compactWhen(policy: CompactionPolicy<T>): void {
    this.policy = policy;
    this.removeLeftovers();
  }

  /**
   * Calls `each` with every record appended (by anyone) since the last read, reading the log a chunk
   * at a time; the first call reads them all. A torn record is skipped (counted once it is followed
   * by a newline).
   */
  replay(each: (record: T) => void): { records: number; skipped: number } {
    let records = 0;
    let skipped = 0;
    let buf = Buffer.alloc(CHUNK_BYTES);
    for (;;) {
      const n = readSync(this.fd, buf, 0, buf.length, this.readOffset);
      if (n === 0) break;
      // A newline byte is never inside a UTF-8 sequence: cutting there never splits a character.
      const end = buf.subarray(0, n).lastIndexOf(0x0a);
      if (end < 0) {
        if (n < buf.length) break; // a record still being written, or torn: read again next time
        buf = Buffer.alloc(buf.length * 2); // one record longer than a chunk
        continue;
      }
      this.readOffset += end + 1;
      const text = buf.toString('utf8', 0, end);
      for (let at = 0; at < text.length; ) {
        let next = text.indexOf('\n', at);
        if (next < 0) next = text.length;
        if (next > at) {
          try {
            each(JSON.parse(text.slice(at, next)) as T);
            records++;
          } catch {
            skipped++;
          }
        }
        at = next + 1;
      }
    }
    this.recordCount += records;
    return { records, skipped };
  }

  /** Records appended (by anyone) since the last read, as one array: for small logs. */
  readNew(): { records: T[]; skipped: number } {
    const records: T[] = [];
    const { skipped } = this.replay((r) => records.push(r));
    return { records, skipped };
  }

  /** Appends and syncs at once, blocking: for short-lived writers (the CLI) and rare records. */
  appendSync(record: T): void {
    const text = frame(record);
    writeSync(this.fd, text);
    if (this.sync) fsyncSync(this.fd);
    this.size += Buffer.byteLength(text);
    this.recordCount++;
  }

  /** Appends; resolves once the record is durable. */
  append(record: T): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`${this.path} is closed`));
    if (this.dead) return Promise.reject(this.dead);
    return new Promise((resolve, reject) => {
      this.queue.push({ kind: 'append', text: frame(record), resolve, reject });
      this.kick();
    });
  }

  /**
   * Replaces the log by the records `snapshot` returns (called at once, or after a compaction
   * already running). Resolves once the new log is in place.
   */
  compact(snapshot: Snapshot<T>): Promise<void> {
    if (this.compacting) return this.compacting.catch(() => {}).then(() => this.compact(snapshot));
    const run = this.compactNow(snapshot).finally(() => {
      this.compacting = null;
    });
    this.compacting = run;
    return run;
  }

  /** Resolves once no compaction runs (one that finds the log due again starts another first). */
  async idle(): Promise<void> {
    while (this.compacting) await this.compacting.catch(() => {});
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.compacting?.catch(() => {});
    while (this.flushing) await this.flushing;
    closeSync(this.fd);
  }

  private async compactNow(snapshot: Snapshot<T>): Promise<void> {
    // Where the old log stops being covered by the snapshot: after the appends queued so far, which
    // (memory changing with each append call) the snapshot taken in the same turn covers.
    let from = 0;
    const marked = this.barrier(async () => {
      from = this.size;
      this.tailRecords = 0;
    });
    const records = snapshot();
    await marked;
    const tmp = `${this.path}.${randomBytes(6).toString('hex')}.tmp`;
    const out = await open(tmp, 'wx', 0o600);
    let written = 0;
    let count = 0;
    try {
      let batch: string[] = [];
      const flush = async () => {
        const text = batch.join('');
        batch = [];
        if (text) await out.writeFile(text);
        written += Buffer.byteLength(text);
      };
      for (const r of records) {
        batch.push(frame(r));
        count++;
        if (batch.length >= RECORDS_PER_WRITE) await flush();
      }
      await flush();
      // Most of the appends made meanwhile are copied while appends go on; the rest between two of them.
      let copied = await this.copyTail(out, from, this.size);
      this.check('compact.written');
      await this.barrier(async () => {
        copied = await this.copyTail(out, copied, this.size);
        if (this.sync) await out.sync();
        await out.close();
        await rename(tmp, this.path);
        this.check('compact.swapped');
        if (this.sync) await fsyncDir(dirname(this.path));
        closeSync(this.fd);
        this.fd = openSync(this.path, 'a+', 0o600);
        this.size = written + (copied - from);
        this.readOffset = this.size;
        this.recordCount = count + this.tailRecords;
        this.tailRecords = 0;
      });
    } catch (err) {
      await out.close().catch(() => {});
      await unlink(tmp).catch(() => {});
      throw err;
    }
  }

  /** Records appended since the current compaction started (counted by `drain`). */
  private tailRecords = 0;

  /** Copies bytes [from, to) of the log after what `out` holds; returns `to`. */
  private async copyTail(out: FileHandle, from: number, to: number): Promise<number> {
    const buf = Buffer.alloc(Math.min(CHUNK_BYTES, Math.max(1, to - from)));
    for (let at = from; at < to; ) {
      const { bytesRead } = await readAsync(this.fd, buf, 0, Math.min(buf.length, to - at), at);
      if (bytesRead === 0) throw new Error(`${this.path} shrank while being compacted`);
      await out.writeFile(buf.subarray(0, bytesRead));
      at += bytesRead;
    }
    return to;
  }

  private check(step: CompactionStep): void {
    try {
      this.opts.step?.(step);
    } catch (err) {
      this.dead = err;
      throw err;
    }
  }

  /** Runs `run` after every op queued before it and before every op queued after it. */
  private barrier(run: () => Promise<void>): Promise<void> {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise((resolve, reject) => {
      this.queue.push({ kind: 'barrier', run, resolve, reject });
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
      if (this.dead) {
        for (const op of this.queue.splice(0)) op.reject(this.dead);
        return;
      }
      const head = this.queue[0]!;
      if (head.kind === 'barrier') {
        this.queue.shift();
        try {
          await head.run();
          head.resolve();
        } catch (err) {
          head.reject(err);
        }
        continue;
      }
      let end = 0;
      while (end < this.queue.length && this.queue[end]!.kind === 'append') end++;
      const batch = this.queue.splice(0, end) as Extract<Op, { kind: 'append' }>[];
      try {
        const text = batch.map((op) => op.text).join('');
        await writeAsync(this.fd, text);
        if (this.sync) await datasyncAsync(this.fd);
        this.size += Buffer.byteLength(text);
        this.recordCount += batch.length;
        if (this.compacting) this.tailRecords += batch.length;
        for (const op of batch) op.resolve();
      } catch (err) {
        for (const op of batch) op.reject(err);
      }
      this.compactIfDue();
    }
  }

  /**
   * At open: compacts now if the log holds more than `ratio` × its live records, however few (a
   * rewrite of a small log costs little; a large log that is mostly live is not rewritten, so
   * start-up time follows the live records).
   */
  async compactIfDueNow(): Promise<void> {
    if (this.due(0)) await this.compact(this.policy!.snapshot);
  }

  private due(minRecords = this.policy?.minRecords ?? 0): boolean {
    const p = this.policy;
    return !!p && this.recordCount > Math.max(minRecords, p.ratio * p.live());
  }

  private compactIfDue(): void {
    const p = this.policy;
    if (!p || this.compacting || this.closed || this.dead || !this.due()) return;
    this.compact(p.snapshot).then(
      // Appends made while it ran may have made the log due again, and none may follow to notice.
      () => this.compactIfDue(),
      (err: unknown) => {
        if (err !== this.dead) this.opts.onError?.(err);
      },
    );
  }

  /** Temporary files of compactions a crash interrupted: never renamed, so never part of the log. */
  private removeLeftovers(): void {
    const prefix = `${basename(this.path)}.`;
    for (const name of readdirSync(dirname(this.path))) {
      if (name.startsWith(prefix) && name.endsWith('.tmp')) unlinkSync(join(dirname(this.path), name));
    }
  }
}
