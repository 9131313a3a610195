import type { Ending, OwedWebhook } from './backend.ts';
import type { Job, JobStatus } from './types.ts';

/** The named moves of the lifecycle; every change of a job's record is one of these. */
export type MoveName = 'admit' | 'start' | 'succeed' | 'fail' | 'cancel' | 'requeueInterrupted' | 'crash' | 'handBack' | 'requeue' | 'expire' | 'forget';

/** What a move does to the job's credit hold. */
export type CreditEffect = 'hold' | 'charge' | 'release' | 'none';

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
  /** The refusal a job in a status outside `from` gets. */
  refusal: Refusal;
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
  admit: { from: [], to: 'Queued', credits: 'hold', owesWebhook: false, fenced: false, refusal: 'not_found' },
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

/**
 * What settles the hold of an ended job (or of one whose record is gone): the credit effect of the
 * move that ends in its status, so Succeeded → charge and anything else → release is read off the
 * table. Recovery uses it to complete moves a crash interrupted.
 */
export function settlementOf(status: JobStatus | undefined): CreditEffect {
  const ending = (Object.keys(TRANSITIONS) as MoveName[]).find((m) => TRANSITIONS[m].to === status && TRANSITIONS[m].credits !== 'none');
  return ending ? TRANSITIONS[ending].credits : TRANSITIONS.cancel.credits;
}

/**
 * A move on one job, as the lifecycle computes it; a backend applies it with `decide` and its
 * own atomic write (files: one journal record; cluster: one transaction).
 */
export type Move =
  | { move: 'start'; at: Date; nodeId: string; leaseMs: number }
  | { move: 'succeed' | 'fail'; nodeId: string; attempt: number; ending: Ending; owed: OwedWebhook | null }
  | { move: 'cancel'; at: Date }
  /** Chosen per interrupted job, inside the backend's atomic step, by `Interrupted`. */
  | { move: 'crash'; ending: Extract<Ending, { status: 'Failed' }>; owed: OwedWebhook | null }
  | { move: 'handBack'; nodeId: string; attempt: number }
  | { move: 'requeueInterrupted' | 'requeue' | 'expire' | 'forget' };

/**
 * What becomes of a job found interrupted (its run ended with its process or node), decided on the
 * job as it stands inside the backend's atomic step: requeued, or failed once it has crashed too often.
 */
export type Interrupted = (job: Job) => { move: 'requeueInterrupted' } | Extract<Move, { move: 'crash' }>;

/** Every interrupted job runs again (what a caller with no crash limit asks). */
export const requeueAlways: Interrupted = () => ({ move: 'requeueInterrupted' });

/** The fields a move writes, given the job as it is inside the atomic step. */
function patchOf(m: Move, job: Job): Partial<Job> {
  switch (m.move) {
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

/** A move's complete effect on one job, decided inside the backend's atomic step. */
export type Decision =
  | {
      kind: 'apply';
      /** The fields to write (`gone`: delete the record instead). */
      patch: Partial<Job>;
      gone: boolean;
      credits: CreditEffect;
      owed: OwedWebhook | null;
    }
  /** Already done by this very move (same node and attempt, or an idempotent move): write nothing. */
  | { kind: 'replay' }
  | { kind: 'refuse'; refusal: Refusal };

/** Decides `m` on `job` (undefined: no record) by the table: allowed sources, fencing, replay, patch, credits, webhook. */
export function decide(m: Move, job: Job | undefined): Decision {
  const t = TRANSITIONS[m.move];
  if (!job) return { kind: 'refuse', refusal: 'not_found' };
  if (t.fenced && 'attempt' in m) {
    const mine = job.attempts === m.attempt && job.ranOn === m.nodeId;
    if (mine && job.status === t.to) return { kind: 'replay' };
    if (job.status === 'Running' && !(mine && job.lease?.nodeId === m.nodeId)) return { kind: 'refuse', refusal: 'fenced' };
  }
  if (!t.from.includes(job.status)) return { kind: 'refuse', refusal: t.refusal };
  const patch = patchOf(m, job);
  if (t.to === 'same' && Object.entries(patch).every(([k, v]) => job[k as keyof Job] === v)) return { kind: 'replay' };
  return { kind: 'apply', patch, gone: t.to === 'gone', credits: t.credits, owed: t.owesWebhook && 'owed' in m ? m.owed : null };
}

/** Whether a job in `status` counts as open (Queued or Running) and as running: the cluster's counters. */
export const isOpen = (status: JobStatus) => status === 'Queued' || status === 'Running';
