/** Where the offline compressor reports: a live bar per running file, a line per finished one. */
export interface Reporter {
  start(id: number, label: string): void;
  progress(id: number, percent: number, phase: string): void;
  /** The file is done: its bar (if any) goes and `line` stays. */
  finish(id: number, line: string): void;
  close(): void;
}

interface Bar {
  label: string;
  percent: number;
  phase: string;
}

export interface TtyStream {
  write(chunk: string): boolean;
  columns?: number;
}

const REDRAW_MS = 80;
const PHASE_CELLS = 12;

/**
 * Bars drawn on a terminal (stderr) under the finished lines (stdout): the live area is erased
 * (cursor up, clear to end) and redrawn at most every 80 ms, and around every finished line.
 */
export class TtyReporter implements Reporter {
  private readonly bars = new Map<number, Bar>();
  private drawn = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly screen: TtyStream, private readonly lines: { write(chunk: string): boolean }) {}

  start(id: number, label: string): void {
    this.bars.set(id, { label, percent: 0, phase: 'queued' });
    this.schedule();
  }

  progress(id: number, percent: number, phase: string): void {
    const bar = this.bars.get(id);
    if (!bar) return;
    bar.percent = percent;
    bar.phase = phase;
    this.schedule();
  }

  finish(id: number, line: string): void {
    this.bars.delete(id);
    this.erase();
    this.lines.write(`${line}\n`);
    this.draw();
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.erase();
  }

  private schedule(): void {
    this.timer ??= setTimeout(() => {
      this.timer = null;
      this.erase();
      this.draw();
    }, REDRAW_MS);
  }

  private erase(): void {
    if (this.drawn) this.screen.write(`\x1b[${this.drawn}F\x1b[J`);
    this.drawn = 0;
  }

  private draw(): void {
    // A pseudo-terminal without a size reports 0 columns.
    const width = Math.max(40, this.screen.columns || 80) - 1;
    let text = '';
    for (const bar of this.bars.values()) text += `${renderBar(bar, width)}\n`;
    this.screen.write(text);
    this.drawn = this.bars.size;
  }
}

export function renderBar(bar: Bar, width: number): string {
  const pct = `${String(Math.round(bar.percent)).padStart(3)}%`;
  const cells = 20;
  const full = Math.round((bar.percent / 100) * cells);
  const gauge = `[${'█'.repeat(full)}${'░'.repeat(cells - full)}]`;
  const phase = bar.phase.slice(0, PHASE_CELLS);
  const room = width - gauge.length - pct.length - PHASE_CELLS - 3;
  const label = bar.label.length > room ? `…${bar.label.slice(bar.label.length - room + 1)}` : bar.label.padEnd(room);
  return `${label} ${gauge} ${pct} ${phase}`.slice(0, width);
}

/** No terminal: one plain line per finished file, nothing else. */
export class PlainReporter implements Reporter {
  constructor(private readonly lines: { write(chunk: string): boolean }) {}
  start(): void {}
  progress(): void {}
  finish(_id: number, line: string): void {
    this.lines.write(`${line}\n`);
  }
  close(): void {}
}
