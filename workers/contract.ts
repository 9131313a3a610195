import type { JobOptions } from '../src/catalog/types.ts';

/** What a compressor is given: files and options, nothing of HTTP, accounts or the engine. */
export interface CompressJob {
  inputPath: string;
  /** Dotless input format as submitted (file extension or `sourceFormat`). */
  format: string;
  options: JobOptions;
}

export interface CompressContext {
  signal: AbortSignal;
  /** Report progress: percent 0-100 and a phase name (see README: Progress phases). */
  progress(percent: number, phase: string): void;
}

export interface CompressResult {
  path: string;
  /** Dotless output format. */
  format: string;
  contentType: string;
  width?: number;
  height?: number;
}

export type Compress = (job: CompressJob, out: { dir: string }, ctx: CompressContext) => Promise<CompressResult>;

/**
 * A failure the compressor understands (corrupt file, too many pixels, encrypted PDF…).
 * The pool turns it into a Failed job with this code; anything else becomes `jobs.worker_error`.
 */
export class JobError extends Error {
  constructor(readonly code: string, detail: string) {
    super(detail);
    this.name = 'JobError';
  }
}
