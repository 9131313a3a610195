import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompressorPool } from '../../src/jobs/pool.ts';

/** A job run through a one-thread pool, as the server and the CLI run it: the progress the engine is given. */
export async function progressThroughPool(jobType: string, inputPath: string): Promise<[number, string][]> {
  const pool = new CompressorPool(1);
  const out = mkdtempSync(join(tmpdir(), 'compressd-progress-'));
  try {
    const seen: [number, string][] = [];
    const format = inputPath.split('.').pop()!;
    const done = await pool.run({ jobId: 'progress', jobType, format, options: {}, inputPath, outDir: out }, new AbortController().signal, (percent, phase) => seen.push([percent, phase]));
    assert.equal(done.ok, true, JSON.stringify(done));
    const percents = seen.map(([p]) => p);
    assert.deepEqual(percents, [...percents].sort((a, b) => a - b), `never backwards: ${JSON.stringify(seen)}`);
    return seen;
  } finally {
    await pool.close();
    rmSync(out, { recursive: true, force: true });
  }
}

/** How many distinct percentages strictly between `from` and `to` were reported in `phase`. */
export function valuesWithin(seen: [number, string][], from: number, to: number, phase: string): number {
  return new Set(seen.filter(([p, s]) => p > from && p < to && s === phase).map(([p]) => p)).size;
}
