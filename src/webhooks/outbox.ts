import { EventEmitter } from 'node:events';
import type { Dispatcher } from 'undici';
import { systemClock, type Clock } from '../clock.ts';
import { FilesOutbox } from '../jobs/files/outbox.ts';
import type { Delivery, Outbox } from '../jobs/backend.ts';
import { postOnce, type AttemptResult } from './deliver.ts';
import { owedDelivery } from './notify.ts';
import { bodyForAttempt, type JobOutcome, type WebhookEventName, type WebhookPayload } from './payload.ts';
import { checkRetryDelays, DEFAULT_TIMEOUT_MS } from './policy.ts';
import { sign } from './sign.ts';
import type { WebhookConfig } from './validate.ts';

export interface OutboxOptions {
  /** Where owed deliveries are kept: the backend's outbox; without it, the files outbox in `dataDir`. */
  store?: Outbox;
  dataDir?: string;
  /** Which node claims deliveries (cluster). */
  nodeId?: string;
  /** Seconds before each attempt; its length is the number of attempts (spec: 0,1,5,30,120). */
  retryDelaysSec: readonly number[];
  /** The payload's `site`. */
  site: string;
  /** Carries every delivery: the egress guard, so DNS answers are vetted again at send time. */
  dispatcher: Dispatcher;
  timeoutMs?: number;
  concurrency?: number;
  /** Longest wait between looks at the store (deliveries queued or left by other nodes). */
  pollMs?: number;
  log?: (entry: Record<string, unknown>) => void;
  /** The time attempts are scheduled by and signed with (default: the system clock). */
  clock?: Clock;
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

const STORE_RETRY_MS = 1_000;

/**
 * Delivers the webhooks owed in an outbox store: claims due deliveries (each attempt number is
 * durable before it is sent, so none is ever sent twice), posts them signed, with at most
 * `concurrency` in flight, and records each outcome with the next attempt's due time. After a
 * restart it picks every pending delivery up at its next attempt number.
 */
export class WebhookOutbox extends EventEmitter<OutboxEvents> {
  private store: Outbox | null;
  private ownStore: FilesOutbox | null = null;
  private readonly delaysMs: readonly number[];
  private readonly timeoutMs: number;
  private readonly concurrency: number;
  private readonly pollMs: number;
  private readonly log: (entry: Record<string, unknown>) => void;
  private readonly clock: Clock;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly stopController = new AbortController();
  private timer?: NodeJS.Timeout;
  private ticking: Promise<void> | null = null;
  private followUp: Promise<void> | null = null;
  private pending = 0;
  private state: 'new' | 'started' | 'stopped' = 'new';

  constructor(private readonly opts: OutboxOptions) {
    super();
    checkRetryDelays(opts.retryDelaysSec);
    if (!opts.store && !opts.dataDir) throw new TypeError('WebhookOutbox needs a store or a dataDir');
    this.store = opts.store ?? null;
    this.delaysMs = opts.retryDelaysSec.map((s) => s * 1000);
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.concurrency = Math.max(1, opts.concurrency ?? 16);
    this.pollMs = opts.pollMs ?? 1_000;
    this.log = opts.log ?? (() => {});
    this.clock = opts.clock ?? systemClock;
  }

  get maxAttempts(): number {
    return this.delaysMs.length;
  }

  /** Deliveries not yet settled, as this process last saw them. */
  get pendingCount(): number {
    return this.pending;
  }

  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error('WebhookOutbox.start() may be called once');
    if (!this.store) this.store = this.ownStore = await FilesOutbox.open(this.opts.dataDir!, this.log);
    this.pending = await this.store.pendingCount();
    this.state = 'started';
    if (this.pending > 0) this.log({ msg: 'webhook outbox resumed', pending: this.pending });
    this.wake();
  }

  /**
   * Queues the webhook for a job that ended Succeeded or Failed. Resolves false, sending nothing,
   * when `webhook.events` does not select the event or the same event is already pending; resolves
   * true once the delivery is durable. Never waits for the receiver.
   */
  async enqueue(webhook: WebhookConfig, job: JobOutcome): Promise<boolean> {
    if (this.state !== 'started') throw new Error('WebhookOutbox is not running');
    const owed = owedDelivery(webhook, job, this.opts.site);
    if (!owed || !(await this.store!.enqueue(owed))) return false;
    this.pending++;
    this.wake();
    return true;
  }

  /**
   * Looks for due deliveries now (a job just ended and owes one, or the clock moved). Resolves
   * once that look is over: what was due then is in flight.
   */
  wake(): Promise<void> {
    if (this.state !== 'started') return Promise.resolve();
    if (!this.ticking) return (this.ticking = this.tick().finally(() => (this.ticking = null)));
    // The look in progress may have read the store before what woke us: one more follows it,
    // shared by every wake meanwhile.
    return (this.followUp ??= this.ticking.then(() => {
      this.followUp = null;
      return this.wake();
    }));
  }

  /**
   * Stops sending: the timer is cleared and requests in flight are aborted (each aborted attempt is
   * recorded, so a restart resumes at the following attempt). Pending deliveries stay stored.
   */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    clearTimeout(this.timer);
    this.stopController.abort();
    await this.ticking;
    await this.followUp;
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
    await this.ownStore?.close();
  }

  private async tick(): Promise<void> {
    clearTimeout(this.timer);
    let wait = this.pollMs;
    try {
      const free = this.concurrency - this.inFlight.size;
      if (free > 0) {
        const claimed = await this.store!.claimDue(this.opts.nodeId ?? 'local', {
          now: this.clock(),
          limit: free,
          // An attempt lasts at most the timeout; one not settled well after that lost its node.
          ttlMs: 2 * this.timeoutMs + 5_000,
          retryDelaysMs: this.delaysMs,
        });
        for (const d of claimed) this.launch(d);
      }
      const next = await this.store!.nextDueAt();
      if (next !== null) wait = Math.min(wait, Math.max(0, next - this.clock().getTime()));
      this.pending = await this.store!.pendingCount();
    } catch (err) {
      this.log({ msg: 'webhook outbox store failed; retrying', err: String(err) });
      wait = STORE_RETRY_MS;
    }
    if (this.state !== 'started' || this.inFlight.size >= this.concurrency) return;
    this.timer = setTimeout(() => void this.wake(), wait);
    // Pending retries must not keep a finishing process alive; they resume from the store next start.
    this.timer.unref();
  }

  private launch(d: Delivery): void {
    const task = this.attempt(d).finally(() => {
      this.inFlight.delete(task);
      this.wake();
    });
    this.inFlight.add(task);
  }

  private async attempt(d: Delivery): Promise<void> {
    const payload = d.payload as unknown as WebhookPayload;
    const n = d.attempt;
    if (n > this.maxAttempts) {
      // The retry schedule was shortened since this delivery was queued.
      await this.store!.settle(d.eventId, n, { outcome: 'retry', status: null, error: 'no attempts left' }, null);
      this.log({ msg: 'webhook abandoned: no attempts left', eventId: d.eventId, attempts: n - 1 });
      return;
    }
    const started = performance.now();
    const body = JSON.stringify(bodyForAttempt(payload, n));
    const result = await postOnce({
      url: d.url,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'compressd-webhooks',
        'x-service-signature': sign(d.secret, body, Math.floor(this.clock().getTime() / 1000)),
        'x-service-event-id': d.eventId,
        'x-service-delivery-attempt': String(n),
      },
      body,
      dispatcher: this.opts.dispatcher,
      timeoutMs: this.timeoutMs,
      signal: this.stopController.signal,
    });
    const next = result.outcome === 'retry' && n < this.maxAttempts ? this.clock().getTime() + this.delaysMs[n]! : null;
    const report: AttemptReport = {
      eventId: d.eventId,
      jobId: d.jobId,
      event: payload.event,
      attempt: n,
      outcome: result.outcome,
      status: result.status,
      error: result.error,
      // Elapsed time, not the clock's: a test clock that jumps would misreport it.
      durationMs: Math.round(performance.now() - started),
      nextAttemptAt: next,
    };
    this.log({ msg: 'webhook attempt', ...report });
    try {
      await this.store!.settle(d.eventId, n, result, next);
    } catch (err) {
      // Harmless for correctness: the attempt counts as interrupted and the next one follows.
      this.log({ msg: 'webhook outbox store write failed', eventId: d.eventId, err: String(err) });
    }
    if (next === null) this.pending = Math.max(0, this.pending - 1);
    this.emit('attempt', report);
    if (next !== null) return;
    const settled: SettledReport = { eventId: d.eventId, jobId: d.jobId, event: payload.event, delivered: result.outcome === 'delivered', attempts: n };
    if (!settled.delivered) this.log({ msg: 'webhook gave up', ...settled, lastStatus: result.status, lastError: result.error });
    this.emit('settled', settled);
  }
}
