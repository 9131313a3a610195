import type { Settlement } from '../accounts/credits.ts';
import type { Job, JobFailure, JobOutput, JobStatus, TerminalStatus } from './types.ts';

/** The named moves of the lifecycle; every change of a job's record is one of these. */
export type MoveName = 'admit' | 'start' | 'succeed' | 'fail' | 'cancel' | 'requeueInterrupted' | 'crash' | 'handBack' | 'requeue' | 'expire' | 'forget';

/** What a move does to the job's credit hold: makes it, settles it (`Ledger.settle`), or nothing. */
export type CreditEffect = 'hold' | Settlement | 'none';

/** Whether a credit effect settles the hold (the ledger's `settle` does it). */
export const settles = (effect: CreditEffect): effect is Settlement => effect === 'charge' || effect === 'release';

/** Why a move was refused; nothing was written. */
export type Refusal =
  /** No such job. */
  | 'not_found'
  /** The job is Running under another attempt or node (requeued after this node's lease expired). */
  | 'fenced'
  /** The move may not leave the job's status (e.g. a finish of a job canceled meanwhile). */
  | 'not_running'
  /** The job has already ended (cancel, requeue). */
  | 'ended'
  /** The job has not ended (expire, forget). */
  | 'not_ended';

/** Why an admission was refused, by the check of the account that failed; nothing was written. */
export type AdmissionRefusal =
  /** The account already has `maxOpenPerAccount` open jobs. */
  | 'queue.limit_exceeded'
  /** The account's available credits (granted − spent − held) are below `job.creditCost`. */
  | 'entitlements.insufficient_credits';

/** Limits checked at admission, per account, in the same atomic step as the insert and the hold. */
export interface AdmissionLimits {
  /** Queued + Running jobs of the account, after this one, at most this many (spec: 18). */
  maxOpenPerAccount: number;
}

/** The account as an admission finds it inside its atomic step. */
export interface AccountRoom {
  /** Its Queued + Running jobs. */
  open: number;
  /** Its credits granted − spent − held (negative after a grant was lowered). */
  available: number;
}

/** Each admission check: whether the account has room for the job. */
export const ADMISSION_CHECKS: Readonly<Record<AdmissionRefusal, (job: Job, room: AccountRoom, limits: AdmissionLimits) => boolean>> = {
  'queue.limit_exceeded': (_job, room, limits) => room.open < limits.maxOpenPerAccount,
  'entitlements.insufficient_credits': (job, room) => room.available >= job.creditCost,
};

export interface Transition {
  /** Statuses the move may start from (empty: the move creates the job). */
  from: readonly JobStatus[];
  /** The status it leaves the job in; `same` keeps it, `gone` deletes the record. */
  to: JobStatus | 'same' | 'gone';
  credits: CreditEffect;
  /** Whether the move owes the job's webhook (when the job has one selecting this event). */
  owesWebhook: boolean;
  /**
   * Only the node and attempt holding the job's lease may make the move; a repeat by that node
   * and attempt once the job is in `to` is a replay (answered ok, nothing written twice).
   */
  fenced: boolean;
  /** The refusal a job in a status outside `from` gets; null for the move that creates the job (its record found is a replay). */
  refusal: Refusal | null;
  /** What the move that creates a job checks of its account (`ADMISSION_CHECKS`), in order: the first that fails is its refusal. */
  checks?: readonly AdmissionRefusal[];
}

/**
 * The lifecycle, as one table: Queued → Running → Succeeded | Failed; Canceled from Queued or
 * Running; Running → Queued when the process (or node) running it died (`requeueInterrupted`,
 * counting the crash), when its node stops gracefully (`handBack`, not counted) or when an operator
 * requeues it; Running → Failed (`crash`, code `jobs.crashed`) instead of a requeue once its runs
 * ended with their process as often as allowed, so one file cannot crash-loop the service. Every
 * backend decides a move with `decide` inside the same atomic step that applies it; nothing else
 * changes a job.
 */
export const TRANSITIONS: Readonly<Record<MoveName, Transition>> = {
  admit: { from: [], to: 'Queued', credits: 'hold', owesWebhook: false, fenced: false, refusal: null, checks: ['queue.limit_exceeded', 'entitlements.insufficient_credits'] },
  start: { from: ['Queued'], to: 'Running', credits: 'none', owesWebhook: false, fenced: false, refusal: 'ended' },
  succeed: { from: ['Running'], to: 'Succeeded', credits: 'charge', owesWebhook: true, fenced: true, refusal: 'not_running' },
  fail: { from: ['Running'], to: 'Failed', credits: 'release', owesWebhook: true, fenced: true, refusal: 'not_running' },
  cancel: { from: ['Queued', 'Running'], to: 'Canceled', credits: 'release', owesWebhook: false, fenced: false, refusal: 'ended' },
  requeueInterrupted: { from: ['Running'], to: 'Queued', credits: 'none', owesWebhook: false, fenced: false, refusal: 'not_running' },
  crash: { from: ['Running'], to: 'Failed', credits: 'release', owesWebhook: true, fenced: false, refusal: 'not_running' },
  handBack: { from: ['Running'], to: 'Queued', credits: 'none', owesWebhook: false, fenced: true, refusal: 'not_running' },
  requeue: { from: ['Running'], to: 'Queued', credits: 'none', owesWebhook: false, fenced: false, refusal: 'not_running' },
  expire: { from: ['Succeeded', 'Failed', 'Canceled'], to: 'same', credits: 'none', owesWebhook: false, fenced: false, refusal: 'not_ended' },
  forget: { from: ['Succeeded', 'Failed', 'Canceled'], to: 'gone', credits: 'none', owesWebhook: false, fenced: false, refusal: 'not_ended' },
};

const MOVES = Object.keys(TRANSITIONS) as MoveName[];

/**
 * What settles the hold of an ended job (or of one whose record is gone): the credit effect of the
 * move that ends in its status, so Succeeded → charge and anything else → release is read off the
 * table. Recovery uses it to complete moves a crash interrupted.
 */
export function settlementOf(status: JobStatus | undefined): Settlement {
  const ending = MOVES.map((m) => TRANSITIONS[m]).find((t) => t.to === status && settles(t.credits)) ?? TRANSITIONS.cancel;
  return settles(ending.credits) ? ending.credits : 'release';
}

/**
 * The sets of statuses the backends index and count by, read off the table: a job has ended once
 * only `expire` and `forget` may take it (their sources); it is open (counted against its account's
 * queue, holding credits) before that; it is claimable where `start` may take it and running where
 * `start` leaves it (holding a lease).
 */
export const STATUSES: {
  readonly ended: readonly TerminalStatus[];
  readonly open: readonly JobStatus[];
  readonly claimable: readonly JobStatus[];
  readonly running: JobStatus;
} = (() => {
  const ended = TRANSITIONS.expire.from as readonly TerminalStatus[];
  const all = new Set(MOVES.flatMap((m) => [...TRANSITIONS[m].from, TRANSITIONS[m].to]).filter((s): s is JobStatus => s !== 'same' && s !== 'gone'));
  return { ended, open: [...all].filter((s) => !isEnded(ended, s)), claimable: TRANSITIONS.start.from, running: TRANSITIONS.start.to as JobStatus };
})();

function isEnded(ended: readonly TerminalStatus[], status: JobStatus): status is TerminalStatus {
  return (ended as readonly JobStatus[]).includes(status);
}

/** Whether a job in `status` has ended (see `STATUSES`). */
export const isTerminal = (status: JobStatus): status is TerminalStatus => isEnded(STATUSES.ended, status);

/** Whether a job in `status` is open (see `STATUSES`): the cluster's counters. */
export const isOpen = (status: JobStatus) => STATUSES.open.includes(status);

/** The fields `finish` writes; the store adds `lease: null`. */
export type Ending =
  | {
      status: 'Succeeded';
      completedAt: string;
      expiresAt: string;
      output: JobOutput;
      progress: Job['progress'];
    }
  | {
      status: 'Failed';
      completedAt: string;
      error: JobFailure;
      progress: Job['progress'];
    };

/** A webhook delivery a move owes, rendered when the move is decided (see `Notifier`). */
export interface OwedWebhook {
  /** Stable per job and event; the outbox never holds two deliveries with one id. */
  eventId: string;
  jobId: string;
  url: string;
  secret: string;
  /** The JSON body minus `deliveryAttempt`, which each attempt adds. */
  payload: Record<string, unknown>;
}

/** The `admit` move: `job` (Queued, attempts 0, lease null), checked against `limits` with the account as `room` shows it. */
export type AdmitMove = { move: 'admit'; job: Job; limits: AdmissionLimits; room: AccountRoom };

/**
 * A move on one job, as the lifecycle computes it; a backend applies it with `decide` and its
 * own atomic write (files: one journal record; cluster: one transaction).
 */
export type Move =
  | AdmitMove
  | { move: 'start'; at: Date; nodeId: string; leaseMs: number }
  | { move: 'succeed' | 'fail'; nodeId: string; attempt: number; ending: Ending; owed: OwedWebhook | null }
  | { move: 'cancel'; at: Date }
  /** Chosen per interrupted job, inside the backend's atomic step, by `Interrupted`. */
  | { move: 'crash'; ending: Extract<Ending, { status: 'Failed' }>; owed: OwedWebhook | null }
  | { move: 'handBack'; nodeId: string; attempt: number }
  | { move: 'requeueInterrupted' | 'requeue' | 'expire' | 'forget' };

/** A move on a job that exists (every one but `admit`). */
export type JobMove = Exclude<Move, AdmitMove>;

/**
 * What becomes of a job found interrupted (its run ended with its process or node), decided on the
 * job as it stands inside the backend's atomic step: requeued, or failed once it has crashed too often.
 */
export type Interrupted = (job: Job) => { move: 'requeueInterrupted' } | Extract<Move, { move: 'crash' }>;

/** Every interrupted job runs again (what a caller with no crash limit asks). */
export const requeueAlways: Interrupted = () => ({ move: 'requeueInterrupted' });

/** The fields a move writes, given the job as it is inside the atomic step (admit: the whole record). */
function patchOf(m: Move, job: Job): Partial<Job> {
  switch (m.move) {
    case 'admit':
      return { ...m.job, status: 'Queued' };
    case 'start':
      return {
        status: 'Running',
        startedAt: m.at.toISOString(),
        attempts: job.attempts + 1,
        progress: { percent: 0, phase: 'starting' },
        lease: { nodeId: m.nodeId, expiresAt: new Date(m.at.getTime() + m.leaseMs).toISOString() },
        ranOn: m.nodeId,
      };
    case 'succeed':
    case 'fail':
      return { ...m.ending, lease: null };
    case 'crash':
      return { ...m.ending, crashes: job.crashes + 1, lease: null };
    case 'cancel':
      return { status: 'Canceled', completedAt: m.at.toISOString(), progress: { percent: job.progress.percent, phase: null }, lease: null };
    case 'requeueInterrupted':
      return { status: 'Queued', lease: null, progress: { percent: 0, phase: null }, crashes: job.crashes + 1 };
    case 'handBack':
    case 'requeue':
      return { status: 'Queued', lease: null, progress: { percent: 0, phase: null } };
    case 'expire':
      return { expired: true };
    case 'forget':
      return {};
  }
}

/** A decided move to write (see `decide`). */
export interface Applied {
  kind: 'apply';
  /** The fields to write (`gone`: delete the record instead; admit: the whole record). */
  patch: Partial<Job>;
  gone: boolean;
  credits: CreditEffect;
  owed: OwedWebhook | null;
}

/** An admission refused by one of the table's checks, and what the credits check saw. */
export type AdmissionRefused = { refusal: 'queue.limit_exceeded' } | { refusal: 'entitlements.insufficient_credits'; required: number; available: number };

/** A move's complete effect on one job, decided inside the backend's atomic step. */
export type Decision =
  | Applied
  /** Already done by this very move (same node and attempt, an idempotent move, an admitted id): write nothing. */
  | { kind: 'replay' }
  | { kind: 'refuse'; refusal: Refusal }
  | ({ kind: 'refuse' } & AdmissionRefused);

/** What `decide` answers an admission. */
export type AdmitDecision = Applied | { kind: 'replay' } | ({ kind: 'refuse' } & AdmissionRefused);

/**
 * Decides `m` on `job` (the record as it stands, undefined: none) by the table: allowed sources,
 * the checks of a move that creates the job, fencing, replay, patch, credits, webhook.
 */
export function decide(m: AdmitMove, job: Job | undefined): AdmitDecision;
export function decide(m: JobMove, job: Job | undefined): Applied | { kind: 'replay' } | { kind: 'refuse'; refusal: Refusal };
export function decide(m: Move, job: Job | undefined): Decision;
export function decide(m: Move, job: Job | undefined): Decision {
  const t = TRANSITIONS[m.move];
  if (m.move === 'admit') return job ? { kind: 'replay' } : admission(m, t);
  if (!job) return { kind: 'refuse', refusal: 'not_found' };
  if (t.fenced && 'attempt' in m) {
    const mine = job.attempts === m.attempt && job.ranOn === m.nodeId;
    if (mine && job.status === t.to) return { kind: 'replay' };
    if (job.status === 'Running' && !(mine && job.lease?.nodeId === m.nodeId)) return { kind: 'refuse', refusal: 'fenced' };
  }
  if (!t.from.includes(job.status)) return { kind: 'refuse', refusal: t.refusal ?? 'not_found' };
  const patch = patchOf(m, job);
  if (t.to === 'same' && Object.entries(patch).every(([k, v]) => job[k as keyof Job] === v)) return { kind: 'replay' };
  return applied(t, patch, 'owed' in m ? m.owed : null);
}

function applied(t: Transition, patch: Partial<Job>, owed: OwedWebhook | null): Applied {
  return { kind: 'apply', patch, gone: t.to === 'gone', credits: t.credits, owed: t.owesWebhook ? owed : null };
}

/** A new job, refused by the first of the table's checks its account fails. */
function admission(m: AdmitMove, t: Transition): AdmitDecision {
  const failed = (t.checks ?? []).find((check) => !ADMISSION_CHECKS[check](m.job, m.room, m.limits));
  if (failed === 'entitlements.insufficient_credits') return { kind: 'refuse', refusal: failed, required: m.job.creditCost, available: Math.max(0, m.room.available) };
  if (failed) return { kind: 'refuse', refusal: failed };
  return applied(t, patchOf(m, m.job), null);
}
