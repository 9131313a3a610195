/**
 * Where a start's time went, for the `listening` log line and `npm run bench startup`: each phase's
 * milliseconds since the previous mark; the first since the process started (runtime and module load).
 */
export class StartupPhases {
  private last = 0;
  readonly ms: Record<string, number> = {};

  mark(phase: string): void {
    const now = performance.now();
    this.ms[phase] = Math.round((now - this.last) * 10) / 10;
    this.last = now;
  }
}
