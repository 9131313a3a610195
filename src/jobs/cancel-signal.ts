import { TRANSITIONS } from './moves.ts';
import type { JobStatus } from './types.ts';

/** Whether a move from `from` to `to` canceled the job: the moves whose end every node hears of. */
export const canceled = (from: JobStatus, to: JobStatus) => to === TRANSITIONS.cancel.to && from !== to;

/**
 * One node's listeners for canceled jobs (the engine stops their workers): `JobStore.onCancel`.
 * A backend feeds it every cancel it learns of — files: its own moves; cluster: every node's, by
 * NOTIFY.
 */
export class CancelSignal {
  private readonly listeners = new Set<(jobId: string) => void>();

  /** Adds a listener; returns its removal. */
  on(listener: (jobId: string) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  emit(jobId: string): void {
    for (const listener of [...this.listeners]) listener(jobId);
  }
}
