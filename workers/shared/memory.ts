import { workerData, type MessagePort } from 'node:worker_threads';
import type { MemoryAnswer, MemoryAsk, MemoryNowAnswer, MemoryNowAsk } from '../../src/catalog/contract.ts';
import { JobError } from '../contract.ts';

/**
 * A job's peak memory per decoded pixel, measured (docs/operating.md, "Memory"): a 24 MP photo's
 * JPEG search and PNG palette search peaked 430–470 MB above the process at rest, a 100 MP PNG
 * 2.1 GB — the decoded pixels (3–4 bytes each), the encoder's and the search's working copies
 * and libvips's buffers together, about 20 bytes a pixel.
 */
export const PEAK_BYTES_PER_PIXEL = 20;
/** What any job holds besides its pixels (codec state, the compressor's buffers). */
export const JOB_BASE_BYTES = 32 * 1024 ** 2;

/** A job's peak memory for `pixels` decoded pixels (all frames, or a document's pictures in flight together). */
export const peakBytes = (pixels: number): number => JOB_BASE_BYTES + Math.ceil(pixels * PEAK_BYTES_PER_PIXEL);

/**
 * The node's budget for running jobs (src/jobs/memory-budget.ts), handed to the pool's threads, so
 * a document can leave out a picture that could never fit instead of failing whole. Infinity outside
 * the pool.
 */
export const MEMORY_BUDGET_BYTES: number = (workerData as { memoryBudget?: number } | undefined)?.memoryBudget ?? Infinity;

let task: { port: MessagePort; signal: AbortSignal } | null = null;
/** What the task's hold has grown to, as far as its asks tell (an ask grows it to its size). */
let held = 0;

/** The task this thread runs now (one at a time): its port to the pool and its stop signal; null when it ends. */
export function memoryGateFor(current: { port: MessagePort; signal: AbortSignal } | null): void {
  task = current;
  held = 0;
}

const mb = (bytes: number) => `${Math.round(bytes / 1024 ** 2).toLocaleString('en-US')} MB`;

/**
 * Asks the node's memory budget (src/jobs/memory-budget.ts) for `bytes` before decoding, and waits
 * until running jobs leave room. A job that can never fit fails with `jobs.memory_budget`. Outside
 * a job (compare previews, tests that call compressors directly) there is no budget to ask.
 */
export async function reserveMemory(bytes: number, what: string): Promise<void> {
  const current = task;
  if (!current) return;
  const answer = await askPool<MemoryAnswer>(current, { memory: bytes } satisfies MemoryAsk, 'memory');
  if (answer.memory === 'refused') {
    throw new JobError('jobs.memory_budget', `${what} needs about ${mb(bytes)} of memory at its peak, more than this server's budget for running jobs (${mb(answer.budget)}, --memory-budget-mb).`);
  }
  if (task === current) held = Math.max(held, bytes);
}

/**
 * Asks the node's memory budget for `bytes` more than the task holds, for work worth starting only
 * now (work ahead of need on a spare core): true when the budget had room at once, false when it did
 * not (nothing waits) or the task was stopped. Outside a job there is no budget to ask.
 */
export async function reserveMoreMemoryNow(bytes: number): Promise<boolean> {
  const current = task;
  if (!current) return true;
  const wanted = held + bytes;
  const answer = await askPool<MemoryNowAnswer>(current, { memoryNow: wanted } satisfies MemoryNowAsk, 'memoryNow').catch(() => ({ memoryNow: false }));
  if (answer.memoryNow && task === current) held = Math.max(held, wanted);
  return answer.memoryNow;
}

/** Posts an ask on the task's port and resolves with the pool's answer (the message carrying `key`); rejects when the task is stopped first. */
function askPool<T>(current: { port: MessagePort; signal: AbortSignal }, ask: MemoryAsk | MemoryNowAsk, key: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onMessage = (m: unknown) => {
      if (typeof m !== 'object' || m === null || !(key in m)) return;
      done();
      resolve(m as T);
    };
    const onAbort = () => {
      done();
      reject(current.signal.reason ?? new Error('aborted'));
    };
    const done = () => {
      current.port.off('message', onMessage);
      current.signal.removeEventListener('abort', onAbort);
    };
    if (current.signal.aborted) return onAbort();
    current.port.on('message', onMessage);
    current.signal.addEventListener('abort', onAbort, { once: true });
    current.port.postMessage(ask);
  });
}
