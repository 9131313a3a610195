import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { RAW_FORMATS } from '../src/catalog/compressors/universal.ts';

export interface BenchContext {
  runs: number;
  resultsDir: string;
  /** Absolute path of ../shared/corpus/ (with a trailing slash). */
  corpus: string;
}

export const exec = promisify(execFile);

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Runs `fn` `runs` times and returns the last result with the median wall time in ms. */
export async function timed<T>(runs: number, fn: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const times: number[] = [];
  let result!: T;
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    result = await fn();
    times.push(performance.now() - t);
  }
  return { result, ms: median(times) };
}

export function markdownTable(header: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Whether a file is a camera RAW, by the extensions the universal compressor's catalog entry lists. */
export function isRaw(path: string): boolean {
  return RAW_FORMATS.includes(path.split('.').pop()?.toLowerCase() ?? '');
}
