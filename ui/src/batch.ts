import { ApiProblem, type Api, type JobStatus } from './api.ts';
import { extensionOf } from './format.ts';
import { explainFailure, explainProblem, messageFor } from './messages.ts';

/**
 * Where a file is: `ready` (chosen, not sent), `rejected` (refused before sending), `pending`
 * (waiting for its turn to upload), `uploading`, `waiting` (the server asked to retry later),
 * `error` (the submission failed), or a job status once the server accepted it.
 */
export type Stage = 'ready' | 'rejected' | 'pending' | 'uploading' | 'waiting' | 'error' | JobStatus['status'];

export interface Item {
  readonly uid: number;
  /** The chosen file; null for a job restored from the server after a reload (it cannot be sent again). */
  readonly file: File | null;
  readonly name: string;
  readonly size: number;
  readonly format: string;
  stage: Stage;
  /** Upload fraction 0–1 while uploading. */
  upload: number;
  job: JobStatus | null;
  /** A sentence for the person: an error, or (with `info`) a note such as a retry countdown. */
  message: string | null;
  info: boolean;
  /** Sending the file again can succeed (the failure was the server's or the network's, not the file's). */
  retryable: boolean;
  /** The JPG output keeps GPS coordinates from the camera (checked once the job succeeded). */
  location: boolean;
  options: object;
  nextPoll: number;
  pollBackoff: number;
  abort: AbortController | null;
}

export interface Limits {
  formats: Set<string> | null;
  maxFileSizeBytes: number | null;
  maxBatchFiles: number | null;
  /** Jobs this page keeps queued or running at once; the server refuses more with 429 anyway. */
  maxInFlight: number;
}

export interface BatchEvents {
  changed(item: Item): void;
  removed(item: Item): void;
  /** The key was refused (401): sending stops until `resume()`. */
  keyRefused(problem: ApiProblem): void;
  finished(item: Item): void;
}

/** A job the page sent earlier, as kept in the browser to find it again after a reload. */
export interface SavedJob {
  id: string;
  name: string;
  size: number;
  format: string;
}

export const TERMINAL = new Set<Stage>(['Succeeded', 'Failed', 'Canceled']);
const IN_FLIGHT = new Set<Stage>(['uploading', 'waiting', 'Queued', 'Running']);
const POLL_MS = 1000;
const MAX_BACKOFF_S = 30;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The files of this page and their jobs: submits them in turn, polls each job, and retries what the server asks to. */
export class Batch {
  readonly items: Item[] = [];
  limits: Limits = { formats: null, maxFileSizeBytes: null, maxBatchFiles: null, maxInFlight: 6 };
  private uid = 0;
  private pumping = false;
  private paused = false;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly api: Api,
    private readonly on: BatchEvents,
  ) {}

  /** Adds files; returns how many did not fit in the batch limit. */
  add(files: File[]): number {
    const room = this.limits.maxBatchFiles === null ? files.length : Math.max(0, this.limits.maxBatchFiles - this.items.length);
    for (const file of files.slice(0, room)) {
      const item = this.newItem(file, file.name, file.size, extensionOf(file.name));
      this.precheck(item);
      this.items.push(item);
      this.on.changed(item);
    }
    return files.length - Math.min(room, files.length);
  }

  /** Shows a job sent before the page was reloaded, as the server reports it now; polls it if unfinished. */
  restore(saved: SavedJob, status: JobStatus): void {
    if (this.items.some((i) => i.job?.id === saved.id)) return;
    const item = this.newItem(null, saved.name, saved.size, saved.format);
    item.job = status;
    this.items.push(item);
    this.apply(item, status, false);
    this.schedule();
  }

  private newItem(file: File | null, name: string, size: number, format: string): Item {
    return { uid: ++this.uid, file, name, size, format, stage: 'ready', upload: 0, job: null, message: null, info: false, retryable: false, location: false, options: {}, nextPoll: 0, pollBackoff: 0, abort: null };
  }

  /** Refuses what the server would refuse anyway, before uploading it. */
  private precheck(item: Item): void {
    const { formats, maxFileSizeBytes } = this.limits;
    if (!item.format || (formats && !formats.has(item.format))) {
      this.reject(item, new ApiProblem('compress.unsupported_format', 400, null));
    } else if (maxFileSizeBytes !== null && item.size > maxFileSizeBytes) {
      this.reject(item, new ApiProblem('request.file_too_large', 413, null, { maxFileSizeBytes }));
    } else if (item.size === 0) {
      this.reject(item, new ApiProblem('request.empty_file', 400, null));
    }
  }

  /** Re-checks ready files after the limits became known (the key was accepted). */
  recheck(): void {
    for (const item of this.items) {
      if (item.stage !== 'ready') continue;
      this.precheck(item);
      this.on.changed(item);
    }
  }

  reject(item: Item, problem: ApiProblem): void {
    item.stage = 'rejected';
    item.message = messageFor(problem);
    item.info = false;
    item.retryable = false;
    this.on.changed(item);
  }

  readyFormats(): string[] {
    return [...new Set(this.items.filter((i) => i.stage === 'ready').map((i) => i.format))].sort();
  }

  /** Queues every ready file with its options. */
  start(optionsOf: (item: Item) => object): void {
    for (const item of this.items) {
      if (item.stage !== 'ready') continue;
      item.options = optionsOf(item);
      this.setStage(item, 'pending', null);
    }
    void this.pump();
  }

  /** Sends a file again, where that can help (see `retryable`) and the page still has the file. */
  retry(item: Item): void {
    if (!item.retryable || !item.file || (item.stage !== 'error' && item.stage !== 'Failed' && item.stage !== 'Canceled')) return;
    item.job = null;
    item.upload = 0;
    this.setStage(item, 'pending', null);
    void this.pump();
  }

  async cancel(item: Item): Promise<void> {
    if (item.stage === 'uploading' || item.stage === 'waiting' || item.stage === 'pending') {
      item.abort?.abort();
      this.setStage(item, 'ready', null);
      return;
    }
    if ((item.stage === 'Queued' || item.stage === 'Running') && item.job) {
      try {
        this.apply(item, await this.api.cancel(item.job.id));
      } catch (e) {
        const p = e instanceof ApiProblem ? e : new ApiProblem('network', 0, null);
        // Already finished: the next poll shows how it ended.
        if (p.code !== 'jobs.not_cancellable') this.note(item, messageFor(p), false);
        item.nextPoll = 0;
        this.schedule();
      }
    }
  }

  remove(item: Item): void {
    if (IN_FLIGHT.has(item.stage) || item.stage === 'pending') return;
    this.items.splice(this.items.indexOf(item), 1);
    this.on.removed(item);
  }

  clearFinished(): void {
    for (const item of [...this.items]) if (TERMINAL.has(item.stage) || item.stage === 'rejected') this.remove(item);
  }

  succeeded(): Item[] {
    return this.items.filter((i) => i.stage === 'Succeeded' && i.job);
  }

  /** After a refused key was replaced: sending and polling go on. */
  resume(): void {
    this.paused = false;
    for (const item of this.items) item.nextPoll = 0;
    this.schedule();
    void this.pump();
  }

  private inFlight(): number {
    return this.items.filter((i) => IN_FLIGHT.has(i.stage)).length;
  }

  private setStage(item: Item, stage: Stage, message: string | null, info = false): void {
    item.stage = stage;
    item.retryable = stage === 'Canceled' && item.file !== null;
    item.message = message;
    item.info = info;
    this.on.changed(item);
  }

  private note(item: Item, message: string, info: boolean): void {
    item.message = message;
    item.info = info;
    this.on.changed(item);
  }

  private keyRefused(p: ApiProblem): void {
    this.paused = true;
    this.on.keyRefused(p);
  }

  /** Uploads pending files one at a time, keeping at most `maxInFlight` jobs in flight. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (;;) {
        if (this.paused || this.inFlight() >= this.limits.maxInFlight) return;
        const item = this.items.find((i) => i.stage === 'pending');
        if (!item) return;
        await this.submit(item);
      }
    } finally {
      this.pumping = false;
    }
  }

  private async submit(item: Item): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const abort = new AbortController();
      item.abort = abort;
      item.upload = 0;
      this.setStage(item, 'uploading', null);
      try {
        const accepted = await this.api.submit(item.file!, item.options, (f) => {
          item.upload = f;
          this.on.changed(item);
        }, abort.signal);
        item.abort = null;
        item.nextPoll = Date.now() + POLL_MS;
        item.pollBackoff = 0;
        item.job = {
          id: accepted.id,
          status: 'Queued',
          format: accepted.format,
          jobType: accepted.jobType,
          progress: { percent: 0, phase: null },
          metrics: { inputBytes: item.size, outputBytes: 0, creditCost: 0, compressionRatio: 0, savingsPercent: 0, perceivedQuality: null },
          error: null,
          output: { fileName: '', contentType: '', fileCount: 0 },
          expiresAt: null,
        };
        this.setStage(item, 'Queued', null);
        this.schedule();
        return;
      } catch (e) {
        item.abort = null;
        const p = e instanceof ApiProblem ? e : new ApiProblem('network', 0, null);
        if (p.code === 'aborted') return;
        if (p.status === 401) {
          this.setStage(item, 'pending', messageFor(p));
          this.keyRefused(p);
          return;
        }
        if (p.status === 429 || p.status === 503) {
          // The server said when to come back: wait and send this file again.
          const wait = p.retryAfter ?? Math.min(MAX_BACKOFF_S, 2 ** attempt);
          this.setStage(item, 'waiting', `${messageFor(p)}`, true);
          await sleep(wait * 1000);
          if (item.stage !== 'waiting') return;
          continue;
        }
        const { text, retry } = explainProblem(p);
        this.setStage(item, 'error', text);
        item.retryable = retry;
        this.on.changed(item);
        return;
      }
    }
  }

  private schedule(): void {
    if (this.timer !== null || this.paused) return;
    const polled = this.items.filter((i) => (i.stage === 'Queued' || i.stage === 'Running') && i.job);
    if (polled.length === 0) return;
    const next = Math.min(...polled.map((i) => i.nextPoll));
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, Math.max(0, next - Date.now()));
  }

  private async poll(): Promise<void> {
    const now = Date.now();
    const due = this.items.filter((i) => (i.stage === 'Queued' || i.stage === 'Running') && i.job && i.nextPoll <= now);
    await Promise.all(due.map((item) => this.pollOne(item)));
    this.schedule();
  }

  private async pollOne(item: Item): Promise<void> {
    try {
      const status = await this.api.status(item.job!.id);
      item.pollBackoff = 0;
      item.nextPoll = Date.now() + POLL_MS;
      this.apply(item, status);
    } catch (e) {
      const p = e instanceof ApiProblem ? e : new ApiProblem('network', 0, null);
      if (p.status === 401) {
        this.keyRefused(p);
        return;
      }
      if (p.status === 404 || p.status === 403) {
        this.setStage(item, 'error', messageFor(p));
        return;
      }
      // 429, 5xx, network: back off 1, 2, 4 … 30 s (or as Retry-After says) and keep polling.
      item.pollBackoff = Math.min(MAX_BACKOFF_S, item.pollBackoff ? item.pollBackoff * 2 : 1);
      const wait = p.retryAfter ?? item.pollBackoff;
      item.nextPoll = Date.now() + wait * 1000;
      this.note(item, `${messageFor(p)} Checking again in ${Math.ceil(wait)} s.`, true);
    }
  }

  private apply(item: Item, status: JobStatus, announce = true): void {
    const was = item.stage;
    item.job = status;
    if (status.status === 'Failed') {
      const { text, retry } = explainFailure(status.error);
      this.setStage(item, 'Failed', text);
      item.retryable = retry && item.file !== null;
      this.on.changed(item);
    } else this.setStage(item, status.status, null);
    if (TERMINAL.has(status.status) && !TERMINAL.has(was)) {
      if (announce) this.on.finished(item);
      void this.pump();
    }
  }
}
