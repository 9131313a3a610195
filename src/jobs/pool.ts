import { MessageChannel, type MessagePort, type Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { THREAD_IDLE_MS, type CompressOutcome, type CompressTask, type MemoryAnswer, type MemoryAsk, type MemoryNowAnswer, type MemoryNowAsk, type PreviewJob, type PreviewOutcome, type PreviewTask, type ProgressMessage } from '../catalog/contract.ts';
import { compressorForJobType } from '../catalog/index.ts';
import { truncateDetail } from '../errors.ts';
import { runtimeTree, workerEntry } from '../runtime/bundled.ts';
import type { RunOutcome, Runner, RunRequest } from './backend.ts';
import { defaultMemoryBudgetBytes, MemoryBudget, type MemoryHold } from './memory-budget.ts';
import { ProgressOfThread } from './thread-progress.ts';

export type { CompressOutcome, PreviewOutcome };

/**
 * How long a stopped task has to reach its next abort check before its thread is terminated. Threads
 * are not terminated at once: a thread ended inside a libvips operation leaks what that operation
 * holds (60 threads terminated mid-encode left 589 MB that never came back; 150 ended between
 * operations left none).
 */
const STOP_GRACE_MS = 10_000;

/**
 * Forwards an abort to the task as the string `abort` (the compressors stop at their next check) and
 * returns the signal that terminates the task's thread if it has not ended after the grace period,
 * or at once through `now` (the pool closing: nothing is left to protect from a leak).
 */
function stopByRequest(signal: AbortSignal, port: MessagePort, beforeHardStop: () => void): { hardStop: AbortSignal; now: () => void; done: () => void } {
  const hard = new AbortController();
  let grace: NodeJS.Timeout | undefined;
  const now = () => {
    clearTimeout(grace);
    beforeHardStop();
    hard.abort();
  };
  const onAbort = () => {
    port.postMessage('abort');
    grace = setTimeout(now, STOP_GRACE_MS);
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return {
    hardStop: hard.signal,
    now,
    done: () => {
      clearTimeout(grace);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

/** Grows a job's memory hold as its worker asks and answers it (granted once there is room, or refused: it can never fit). */
async function answerMemoryAsk(hold: MemoryHold, bytes: number, budget: number, port: MessagePort): Promise<void> {
  const granted = await hold.grow(bytes);
  const answer: MemoryAnswer = granted ? { memory: 'granted' } : { memory: 'refused', budget };
  // The task may have ended meanwhile (stopped): its port is closed, nobody is waiting.
  try {
    port.postMessage(answer);
  } catch {
    // Closed.
  }
}

/** Threads of every pool in this process that are running a job, and threads told to end that have not yet. */
let jobsRunning = 0;
const ending = new Set<Worker>();

/**
 * Worker threads of this process still busy: running a job, or told to end and still inside a native
 * call, which ends only when the call returns (src/ops/exit.ts).
 */
export function busyThreads(): number {
  return jobsRunning + ending.size;
}

/** The worker-thread pool that runs compressors (piscina): one task per job. The engine's and the CLI's runner. */
export class CompressorPool implements Runner {
  private readonly piscina: Piscina;
  /**
   * Compare previews run in threads of their own, so a preview neither waits behind long
   * compressions nor takes a slot the scheduler counts as free for jobs.
   */
  private readonly previews: Piscina;
  readonly previewThreads: number;
  /** Jobs running now, in memory the threads share: a compressor starts work ahead of need only while a core is spare (workers/shared/spare-core.ts). */
  private readonly running = new Int32Array(new SharedArrayBuffer(4));

  /** Terminates a running task's thread at once, per task running (close). */
  private readonly terminators = new Set<() => void>();

  /** One thread more than `slots`, for the engine's fairness lane (backend.ts, `Runner.laneSlots`). */
  readonly laneSlots = 1;

  /**
   * `memory`: the node's budget for running jobs' pictures, which each job's worker asks before it
   * decodes (workers/shared/memory.ts).
   */
  constructor(
    readonly slots: number,
    onThreadError: (err: unknown) => void = () => {},
    readonly memory = new MemoryBudget(defaultMemoryBudgetBytes()),
  ) {
    this.piscina = new Piscina({
      filename: workerEntry(),
      // Threads start with the first job rather than with the process, which keeps start-up short.
      minThreads: 0,
      maxThreads: slots + this.laneSlots,
      idleTimeout: THREAD_IDLE_MS,
      // One task per thread: a compressor is CPU-bound and already uses libvips' threads.
      concurrentTasksPerWorker: 1,
      resourceLimits: { maxOldGenerationSizeMb: 4096 },
      // The runtime tree tells the threads where native programs lie (workers/decoders/heic-native.ts).
      workerData: { runningJobs: this.running.buffer, memoryBudget: memory.bytes, runtimeTree: runtimeTree() },
    });
    this.previewThreads = Math.max(1, Math.floor(slots / 2));
    this.previews = new Piscina({
      filename: workerEntry(),
      minThreads: 0,
      maxThreads: this.previewThreads,
      idleTimeout: THREAD_IDLE_MS,
      concurrentTasksPerWorker: 1,
      resourceLimits: { maxOldGenerationSizeMb: 2048 },
      workerData: { runtimeTree: runtimeTree() },
    });
    // A thread that cannot even load its module fails the task it was started for (its run()
    // rejects); the pool-level event must not become an uncaught error that ends the server.
    for (const pool of [this.piscina, this.previews]) pool.on('error', onThreadError);
  }

  /** Makes a finished job's compare previews; an abort (time limit) stops the task (stopByRequest). */
  async preview(job: PreviewJob, signal: AbortSignal): Promise<PreviewOutcome> {
    const { port1, port2 } = new MessageChannel();
    const stop = stopByRequest(signal, port1, () => this.watchEnding());
    this.terminators.add(stop.now);
    const task: PreviewTask = { preview: job, port: port2 };
    try {
      const outcome = (await this.previews.run(task, { transferList: [port2], signal: stop.hardStop })) as PreviewOutcome;
      if (signal.aborted) return { ok: false, code: 'compare.timeout', detail: 'Making the previews took too long.' };
      return outcome;
    } catch (err) {
      if (signal.aborted) return { ok: false, code: 'compare.timeout', detail: 'Making the previews took too long.' };
      const message = err instanceof Error ? err.message : String(err);
      return { ok: false, code: 'compare.unavailable', detail: truncateDetail(`The preview worker stopped unexpectedly: ${message}`) };
    } finally {
      stop.done();
      this.terminators.delete(stop.now);
      port1.close();
    }
  }

  /**
   * Runs one job. An abort through `signal` stops the task (stopByRequest); a thread that dies fails
   * only this job with `jobs.worker_crashed`.
   */
  async run(req: RunRequest, signal: AbortSignal, progress: (percent: number, phase: string) => void): Promise<RunOutcome> {
    const entry = compressorForJobType(req.jobType);
    if (!entry) return { ok: false, failure: { code: 'jobs.unknown_compressor', detail: `No compressor for ${req.jobType}.` } };
    const { port1, port2 } = new MessageChannel();
    const hold = this.memory.hold();
    const moving = new ProgressOfThread(progress);
    port1.on('message', (m: ProgressMessage | MemoryAsk | MemoryNowAsk) => {
      if ('memory' in m) void answerMemoryAsk(hold, m.memory, this.memory.bytes, port1);
      else if ('memoryNow' in m) port1.postMessage({ memoryNow: hold.growNow(m.memoryNow) } satisfies MemoryNowAnswer);
      else moving.told(m);
    });
    const stop = stopByRequest(signal, port1, () => this.watchEnding());
    this.terminators.add(stop.now);
    const task: CompressTask = { worker: entry.worker, job: { inputPath: req.inputPath, format: req.format, options: req.options }, outDir: req.outDir, port: port2 };
    Atomics.add(this.running, 0, 1);
    jobsRunning++;
    try {
      const outcome = (await this.piscina.run(task, { transferList: [port2], signal: stop.hardStop })) as CompressOutcome;
      if (signal.aborted) return { ok: false, failure: { code: 'jobs.aborted', detail: 'The job was stopped.' } };
      return outcome.ok ? { ok: true, output: outcome.result } : { ok: false, failure: { code: outcome.code, detail: outcome.detail } };
    } catch (err) {
      if (signal.aborted) return { ok: false, failure: { code: 'jobs.aborted', detail: 'The job was stopped.' } };
      const message = err instanceof Error ? err.message : String(err);
      return { ok: false, failure: { code: 'jobs.worker_crashed', detail: `The compression worker stopped unexpectedly: ${message}` } };
    } finally {
      moving.stop();
      hold.release();
      Atomics.sub(this.running, 0, 1);
      jobsRunning--;
      stop.done();
      this.terminators.delete(stop.now);
      port1.close();
    }
  }

  get utilization(): number {
    return this.piscina.utilization;
  }

  /**
   * Ends the pool. A task still running (a server stop hands its job back without waiting for it)
   * has its thread terminated now: piscina's close would otherwise wait for it, and a thread inside
   * a native call can take minutes.
   */
  async close(): Promise<void> {
    this.watchEnding();
    for (const terminate of this.terminators) terminate();
    await Promise.all([this.piscina.close({ force: true }), this.previews.close({ force: true })]);
  }

  /** Piscina forgets a stopped task's thread at once: every thread is watched from just before a stop until its exit (busyThreads). */
  private watchEnding(): void {
    for (const thread of [...this.piscina.threads, ...this.previews.threads]) {
      if (ending.has(thread) || thread.threadId === -1) continue;
      ending.add(thread);
      thread.once('exit', () => ending.delete(thread));
    }
  }
}
