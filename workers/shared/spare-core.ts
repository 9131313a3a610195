import { availableParallelism } from 'node:os';
import { workerData } from 'node:worker_threads';

/**
 * Jobs running in this process's compressor pool, counted by the pool (src/jobs/pool.ts) in
 * memory its threads share. Outside a pool (a compressor called directly, the benchmark) the
 * caller's job is the only one.
 */
const running = (workerData as { runningJobs?: unknown } | undefined)?.runningJobs;
const jobs = running instanceof SharedArrayBuffer ? new Int32Array(running) : undefined;

/**
 * Whether a core would otherwise sit idle: fewer jobs run than the machine has cores. Work
 * started ahead of need (a quality probe the search will probably ask for next) is only worth
 * starting then; when every core has a job it would slow the others down.
 */
export function spareCore(): boolean {
  return (jobs ? Atomics.load(jobs, 0) : 1) < availableParallelism();
}
