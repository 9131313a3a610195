import type { JobOptions } from '../catalog/types.ts';
import type { CompressorFailureCode } from '../catalog/contract.ts';

export type JobStatus = 'Queued' | 'Running' | 'Succeeded' | 'Failed' | 'Canceled';

/** The statuses a job ends in (which they are, for the code that acts on it, is `STATUSES.ended` in ./moves.ts). */
export type TerminalStatus = 'Succeeded' | 'Failed' | 'Canceled';

/** Why the engine stops a running job's worker. */
export type AbortReason = 'jobs.canceled' | 'jobs.timeout' | 'server.shutting_down' | 'jobs.lease_lost';

/** Codes of failures the engine itself decides (the compressors' own are `CompressorFailureCode`). */
export type EngineFailureCode =
  | 'jobs.timeout'
  | 'jobs.worker_crashed'
  /** Its runs ended with their process (or node) as many times as the setting allows (`jobMaxCrashes`). */
  | 'jobs.crashed'
  /** A worker stopped by the engine (cancel, time limit, shutdown); the engine's reason decides the end. */
  | 'jobs.aborted'
  | 'jobs.worker_error'
  | 'jobs.unknown_compressor'
  | 'jobs.input_missing'
  | 'jobs.disk_full'
  | 'jobs.internal_error';

export type FailureCode = EngineFailureCode | CompressorFailureCode;

/** A reason a job ended Failed: a machine-readable code and a short human detail. */
export interface JobFailure {
  code: FailureCode;
  /** At most `ERROR_DETAIL_MAX` UTF-16 units (cut by `truncateDetail` in the `fail` move). */
  detail: string;
}

/** Webhook settings as validated at submission. */
export interface JobWebhook {
  url: string;
  secret: string;
  events: ('succeeded' | 'failed')[];
}

/** A Succeeded job's output; its bytes are the BlobStore's `output` blob of the job. */
export interface JobOutput {
  /** Dotless output format. */
  format: string;
  contentType: string;
  bytes: number;
  width?: number;
  height?: number;
  /** The compressor's `CompressResult.perceivedQuality`, as measured; absent when nothing was encoded lossily. */
  perceivedQuality?: number;
  /**
   * SHA-256 of the output's bytes (hex), taken once as it is stored: downloads answer it as their
   * ETag without reading the file again. Absent on outputs stored before it was recorded.
   */
  sha256?: string;
}

/** Which node runs a Running job, until when, unless it renews. */
export interface JobLease {
  nodeId: string;
  /** ISO time; past it the job is interrupted and `requeueInterrupted` sends it back to the queue. */
  expiresAt: string;
}

export interface Job {
  id: string;
  account: string;
  /** Job type (the catalog's), e.g. `image.jpg-compress`. */
  jobType: string;
  /** Dotless input format. */
  format: string;
  /** The input's name without its extension (never used as a path). */
  fileName: string;
  options: JobOptions;
  status: JobStatus;
  progress: { percent: number; phase: string | null };
  inputBytes: number;
  /** Credits reserved at admission and charged on success. */
  creditCost: number;
  output: JobOutput | null;
  error: JobFailure | null;
  webhook: JobWebhook | null;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  /** When the output is deleted (completion + retention); set on completion. */
  expiresAt: string | null;
  /** Set by `expire`: the job's files are deleted (downloads answer 410). */
  expired: boolean;
  /**
   * How many times the job was started. `start` increments it; the value a node got from its
   * claim is its fencing token: a finish, renew or progress with another number is refused.
   */
  attempts: number;
  /**
   * How many of its runs ended with their process or node (found Running under a lease that expired,
   * or held by a node that restarted): `requeueInterrupted` counts them; a run stopped by a graceful
   * shutdown is handed back (`handBack`) and does not count. Absent (0) in `jobs.log` records written before 0.2.0.
   */
  crashes: number;
  /** Set while Running, null otherwise. */
  lease: JobLease | null;
  /** The node that started the latest attempt: a finish replayed by it (same attempt) is answered, not refused. */
  ranOn: string | null;
}

/** What a submission fixes about a job; the rest starts as `queuedJob` sets it. */
export type Submission = Pick<Job, 'id' | 'account' | 'jobType' | 'format' | 'fileName' | 'options' | 'inputBytes' | 'creditCost' | 'webhook'>;

/** The record `admit` stores for a submission: Queued, never started, holding no lease. */
export function queuedJob(s: Submission, createdAt: Date): Job {
  return {
    ...s,
    status: 'Queued',
    progress: { percent: 0, phase: null },
    output: null,
    error: null,
    createdAt: createdAt.toISOString(),
    startedAt: null,
    completedAt: null,
    expiresAt: null,
    expired: false,
    attempts: 0,
    crashes: 0,
    lease: null,
    ranOn: null,
  };
}
