import { estimateAt, type ProgressMessage } from '../../src/catalog/contract.ts';
import type { CompressContext } from '../contract.ts';

/**
 * Progress through a step that cannot report its own: one native call (oxipng's libdeflate on a
 * 12 MP photo runs 10 s in a single call) or a search whose probe count is not known ahead. The
 * percentage moves from `from` toward `to` as the step's predicted time passes: halfway at the
 * prediction, seven eighths at three times it, and `to` only when the step has ended. So a poll
 * sees the job move however far the prediction is off (the same pixels take 140-810 ns each in
 * oxipng, by their content), and never a step reported done before it is.
 */
export async function estimatedProgress<T>(
  step: () => Promise<T>,
  { from, to, predictedMs }: { from: number; to: number; predictedMs: number },
  report: (percent: number) => void,
): Promise<T> {
  const started = performance.now();
  const tick = () => report(estimateAt(from, to, predictedMs, performance.now() - started));
  const timer = setInterval(tick, TICK_MS);
  try {
    const result = await step();
    report(to);
    return result;
  } finally {
    clearInterval(timer);
  }
}

/** How often the estimate is reported: the server writes a running job's progress at most every 250 ms. */
const TICK_MS = 250;

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
