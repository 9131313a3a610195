import type { ProgressMessage } from '../../src/catalog/contract.ts';
import type { CompressContext } from '../contract.ts';

/** Where an announced step ends and how long it is predicted to take (ProgressMessage.toward). */
export type Toward = NonNullable<ProgressMessage['toward']>;

/**
 * Progress through a step that cannot report its own: one native call (oxipng's libdeflate on a
 * 12 MP photo runs 10 s in a single call), a search whose probe count is not known ahead, a call
 * that holds this thread. The step is announced at its start with its end and predicted time, and
 * the pool moves the percentage on while it runs (src/jobs/thread-progress.ts): halfway at the
 * prediction, seven eighths at three times it, so a poll sees the job move however far the
 * prediction is off (the same pixels take 140-810 ns each in oxipng, by their content). Its end is
 * reported only when the step has ended.
 */
export async function estimatedProgress<T>(
  step: () => Promise<T>,
  { from, to, predictedMs }: { from: number; to: number; predictedMs: number },
  report: (value: number, toward?: Toward) => void,
): Promise<T> {
  report(from, { percent: to, predictedMs });
  const result = await step();
  report(to);
  return result;
}

/** A report on a 0-1 scale passed on as percent, from `from` over `span` points, an announced end included. */
export function onScale(from: number, span: number, report: (percent: number, toward?: Toward) => void): (fraction: number, toward?: Toward) => void {
  const at = (f: number) => from + span * f;
  return (f, toward) => report(at(f), toward && { percent: at(toward.percent), predictedMs: toward.predictedMs });
}

/**
 * A run's progress as the pool is told it: never backwards (an estimated step and a compressor's own
 * milestone may report out of order) and only when it changes (or announces a synchronous call);
 * percent rounded down into 0-100, so that an estimate never shows its step's end.
 */
export function forwardProgress(send: (p: ProgressMessage) => void): CompressContext['progress'] {
  let last: ProgressMessage = { percent: 0, phase: '' };
  return (percent, phase, toward) => {
    const next = { percent: Math.max(last.percent, Math.min(100, Math.floor(percent))), phase };
    if (next.percent === last.percent && next.phase === last.phase && !toward) return;
    last = next;
    send(toward ? { ...next, toward } : next);
  };
}
