import type { CompressJob, CompressorFailureCode, CompressResult } from '../src/catalog/contract.ts';

// Inside a thread: the compressor's signature and the failure it throws. What crosses the thread
// boundary (the job, the result, the failure codes) is src/catalog/contract.ts.

export interface CompressContext {
  signal: AbortSignal;
  /**
   * Report progress: percent 0-100 and a phase name (see docs/api.md: Progress phases). `toward`: a
   * step that reports nothing of its own follows, during which the pool moves the percentage on
   * (ProgressMessage; shared/progress.ts estimatedProgress).
   */
  progress(percent: number, phase: string, toward?: { percent: number; predictedMs: number }): void;
}

export type Compress = (job: CompressJob, out: { dir: string }, ctx: CompressContext) => Promise<CompressResult>;

/**
 * A failure the compressor understands (corrupt file, too many pixels, encrypted PDF…).
 * The pool turns it into a Failed job with this code; anything else becomes `jobs.worker_error`.
 */
export class JobError extends Error {
  constructor(readonly code: CompressorFailureCode, detail: string) {
    super(detail);
    this.name = 'JobError';
  }
}
