import { closeSync, fsyncSync, openSync, readSync, fstatSync, writeSync, existsSync } from 'node:fs';
import { writeFileAtomic } from './atomic-write.ts';

/**
 * An append-only log of JSON records, one per line, shared safely by several writers
 * (the server and the CLI): each record is one O_APPEND write, so appends never
 * interleave, and is framed by newlines on both sides, so a record torn by a crash is
 * an unparseable line that readers skip without losing the records around it.
 */
export class Journal<T> {
  private fd: number;
  private readOffset = 0;
  private carry = '';

  constructor(readonly path: string, private readonly durable = true) {
    this.fd = openSync(path, 'a+', 0o600);
  }

  append(record: T): void {
    writeSync(this.fd, `\n${JSON.stringify(record)}\n`);
    if (this.durable) fsyncSync(this.fd);
  }

  /** Records appended (by anyone) since the last call; the first call returns them all. */
  readNew(): T[] {
    const size = fstatSync(this.fd).size;
    if (size <= this.readOffset) return [];
    const buf = Buffer.alloc(size - this.readOffset);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(this.fd, buf, got, buf.length - got, this.readOffset + got);
      if (n === 0) break;
      got += n;
    }
    this.readOffset += got;
    const text = this.carry + buf.subarray(0, got).toString('utf8');
    const end = text.lastIndexOf('\n');
    this.carry = text.slice(end + 1);
    const records: T[] = [];
    for (const line of text.slice(0, end + 1).split('\n')) {
      if (!line) continue;
      try {
        records.push(JSON.parse(line) as T);
      } catch {
        // A record torn by a crash mid-write: the lines around it are intact.
      }
    }
    return records;
  }

  /**
   * Replaces the whole log by `records` (write, fsync, rename). Only for a log with a
   * single writer: a concurrent append from another process would be lost.
   */
  compact(records: T[]): void {
    writeFileAtomic(this.path, records.map((r) => `${JSON.stringify(r)}\n`).join(''));
    closeSync(this.fd);
    this.fd = openSync(this.path, 'a+', 0o600);
    this.readOffset = fstatSync(this.fd).size;
    this.carry = '';
  }

  close(): void {
    closeSync(this.fd);
  }

  static exists(path: string): boolean {
    return existsSync(path);
  }
}
