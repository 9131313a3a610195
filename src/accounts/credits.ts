/**
 * The credits interface, owned by accounts: an account's granted, spent and held credits, and
 * holds keyed by an opaque id (the job store uses job ids). Both backends implement it
 * (`./ledger.ts` for files, `src/jobs/cluster/ledger.ts`); the jobs code uses it, never the reverse.
 */

export interface CreditSummary {
  granted: number;
  spent: number;
  /** Held by open jobs. */
  reserved: number;
  /** granted − spent − reserved (may be negative after a grant was lowered). */
  available: number;
}

export interface Hold {
  jobId: string;
  account: string;
  amount: number;
}

/** How a hold is settled: its credits spent (charge) or given back (release). */
export type Settlement = 'charge' | 'release';

/**
 * Credit holds, keyed by job id: made at admission (inside `JobStore.admit`), then settled exactly
 * once (inside the job store's moves, as the jobs' transition table says). The ledger knows
 * accounts and amounts, not jobs' statuses.
 */
export interface Ledger {
  summary(account: string): Promise<CreditSummary>;
  /** Holds not yet settled (recovery reconciles them with job statuses). */
  openHolds(): Promise<Hold[]>;
  /**
   * Settles the job's hold: the one way a hold ends. Idempotent by job id: a second settlement of
   * the same job changes nothing, whichever way either went.
   */
  settle(jobId: string, how: Settlement): Promise<void>;
}
