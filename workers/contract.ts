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
  /** Report progress: percent 0-100 and a phase name (see docs/api.md: Progress phases). */
  progress(percent: number, phase: string): void;
}

export interface CompressResult {
  path: string;
  /** Dotless output format. */
  format: string;
  contentType: string;
  width?: number;
  height?: number;
  /**
   * SSIMULACRA2 of the output against the input's pixels (0-100; about 90: hard to tell apart at 1:1, 70: high
   * quality), as the quality search measured it: the lowest of a document's lossy pictures. Absent when nothing
   * was encoded lossily (lossless output, the input returned unchanged, no picture recompressed).
   */
  perceivedQuality?: number;
}

export type Compress = (job: CompressJob, out: { dir: string }, ctx: CompressContext) => Promise<CompressResult>;

/** Codes of the failures compressors report; the engine adds its own (`EngineFailureCode`). */
export type CompressorFailureCode =
  | 'image.decode_failed'
  | 'image.truncated'
  | 'image.unsupported_variant'
  | 'image.format_mismatch'
  | 'image.empty'
  | 'image.too_many_pixels'
  | 'raw.no_image_data'
  | 'raw.unsupported'
  | 'pdf.damaged'
  | 'pdf.encrypted'
  | 'office.damaged'
  | 'office.not_ooxml'
  | 'office.zip_bomb'
  | 'office.unsafe_entry_name'
  | 'office.encrypted'
  | 'compare.unavailable'
  | 'compare.invalid_query'
  | 'compare.too_large'
  | 'jobs.unknown_compressor'
  /** The job's estimated peak memory is more than the node's whole budget for running jobs (workers/shared/memory.ts). */
  | 'jobs.memory_budget';

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
