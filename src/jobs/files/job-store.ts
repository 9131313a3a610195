import { join } from 'node:path';
import type { CreditLedger } from '../../accounts/ledger.ts';
import type { Clock } from '../../clock.ts';
import { COMPACTION_DEFAULTS, type CompactionSettings } from '../../durable/compaction.ts';
import { Journal, type CompactionStep } from '../../durable/journal.ts';
import {
  IDEMPOTENCY_TTL_MS,
  type AdmitResult,
  type ClaimLimits,
  type EndedQuery,
  type IdempotencyClaim,
  type JobStore,
  type MoveResult,
  type Outbox,
  type OwedWebhook,
  type RememberedKey,
} from '../backend.ts';
import { CancelSignal, canceled } from '../cancel-signal.ts';
import {
  decide,
  isTerminal,
  requeueAlways,
  settlementOf,
  settles,
  STATUSES,
  type AccountRoom,
  type AdmissionLimits,
  type Applied,
  type CreditEffect,
  type Interrupted,
  type JobMove,
} from '../moves.ts';
import type { RecoveryQueries } from '../recovery.ts';
import type { StartupPhases } from '../../ops/startup-phases.ts';
import type { Job, JobStatus } from '../types.ts';
import { EndedIndex } from './ended-index.ts';

/**
 * Journal records. A finish carries the webhook it owes; `handed` is written once that delivery is
 * in the outbox, so recovery hands over exactly the ones a crash kept from getting there. An
 * admission's `put` carries its idempotency key (one record: the job and its key are durable
 * together); `key` keeps, across a compaction, a key whose job was forgotten within its 24 h.
 */
type JobRecord =
  | { op: 'put'; job: Job; owed?: OwedWebhook; idem?: IdempotencyClaim }
  | { op: 'key'; remembered: RememberedKey }
  | { op: 'patch'; id: string; patch: Partial<Job>; owed?: OwedWebhook }
  | { op: 'handed'; id: string }
  | { op: 'remove'; id: string };

/** A step between the writes of a move, named for fault injection in the conformance suite. */
export type FilesStep = 'admit.held' | 'finish.recorded' | 'finish.settled' | 'finish.enqueued' | 'cancel.recorded' | CompactionStep;

type StoredJob = Omit<Job, 'ranOn' | 'crashes'> & { ranOn?: string | null; crashes?: number; job?: string; notified?: boolean; output: (Job['output'] & { path?: string }) | null };

/** Records from before `jobType`, leases, `ranOn` and `crashes`: `job` was the job type, `output.path` a spool path. */
function upgrade(job: StoredJob): Job {
  // A current record (every field there, none of the old ones) is taken as parsed: start-up reads one per remembered job.
  if (job.ranOn !== undefined && job.crashes !== undefined && job.lease !== undefined && job.jobType !== undefined && job.job === undefined && job.notified === undefined && job.output?.path === undefined) return job as Job;
  const { job: legacyType, notified: _notified, ...rest } = job;
  const output = rest.output ? (({ path: _path, ...o }) => o)(rest.output) : null;
  return { ...rest, jobType: rest.jobType ?? legacyType, output, lease: rest.lease ?? null, ranOn: rest.ranOn ?? rest.lease?.nodeId ?? null, crashes: rest.crashes ?? 0 };
}

/**
 * The files backend's jobs: every job in memory, every durable change appended (fsync) to
 * `jobs.log` before the move resolves; compacted (at open too) whenever dead records outweigh live
 * ones (while moves go on: see Journal.compact). A move's check and its effect on memory
 * are one synchronous step, so concurrent calls in this process see each other's moves; its writes
 * then go to `jobs.log`, `ledger.log` and the outbox in the order `Backend.recover` can complete.
 */
export class FilesJobStore implements JobStore, RecoveryQueries {
  private readonly jobs = new Map<string, Job>();
  /** Queued jobs per account, oldest first. */
  private readonly queued = new Map<string, Job[]>();
  private readonly running = new Map<string, Job>();
  /** Owed webhooks not yet handed to the outbox. */
  private readonly owed = new Map<string, OwedWebhook>();
  /** When each account was last served by `claim` (a counter, not a clock). */
  private readonly served = new Map<string, number>();
  private serveCount = 0;
  private readonly cancels = new CancelSignal();
  private readonly inMove = new Map<string, Promise<void>>();
  /** Idempotency keys by `keyOf(account, key)`; they outlive their jobs' records. */
  private readonly keys = new Map<string, RememberedKey>();
  /** Ended jobs by completion, and those of them whose output has not expired: the sweep's work lists. */
  private readonly endedIdx = new EndedIndex((job, at) => this.jobs.get(job.id) === job && isTerminal(job.status) && job.completedAt === at);
  private readonly unexpiredIdx = new EndedIndex((job, at) => this.jobs.get(job.id) === job && isTerminal(job.status) && job.completedAt === at && !job.expired);
  /** Jobs admitted in memory whose `put` is not yet appended: a snapshot leaves them to it. */
  private readonly unwritten = new Set<string>();

  private constructor(
    private readonly journal: Journal<JobRecord>,
    private readonly ledger: CreditLedger,
    private readonly outbox: Outbox,
    private readonly step: (s: FilesStep) => void,
  ) {}

  static async open(
    dataDir: string,
    ledger: CreditLedger,
    outbox: Outbox,
    opts: { sync: boolean; step(s: FilesStep): void; clock: Clock; compaction?: CompactionSettings; onError?: (err: unknown) => void; phases?: StartupPhases },
  ): Promise<FilesJobStore> {
    const journal = new Journal<JobRecord>(join(dataDir, 'jobs.log'), { sync: opts.sync, step: opts.step, onError: opts.onError });
    const store = new FilesJobStore(journal, ledger, outbox, opts.step);
    journal.replay((r) => store.replay(r));
    await store.forgetKeys(new Date(opts.clock().getTime() - IDEMPOTENCY_TTL_MS));
    const snapshot = () => store.snapshot();
    journal.compactWhen({ ...(opts.compaction ?? COMPACTION_DEFAULTS), live: () => store.jobs.size + store.keys.size, snapshot });
    await journal.compactIfDueNow();
    opts.phases?.mark('jobs.log');
    store.indexAll();
    opts.phases?.mark('jobs index');
    return store;
  }

  /**
   * The live records. Which jobs, keys and owed webhooks there are is taken at once; each job is
   * serialized later, as it is by then — which replaying the patches appended meanwhile after it
   * leaves right, since a patch sets what it names whatever was there.
   */
  private snapshot(): Iterable<JobRecord> {
    const jobs = [...this.jobs.values()].filter((j) => !this.unwritten.has(j.id));
    const owed = new Map(this.owed);
    const keyOfJob = new Map<string, RememberedKey>();
    for (const k of this.keys.values()) if (!this.unwritten.has(k.job.id)) keyOfJob.set(k.job.id, k);
    return (function* (): Generator<JobRecord> {
      for (const job of jobs) {
        const k = keyOfJob.get(job.id);
        keyOfJob.delete(job.id);
        yield { op: 'put', job, owed: owed.get(job.id), ...(k ? { idem: { key: k.key, fingerprint: k.fingerprint } } : {}) };
      }
      for (const remembered of keyOfJob.values()) yield { op: 'key', remembered };
    })();
  }

  private replay(r: JobRecord): void {
    if (r.op === 'put') {
      const job = upgrade(r.job);
      this.jobs.set(job.id, job);
      if (r.owed) this.owed.set(job.id, r.owed);
      if (r.idem) this.keys.set(keyOf(job.account, r.idem.key), remembered(job, r.idem));
    } else if (r.op === 'key') this.keys.set(keyOf(r.remembered.account, r.remembered.key), r.remembered);
    else if (r.op === 'patch') {
      const j = this.jobs.get(r.id);
      if (j) Object.assign(j, r.patch);
      if (r.owed) this.owed.set(r.id, r.owed);
    } else if (r.op === 'handed') this.owed.delete(r.id);
    else {
      this.jobs.delete(r.id);
      this.owed.delete(r.id);
    }
  }

  /** Puts a job in the queue or running index by its status (a fresh index: at open). */
  private index(job: Job): void {
    if (claimable(job.status)) {
      const q = this.queued.get(job.account) ?? [];
      q.push(job);
      this.queued.set(job.account, q);
    } else if (job.status === STATUSES.running) this.running.set(job.id, job);
  }

  private indexEnded(job: Job, at = Date.parse(job.completedAt!)): void {
    this.endedIdx.add(job, at);
    if (!job.expired) this.unexpiredIdx.add(job, at);
  }

  /**
   * Builds the indexes from the jobs replayed, in one pass. The journal holds jobs in about the
   * order they ended (a compaction writes them in the order they were admitted), so the ended ones
   * are sorted only when they are out of order.
   */
  private indexAll(): void {
    const active: Job[] = [];
    const ended: { job: Job; at: number }[] = [];
    let ordered = true;
    for (const job of this.jobs.values()) {
      if (!isTerminal(job.status)) active.push(job);
      else if (job.completedAt) {
        const e = { job, at: Date.parse(job.completedAt) };
        const last = ended[ended.length - 1];
        if (last && byCompletion(last, e) > 0) ordered = false;
        ended.push(e);
      }
    }
    for (const job of active.sort(byAge)) this.index(job);
    if (!ordered) ended.sort(byCompletion);
    for (const { job, at } of ended) this.indexEnded(job, at);
  }

  private unindex(job: Job): void {
    this.running.delete(job.id);
    const q = this.queued.get(job.account);
    const i = q?.indexOf(job) ?? -1;
    if (i >= 0) q!.splice(i, 1);
    if (q?.length === 0) this.queued.delete(job.account);
  }

  /** Applies a patch in memory (with the indexes) and returns the durable write of it. */
  private apply(job: Job, patch: Partial<Job>, owed?: OwedWebhook): Promise<void> {
    this.unindex(job);
    const ended = isTerminal(job.status) ? job.completedAt : undefined;
    Object.assign(job, patch);
    if (isTerminal(job.status) && job.completedAt && job.completedAt !== ended) this.indexEnded(job);
    if (claimable(job.status)) {
      // Requeued jobs keep their place by age.
      const q = this.queued.get(job.account) ?? [];
      q.push(job);
      q.sort(byAge);
      this.queued.set(job.account, q);
    } else if (job.status === STATUSES.running) this.running.set(job.id, job);
    if (owed) this.owed.set(job.id, owed);
    return this.journal.append({ op: 'patch', id: job.id, patch, ...(owed ? { owed } : {}) });
  }

  /**
   * Registers a move in flight on job `id`: `get` waits for it, so no reader sees a move half done
   * (its status changed but its credits or webhook not yet).
   */
  private moving<T>(id: string, work: Promise<T>): Promise<T> {
    const settled = work.then(
      () => {},
      () => {},
    );
    this.inMove.set(id, settled);
    void settled.then(() => {
      if (this.inMove.get(id) === settled) this.inMove.delete(id);
    });
    return work;
  }

  admit(job: Job, limits: AdmissionLimits, idempotency?: IdempotencyClaim): Promise<AdmitResult> {
    return this.moving(job.id, this.admitNow(job, limits, idempotency));
  }

  /**
   * The `admit` move: an idempotency key bound to another job answers first; then `decide` checks
   * the account as it stands, and the job, its key and (as the table says) its hold change memory
   * in the same synchronous step; the hold, then the job's record, are written.
   */
  private async admitNow(job: Job, limits: AdmissionLimits, idem?: IdempotencyClaim): Promise<AdmitResult> {
    const key = idem && keyOf(job.account, idem.key);
    const since = Date.parse(job.createdAt) - IDEMPOTENCY_TTL_MS;
    // Checked, like everything up to the memory change below, in one synchronous step unless it waits.
    let taken = key === undefined || this.jobs.has(job.id) ? undefined : this.boundSince(key, since);
    // An admission still writing its record may yet be undone: its outcome decides.
    while (taken && this.inMove.has(taken.job.id)) {
      await this.inMove.get(taken.job.id);
      taken = this.boundSince(key!, since);
    }
    if (taken) return { ok: false, refusal: 'idempotency.key_taken', remembered: taken };
    const decision = decide({ move: 'admit', job, limits, room: this.roomOf(job.account) }, this.jobs.get(job.id));
    if (decision.kind === 'replay') return { ok: true, job: this.jobs.get(job.id)! };
    if (decision.kind === 'refuse') {
      const { kind: _kind, ...refused } = decision;
      return { ok: false, ...refused };
    }
    const stored: Job = { ...job, ...decision.patch };
    // The answer is the job as admitted: once indexed, a claim may make `stored` Running before the writes below end.
    const admitted: Job = { ...stored };
    const held = decision.credits === 'hold' ? this.ledger.hold(stored.id, stored.account, stored.creditCost) : Promise.resolve();
    this.jobs.set(stored.id, stored);
    this.unwritten.add(stored.id);
    this.index(stored);
    if (key !== undefined) this.keys.set(key, remembered(stored, idem!));
    await this.writeAdmitted(stored, held, idem);
    return { ok: true, job: admitted };
  }

  /** The admitted job's hold, then its record (with its key); a failed write undoes the admission. */
  private async writeAdmitted(stored: Job, held: Promise<void>, idem?: IdempotencyClaim): Promise<void> {
    const undo = () => {
      this.unindex(stored);
      this.unwritten.delete(stored.id);
      this.jobs.delete(stored.id);
      if (idem) this.keys.delete(keyOf(stored.account, idem.key));
    };
    try {
      await held;
    } catch (err) {
      undo();
      throw err;
    }
    this.step('admit.held');
    try {
      const put = this.journal.append({ op: 'put', job: stored, ...(idem ? { idem } : {}) });
      this.unwritten.delete(stored.id);
      await put;
    } catch (err) {
      undo();
      await this.ledger.settle(stored.id, 'release').catch(() => {});
      throw err;
    }
  }

  /** The account as an admission checks it. */
  private roomOf(account: string): AccountRoom {
    return { open: (this.queued.get(account)?.length ?? 0) + this.runningOf(account).length, available: this.ledger.available(account) };
  }

  /** The key's binding if it was made at or after `since` (epoch ms). */
  private boundSince(key: string, since: number): RememberedKey | undefined {
    const bound = this.keys.get(key);
    return bound && Date.parse(bound.job.createdAt) >= since ? bound : undefined;
  }

  async rememberedKey(account: string, key: string, at: Date): Promise<RememberedKey | undefined> {
    const bound = this.keys.get(keyOf(account, key));
    // An admission still writing its record may yet be undone.
    if (bound) await this.inMove.get(bound.job.id);
    return this.boundSince(keyOf(account, key), at.getTime() - IDEMPOTENCY_TTL_MS);
  }

  async forgetKeys(before: Date): Promise<number> {
    let n = 0;
    for (const [key, bound] of this.keys) {
      if (Date.parse(bound.job.createdAt) >= before.getTime()) continue;
      this.keys.delete(key);
      n++;
    }
    return n;
  }

  async get(id: string): Promise<Job | undefined> {
    await this.inMove.get(id);
    return this.jobs.get(id);
  }

  private runningOf(account: string): Job[] {
    return [...this.running.values()].filter((j) => j.account === account);
  }

  async claim(nodeId: string, limits: ClaimLimits, at: Date, leaseMs: number): Promise<Job | null> {
    let best: { job: Job; served: number } | null = null;
    for (const [account, q] of this.queued) {
      const running = this.runningOf(account);
      if (running.length >= limits.maxRunningPerAccount) continue;
      const job = q.find((j) => running.filter((r) => r.jobType === j.jobType).length < (limits.maxRunningPerJobType[j.jobType] ?? Infinity));
      if (!job) continue;
      const served = this.served.get(account) ?? -1;
      if (!best || served < best.served || (served === best.served && byAge(job, best.job) < 0)) best = { job, served };
    }
    if (!best) return null;
    const job = best.job;
    const decision = decide({ move: 'start', at, nodeId, leaseMs }, job);
    if (decision.kind !== 'apply') return null;
    this.served.set(job.account, ++this.serveCount);
    await this.moving(job.id, this.apply(job, decision.patch));
    return job;
  }

  private holds(job: Job, nodeId: string, attempt: number): boolean {
    return job.status === 'Running' && job.attempts === attempt && job.lease?.nodeId === nodeId;
  }

  async renew(id: string, nodeId: string, attempt: number, until: Date): Promise<boolean> {
    const job = this.jobs.get(id);
    if (!job || !this.holds(job, nodeId, attempt)) return false;
    // Not journaled: after a restart every job this node ran is interrupted whatever its lease said.
    job.lease = { nodeId, expiresAt: until.toISOString() };
    return true;
  }

  async progress(id: string, attempt: number, progress: Job['progress']): Promise<void> {
    const job = this.jobs.get(id);
    if (job?.status === 'Running' && job.attempts === attempt) job.progress = progress;
  }

  move(id: string, m: Exclude<JobMove, { move: 'start' }>): Promise<MoveResult> {
    return this.moving(id, this.moveNow(id, m));
  }

  /**
   * Decides and applies a move: the decision and the memory change are one synchronous step; then
   * one `jobs.log` record (the fields and the webhook owed), then the credit effect, then the
   * outbox, in the order `recover` completes.
   */
  private async moveNow(id: string, m: Exclude<JobMove, { move: 'start' }>): Promise<MoveResult> {
    const job = this.jobs.get(id);
    const decision = decide(m, job);
    if (decision.kind === 'refuse') return { ok: false, refusal: decision.refusal, ...(job ? { job } : {}) };
    const from = job!.status;
    if (decision.kind === 'replay') {
      // A repeated finish completes what a crash may have cut short; the ledger and outbox ignore repeats.
      if (isTerminal(job!.status)) await this.complete(job!);
      return { ok: true, job: job!, from, replay: true };
    }
    await this.record(job!, decision);
    return { ok: true, job: job!, from, replay: false };
  }

  private async record(job: Job, d: Applied): Promise<void> {
    const from = job.status;
    if (d.gone) {
      this.unindex(job);
      this.jobs.delete(job.id);
      this.owed.delete(job.id);
      await this.journal.append({ op: 'remove', id: job.id });
      return;
    }
    await this.apply(job, d.patch, d.owed ?? undefined);
    const cancel = canceled(from, job.status);
    if (cancel) this.cancels.emit(job.id);
    if (!settles(d.credits)) return;
    this.step(cancel ? 'cancel.recorded' : 'finish.recorded');
    await this.complete(job, d.credits);
  }

  /**
   * The rest of an ended job's move after its record: the settlement of its hold, then the owed
   * webhook into the outbox. Repeatable (recovery completes interrupted moves with it, by the job's status).
   */
  private async complete(job: Job, credits: CreditEffect = settlementOf(job.status)): Promise<void> {
    if (settles(credits)) await this.ledger.settle(job.id, credits);
    this.step('finish.settled');
    const owed = this.owed.get(job.id);
    if (!owed) return;
    await this.outbox.enqueue(owed);
    this.step('finish.enqueued');
    this.owed.delete(job.id);
    await this.journal.append({ op: 'handed', id: job.id });
  }

  async requeueInterrupted(now: Date, nodeId?: string, interrupted: Interrupted = requeueAlways): Promise<Job[]> {
    const moved: Job[] = [];
    for (const job of [...this.running.values()].sort(byAge)) {
      const expired = !job.lease || Date.parse(job.lease.expiresAt) < now.getTime();
      if (!expired && job.lease?.nodeId !== nodeId) continue;
      const decision = decide(interrupted(job), job);
      if (decision.kind !== 'apply') continue;
      await this.moving(job.id, this.record(job, decision));
      moved.push(job);
    }
    return moved;
  }

  async nextLeaseExpiry(exceptNode: string): Promise<Date | null> {
    let earliest: number | null = null;
    for (const job of this.running.values()) {
      if (!job.lease || job.lease.nodeId === exceptNode) continue;
      const at = Date.parse(job.lease.expiresAt);
      if (earliest === null || at < earliest) earliest = at;
    }
    return earliest === null ? null : new Date(earliest);
  }

  async ended(query: EndedQuery): Promise<Job[]> {
    const before = query.completedBefore.getTime();
    if (query.unexpired === true) return this.unexpiredIdx.before(before, query.limit);
    return this.endedIdx.before(before, query.limit, query.unexpired === false ? (j) => j.expired === true : undefined);
  }

  async counts(account?: string): Promise<{ queued: number; running: number }> {
    if (account !== undefined) return { queued: this.queued.get(account)?.length ?? 0, running: this.runningOf(account).length };
    let queued = 0;
    for (const q of this.queued.values()) queued += q.length;
    return { queued, running: this.running.size };
  }

  onCancel(listener: (jobId: string) => void): () => void {
    return this.cancels.on(listener);
  }

  async staleHolds(): Promise<{ jobId: string; status: JobStatus | undefined }[]> {
    const stale = [];
    for (const hold of await this.ledger.openHolds()) {
      const job = await this.get(hold.jobId);
      if (!job || isTerminal(job.status)) stale.push({ jobId: hold.jobId, status: job?.status });
    }
    return stale;
  }

  async handOverOwed(): Promise<number> {
    let handed = 0;
    for (const id of [...this.owed.keys()]) {
      const job = await this.get(id);
      if (!job || !isTerminal(job.status)) continue;
      await this.complete(job);
      handed++;
    }
    return handed;
  }

  async unexpiredOf(ids: string[]): Promise<Set<string>> {
    const kept = new Set<string>();
    for (const id of ids) if ((await this.get(id))?.expired === false) kept.add(id);
    return kept;
  }

  /** Every record, for recovery. */
  all(): Job[] {
    return [...this.jobs.values()];
  }

  close(): Promise<void> {
    return this.journal.close();
  }
}

const keyOf = (account: string, key: string) => JSON.stringify([account, key]);

const claimable = (status: JobStatus) => STATUSES.claimable.includes(status);

function remembered(job: Job, idem: IdempotencyClaim): RememberedKey {
  return { account: job.account, key: idem.key, fingerprint: idem.fingerprint, job: { id: job.id, fileName: job.fileName, format: job.format, jobType: job.jobType, createdAt: job.createdAt } };
}

function byCompletion(a: { job: Job; at: number }, b: { job: Job; at: number }): number {
  return a.at - b.at || (a.job.id < b.job.id ? -1 : 1);
}

function byAge(a: Job, b: Job): number {
  return a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);
}
