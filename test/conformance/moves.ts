// The job store's moves as the tests call them: one named call per move, each building the move
// `Lifecycle` would and answering as the old per-move calls did.
import type { JobStore, MoveResult } from '../../src/jobs/backend.ts';
import type { Ending, OwedWebhook } from '../../src/jobs/moves.ts';
import type { Job } from '../../src/jobs/types.ts';

type Store = { jobs: JobStore };

/** The `succeed` or `fail` move (by the ending's status) of `attempt` run by `nodeId`. */
export function finish(b: Store, id: string, nodeId: string, attempt: number, ending: Ending, owed: OwedWebhook | null): Promise<MoveResult> {
  return b.jobs.move(id, { move: ending.status === 'Succeeded' ? 'succeed' : 'fail', nodeId, attempt, ending, owed });
}

/** The `cancel` move: the canceled job, or undefined when refused. */
export async function cancel(b: Store, id: string, at: Date): Promise<Job | undefined> {
  const r = await b.jobs.move(id, { move: 'cancel', at });
  return r.ok ? r.job : undefined;
}

/** The `expire` move: the job, or undefined when it has not ended (or is gone). */
export async function expire(b: Store, id: string): Promise<Job | undefined> {
  const r = await b.jobs.move(id, { move: 'expire' });
  return r.ok ? r.job : undefined;
}

/** The `forget` move: true once the record is gone (also when it already was). */
export async function forget(b: Store, id: string): Promise<boolean> {
  const r = await b.jobs.move(id, { move: 'forget' });
  return r.ok || r.refusal === 'not_found';
}

/** Until when a lease of `ms` taken at `at` holds. */
export const until = (ms: number, at = new Date()) => new Date(at.getTime() + ms);
