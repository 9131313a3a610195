import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

type Op =
  | { kind: 'line'; line: string; resolve: () => void; reject: (err: unknown) => void }
  | { kind: 'rewrite'; text: string; resolve: () => void; reject: (err: unknown) => void };

/** Makes a rename or create in `dir` durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * An append-only JSON-lines file whose appends are durable (fsync) before they resolve.
 * Appends that arrive while a sync is running are committed together in the next one, so a burst
 * of deliveries costs a few fsyncs, not one each. A rewrite (compaction) replaces the file
 * atomically (temporary file + fsync + rename) and is ordered with the appends around it.
 * The file is private (0600): it holds webhook secrets, which retries after a restart need.
 */
export class Journal<R> {
  private handle: FileHandle | null = null;
  private readonly queue: Op[] = [];
  private flushing: Promise<void> | null = null;
  private closed = false;

  constructor(readonly path: string) {}

  /**
   * Reads every complete record. A torn last line (a crash mid-append) is expected and dropped;
   * other unreadable lines (a failed write followed by later appends) are skipped and counted.
   */
  async load(): Promise<{ records: R[]; skipped: number }> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], skipped: 0 };
      throw err;
    }
    const records: R[] = [];
    let skipped = 0;
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (line === '') continue;
      try {
        records.push(JSON.parse(line) as R);
      } catch {
        if (i < lines.length - 1) skipped++;
      }
    }
    return { records, skipped };
  }

  async open(): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    this.handle = await open(this.path, 'a', 0o600);
  }

  append(record: R): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`${this.path} is closed`));
    return new Promise((resolve, reject) => {
      this.queue.push({ kind: 'line', line: `${JSON.stringify(record)}\n`, resolve, reject });
      this.kick();
    });
  }

  /** Replaces the whole file with these records, after every append queued before it. */
  rewrite(records: R[]): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`${this.path} is closed`));
    const text = records.map((r) => `${JSON.stringify(r)}\n`).join('');
    return new Promise((resolve, reject) => {
      this.queue.push({ kind: 'rewrite', text, resolve, reject });
      this.kick();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.flushing) await this.flushing;
    await this.handle?.close();
    this.handle = null;
  }

  private kick(): void {
    if (this.flushing) return;
    this.flushing = this.drain().finally(() => {
      this.flushing = null;
      // An op queued between drain()'s last look at the queue and this callback found the
      // flush still running and did not start one.
      if (this.queue.length > 0) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (head.kind === 'rewrite') {
        this.queue.shift();
        await this.settle([head], () => this.replace(head.text));
        continue;
      }
      let end = 0;
      while (end < this.queue.length && this.queue[end]!.kind === 'line') end++;
      const batch = this.queue.splice(0, end) as Extract<Op, { kind: 'line' }>[];
      await this.settle(batch, async () => {
        const handle = this.requireHandle();
        await handle.write(batch.map((op) => op.line).join(''));
        await handle.datasync();
      });
    }
  }

  private async settle(ops: Op[], work: () => Promise<void>): Promise<void> {
    try {
      await work();
      for (const op of ops) op.resolve();
    } catch (err) {
      for (const op of ops) op.reject(err);
    }
  }

  private async replace(text: string): Promise<void> {
    const tmp = `${this.path}.tmp`;
    const out = await open(tmp, 'w', 0o600);
    try {
      await out.writeFile(text);
      await out.sync();
    } finally {
      await out.close();
    }
    await this.handle?.close();
    this.handle = null;
    await rename(tmp, this.path);
    await fsyncDir(dirname(this.path));
    this.handle = await open(this.path, 'a', 0o600);
  }

  private requireHandle(): FileHandle {
    if (!this.handle) throw new Error(`${this.path} is not open`);
    return this.handle;
  }
}
