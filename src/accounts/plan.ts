/** The limits of an account's plan; listing and estimate answers are personalised from it. */
export interface Plan {
  maxFileSizeBytes: number;
  /** Jobs running at once per account. */
  maxConcurrentJobs: number;
  /** Jobs queued plus running per account. */
  maxQueuedJobs: number;
  maxBatchFiles: number;
}

export function defaultPlan(maxFileSizeBytes: number): Plan {
  return { maxFileSizeBytes, maxConcurrentJobs: 6, maxQueuedJobs: 18, maxBatchFiles: 200 };
}
