import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import type { Dispatcher } from 'undici';
import { fetchConfigFromEnv } from '../fetch/config.ts';
import { guardedDispatcher } from '../fetch/egress.ts';
import { postOnce, type AttemptResult } from './deliver.ts';
import { Journal } from './journal.ts';
import { bodyForAttempt, buildPayload, type JobOutcome, type WebhookEventName, type WebhookPayload } from './payload.ts';
import { checkRetryDelays, DEFAULT_TIMEOUT_MS } from './policy.ts';
import { sign } from './sign.ts';
import type { WebhookConfig } from './validate.ts';

export interface OutboxOptions {
  dataDir: string;
  /** Seconds before each attempt; its length is the number of attempts (spec: 0,1,5,30,120). */
  retryDelaysSec: readonly number[];
  /** The payload's `site`. */
  site: string;
  /**
   * Carries every delivery. Defaults to the egress guard configured from the environment
   * (COMPRESSD_URL_ALLOW, COMPRESSD_DNS_OVERRIDES), so DNS answers are vetted again at send time.
   */
  dispatcher?: Dispatcher;
  timeoutMs?: number;
  concurrency?: number;
  log?: (entry: Record<string, unknown>) => void;
}

export interface AttemptReport {
  eventId: string;
  jobId: string;
  event: WebhookEventName;
  attempt: number;
  outcome: AttemptResult['outcome'];
  status: number | null;
  error: string | null;
  durationMs: number;
  /** When the next attempt is due (epoch ms), or null when this was the last. */
  nextAttemptAt: number | null;
}

export interface SettledReport {
  eventId: string;
  jobId: string;
  event: WebhookEventName;
  delivered: boolean;
  attempts: number;
}

export interface OutboxEvents {
  attempt: [AttemptReport];
  settled: [SettledReport];
}

/**
 * Journal records. `enqueue` carries a delivery's whole state, so a compacted journal is just
 * one `enqueue` per pending delivery; `start` is written (and synced) before an attempt is sent,
 * `result` after it: `next` is when the following attempt is due, null when the delivery is over.
 */
type OutboxRecord =
  | {
      op: 'enqueue';
      id: string;
      webhook: WebhookConfig;
      payload: WebhookPayload;
      started: number;
      startedAt: number | null;
      next: number | null;
    }
  | { op: 'start'; id: string; n: number; at: number }
  | {
      op: 'result';
      id: string;
      n: number;
      outcome: AttemptResult['outcome'];
      status: number | null;
      error: string | null;
      next: number | null;
    };

interface Pending {
  id: string;
  webhook: WebhookConfig;
  payload: WebhookPayload;
  /** The highest attempt number ever started; never sent again. */
  started: number;
  startedAt: number | null;
  /** When attempt `started + 1` is due; null while an attempt is in flight (or its outcome was lost). */
  next: number | null;
  timer?: NodeJS.Timeout;
}

const COMPACT_AFTER_RECORDS = 10_000;
const JOURNAL_RETRY_MS = 1_000;

/**
 * The durable webhook outbox. enqueue() returns once the delivery is on disk; sending happens
 * in the background with at most `concurrency` requests in flight, on the retry schedule. After a
 * restart, start() picks every pending delivery up at its next attempt number.
 */
export class WebhookOutbox extends EventEmitter<OutboxEvents> {
  private readonly journal: Journal<OutboxRecord>;
  private readonly delays: readonly number[];
  private readonly dispatcher: Dispatcher;
  private readonly ownDispatcher: boolean;
  private readonly timeoutMs: number;
  private readonly concurrency: number;
  private readonly log: (entry: Record<string, unknown>) => void;
  private readonly pending = new Map<string, Pending>();
  private readonly ready: Pending[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private readonly stopController = new AbortController();
  private recordsSinceCompaction = 0;
  private state: 'new' | 'started' | 'stopped' = 'new';

  constructor(private readonly opts: OutboxOptions) {
    super();
    checkRetryDelays(opts.retryDelaysSec);
    this.delays = [...opts.retryDelaysSec];
    this.journal = new Journal(join(opts.dataDir, 'webhooks', 'outbox.jsonl'));
    this.ownDispatcher = !opts.dispatcher;
    this.dispatcher = opts.dispatcher ?? guardedDispatcher(fetchConfigFromEnv());
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.concurrency = Math.max(1, opts.concurrency ?? 16);
    this.log = opts.log ?? (() => {});
  }

  get maxAttempts(): number {
    return this.delays.length;
  }

  /** Deliveries not yet settled (queued, waiting for a retry, or in flight). */
  get pendingCount(): number {
    return this.pending.size;
  }

  /** Loads the journal, compacts it, and schedules every pending delivery at its next attempt. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error('WebhookOutbox.start() may be called once');
    const { records, skipped } = await this.journal.load();
    if (skipped > 0) this.log({ msg: 'webhook outbox: skipped unreadable journal lines', skipped });
    for (const record of records) this.replay(record);
    await this.journal.open();
    const now = Date.now();
    for (const p of [...this.pending.values()]) {
      // Also covers a retry schedule shortened since the delivery was queued.
      if (p.started >= this.maxAttempts) {
        this.pending.delete(p.id);
        this.log({ msg: 'webhook abandoned: no attempts left after restart', eventId: p.id, attempts: p.started });
        continue;
      }
      // The process died during attempt `started`: its outcome is unknown, but it may have reached
      // the receiver, so that number is spent and the schedule carries on with the next one.
      if (p.next === null) p.next = Math.max(now, (p.startedAt ?? now) + this.delays[p.started]! * 1000);
    }
    await this.compact();
    this.state = 'started';
    for (const p of this.pending.values()) this.schedule(p);
    if (this.pending.size > 0) this.log({ msg: 'webhook outbox resumed', pending: this.pending.size });
  }

  /**
   * Queues the webhook for a job that ended Succeeded or Failed. Resolves false, sending nothing,
   * when `webhook.events` does not select the event or the same event is already pending; resolves
   * true once the delivery is durable. Never waits for the receiver.
   */
  async enqueue(webhook: WebhookConfig, job: JobOutcome): Promise<boolean> {
    if (this.state !== 'started') throw new Error('WebhookOutbox is not running');
    const kind = job.status === 'Succeeded' ? 'succeeded' : 'failed';
    if (!webhook.events.includes(kind)) return false;
    const payload = buildPayload(job, this.opts.site);
    if (this.pending.has(payload.eventId)) return false;
    const p: Pending = {
      id: payload.eventId,
      webhook,
      payload,
      started: 0,
      startedAt: null,
      next: Date.now() + this.delays[0]! * 1000,
    };
    this.pending.set(p.id, p);
    try {
      await this.write(this.snapshot(p));
    } catch (err) {
      this.pending.delete(p.id);
      throw err;
    }
    this.schedule(p);
    return true;
  }

  /**
   * Stops sending: timers are cleared and requests in flight are aborted (each aborted attempt is
   * recorded, so a restart resumes at the following attempt). Pending deliveries stay on disk.
   */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    const wasStarted = this.state === 'started';
    this.state = 'stopped';
    for (const p of this.pending.values()) clearTimeout(p.timer);
    this.ready.length = 0;
    this.stopController.abort();
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
    if (wasStarted) await this.journal.close();
    if (this.ownDispatcher) await this.dispatcher.close();
  }

  private replay(record: OutboxRecord): void {
    switch (record.op) {
      case 'enqueue':
        if (!this.pending.has(record.id)) {
          const { webhook, payload, started, startedAt, next } = record;
          this.pending.set(record.id, { id: record.id, webhook, payload, started, startedAt, next });
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
    return {
      op: 'enqueue',
      id: p.id,
      webhook: p.webhook,
      payload: p.payload,
      started: p.started,
      startedAt: p.startedAt,
      next: p.next,
    };
  }

  private async write(record: OutboxRecord): Promise<void> {
    await this.journal.append(record);
    if (++this.recordsSinceCompaction >= COMPACT_AFTER_RECORDS) {
      this.compact().catch((err) => this.log({ msg: 'webhook outbox compaction failed', err: String(err) }));
    }
  }

  private compact(): Promise<void> {
    this.recordsSinceCompaction = 0;
    return this.journal.rewrite([...this.pending.values()].map((p) => this.snapshot(p)));
  }

  private schedule(p: Pending): void {
    if (this.state !== 'started' || p.next === null) return;
    clearTimeout(p.timer);
    p.timer = setTimeout(() => {
      p.timer = undefined;
      this.ready.push(p);
      this.pump();
    }, Math.max(0, p.next - Date.now()));
    // Pending retries must not keep a finishing process alive; they resume from disk next start.
    p.timer.unref();
  }

  private pump(): void {
    while (this.state === 'started' && this.inFlight.size < this.concurrency && this.ready.length > 0) {
      const task = this.attempt(this.ready.shift()!).finally(() => {
        this.inFlight.delete(task);
        this.pump();
      });
      this.inFlight.add(task);
    }
  }

  private async attempt(p: Pending): Promise<void> {
    const n = p.started + 1;
    const startedAt = Date.now();
    try {
      await this.write({ op: 'start', id: p.id, n, at: startedAt });
    } catch (err) {
      // Not sent: an attempt that is not on disk could be repeated after a crash.
      this.log({ msg: 'webhook outbox journal write failed; attempt postponed', eventId: p.id, err: String(err) });
      p.next = Date.now() + JOURNAL_RETRY_MS;
      this.schedule(p);
      return;
    }
    p.started = n;
    p.startedAt = startedAt;
    p.next = null;

    const body = JSON.stringify(bodyForAttempt(p.payload, n));
    const result = await postOnce({
      url: p.webhook.url,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'compressd-webhooks',
        'x-service-signature': sign(p.webhook.secret, body, Math.floor(Date.now() / 1000)),
        'x-service-event-id': p.id,
        'x-service-delivery-attempt': String(n),
      },
      body,
      dispatcher: this.dispatcher,
      timeoutMs: this.timeoutMs,
      signal: this.stopController.signal,
    });
    const finishedAt = Date.now();
    const next = result.outcome === 'retry' && n < this.maxAttempts ? finishedAt + this.delays[n]! * 1000 : null;
    p.next = next;

    const report: AttemptReport = {
      eventId: p.id,
      jobId: p.payload.jobId,
      event: p.payload.event,
      attempt: n,
      outcome: result.outcome,
      status: result.status,
      error: result.error,
      durationMs: finishedAt - startedAt,
      nextAttemptAt: next,
    };
    this.log({ msg: 'webhook attempt', ...report });
    try {
      await this.write({ op: 'result', id: p.id, n, ...result, next });
    } catch (err) {
      // Harmless for correctness: on restart the attempt counts as interrupted and the next one follows.
      this.log({ msg: 'webhook outbox journal write failed', eventId: p.id, err: String(err) });
    }
    this.emit('attempt', report);

    if (next !== null) {
      this.schedule(p);
      return;
    }
    this.pending.delete(p.id);
    const settled: SettledReport = {
      eventId: p.id,
      jobId: p.payload.jobId,
      event: p.payload.event,
      delivered: result.outcome === 'delivered',
      attempts: n,
    };
    if (!settled.delivered) this.log({ msg: 'webhook gave up', ...settled, lastStatus: result.status, lastError: result.error });
    this.emit('settled', settled);
  }
}
