import type { JobOptions } from '../catalog/types.ts';
import type { JobFailure } from '../errors.ts';

export type JobStatus = 'Queued' | 'Running' | 'Succeeded' | 'Failed' | 'Canceled';

export const TERMINAL: ReadonlySet<JobStatus> = new Set(['Succeeded', 'Failed', 'Canceled']);

/** Webhook settings as validated at submission. */
export interface JobWebhook {
  url: string;
  secret: string;
  events: ('succeeded' | 'failed')[];
}

export interface JobOutput {
  /** Path of the output file in the spool (absent once expired or deleted). */
  path: string;
  format: string;
  contentType: string;
  bytes: number;
  width?: number;
  height?: number;
}

export interface Job {
  id: string;
  account: string;
  /** Job type, e.g. `image.jpg-compress`. */
  job: string;
  /** Dotless input format. */
  format: string;
  /** The input's name without its extension (never used as a path). */
  fileName: string;
  options: JobOptions;
  status: JobStatus;
  progress: { percent: number; phase: string | null };
  inputBytes: number;
  /** Credits reserved at submission and charged on success. */
  creditCost: number;
  output: JobOutput | null;
  error: JobFailure | null;
  webhook: JobWebhook | null;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  /** When the output is deleted (completion + retention); set on completion. */
  expiresAt: string | null;
  expired: boolean;
  /** How many times the job was started (a restart re-runs an interrupted job). */
  attempts: number;
  /** Set once the job's end has been handed to the webhook outbox (so a restart does not hand it again). */
  notified?: boolean;
}
