import type { MessagePort } from 'node:worker_threads';
import type { CompressorModule, JobOptions } from './types.ts';

// The messages between the pool (src/jobs/pool.ts) and its threads (workers/compress.ts). Both sides
// import them from here, so the server never imports worker code; what runs inside a thread (the
// compressor's signature, JobError) is workers/contract.ts.

/**
 * How long the pool keeps a worker thread that has nothing to run before it exits. A thread keeps
 * what it reuses from job to job (the perceptual metric's memory, workers/image/ssimulacra2.ts) as long.
 */
export const THREAD_IDLE_MS = 60_000;

/** What a compressor is given: files and options, nothing of HTTP, accounts or the engine. */
export interface CompressJob {
  inputPath: string;
  /** Dotless input format as submitted (file extension or `sourceFormat`). */
  format: string;
  options: JobOptions;
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

/** Codes of the failures compressors report; the engine adds its own (`EngineFailureCode`, src/jobs/types.ts). */
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

/** One task of the pool: which compressor module to run on which files. */
export interface CompressTask {
  worker: CompressorModule;
  job: CompressJob;
  outDir: string;
  /** Progress goes out as `ProgressMessage` and memory asks as `MemoryAsk`; the string `abort` and `MemoryAnswer`s come in. */
  port: MessagePort;
}

/**
 * A run's progress. `toward`: a step that reports nothing of its own follows (one native call, a
 * search, a call that holds the thread such as LibRaw in WebAssembly), so the pool moves the
 * percentage toward `toward.percent` by `toward.predictedMs` until the thread's next message.
 */
export interface ProgressMessage {
  percent: number;
  phase: string;
  toward?: { percent: number; predictedMs: number };
}

/**
 * Where a step's percentage stands `elapsedMs` into it, moving from `from` toward `to` by its predicted
 * time: halfway at the prediction, seven eighths at three times it, never `to` itself (the step's end is
 * reported when it has ended).
 */
export function estimateAt(from: number, to: number, predictedMs: number, elapsedMs: number): number {
  return from + (to - from) * (1 - 2 ** (-elapsedMs / Math.max(1, predictedMs)));
}

export type CompressOutcome = { ok: true; result: CompressResult } | { ok: false; code: CompressorFailureCode | 'jobs.worker_error'; detail: string };

/** The memory gate's messages on a task's port (workers/shared/memory.ts asks, src/jobs/memory-budget.ts answers). */
export type MemoryAsk = { memory: number };
export type MemoryAnswer = { memory: 'granted' } | { memory: 'refused'; budget: number };
/** An ask for work that is only worth starting now (work ahead of need): granted at once, or not at all. */
export type MemoryNowAsk = { memoryNow: number };
export type MemoryNowAnswer = { memoryNow: boolean };

/** The pool's second task kind: compare previews of a finished job (the string `abort` comes in on `port`). */
export interface PreviewTask {
  preview: PreviewJob;
  port: MessagePort;
}

export type PreviewOutcome = { ok: true; comparison: Comparison } | { ok: false; code: string; detail: string };

/** `fit`: PREVIEW_EDGE; `full`: the compared picture at (up to FULL_EDGE) its own size (workers/preview/encode.ts). */
export type PreviewSize = 'fit' | 'full';

/** What the compare endpoint needs made from a finished job's files. */
export interface PreviewJob {
  inputPath: string;
  /** Dotless input format as submitted. */
  inputFormat: string;
  outputPath: string;
  /** Dotless output format. */
  outputFormat: string;
  /** `fit` (the first look) or `full` (for zooming in). */
  size: PreviewSize;
  /** 1-based page of a PDF; ignored for other formats. */
  page: number;
}

export interface PreviewImage {
  /** Base64 of the encoded preview. */
  data: string;
  mimeType: 'image/jpeg' | 'image/webp';
  width: number;
  height: number;
}

export interface Size {
  width: number;
  height: number;
}

export interface Comparison {
  before: PreviewImage;
  after: PreviewImage;
  /** What was compared at full size: image pixels, a PDF page in points, an Office document's picture. */
  input: Size;
  output: Size;
  /** PDF: the page shown (1-based) and how many the input has. */
  page?: { number: number; count: number };
  /** DOCX/PPTX: the part name of the picture shown, e.g. `word/media/image1.jpeg`. */
  picture?: string;
}
