import { estimateAt, type ProgressMessage } from '../catalog/contract.ts';

/**
 * A running job's progress as its thread tells it, passed on never backwards and only when it
 * changes. Through a step the thread announced (ProgressMessage.toward: one native call, a search, or
 * a call that holds the thread, such as LibRaw in WebAssembly, during which no timer of the thread
 * could run), the percentage is moved on here by the step's prediction, until the thread's next message.
 */
export class ProgressOfThread {
  private last = { percent: 0, phase: '' };
  private ticking: NodeJS.Timeout | undefined;

  constructor(private readonly report: (percent: number, phase: string) => void) {}

  told(m: ProgressMessage): void {
    this.stop();
    this.pass(m.percent, m.phase);
    const { toward } = m;
    if (!toward) return;
    const started = performance.now();
    this.ticking = setInterval(() => this.pass(Math.floor(estimateAt(m.percent, toward.percent, toward.predictedMs, performance.now() - started)), m.phase), TICK_MS);
    this.ticking.unref();
  }

  stop(): void {
    clearInterval(this.ticking);
    this.ticking = undefined;
  }

  private pass(percent: number, phase: string): void {
    const next = { percent: Math.max(this.last.percent, percent), phase };
    if (next.percent === this.last.percent && next.phase === this.last.phase) return;
    this.last = next;
    this.report(next.percent, next.phase);
  }
}

/** The engine writes a running job's progress at most every 250 ms. */
const TICK_MS = 250;
