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

/**
 * Credit holds, keyed by job id: made at admission (inside `JobStore.admit`), then charged or
 * released exactly once (inside the job store's moves, as the jobs' transition table says). The ledger knows accounts and amounts, not
 * jobs' statuses. Every call is idempotent by job id: a second `charge` or `release` of the same
 * job changes nothing, and neither does a `charge` after a `release` or the other way round.
 */
export interface Ledger {
  summary(account: string): Promise<CreditSummary>;
  /** Holds not yet charged or released (recovery reconciles them with job statuses). */
  openHolds(): Promise<Hold[]>;
  charge(jobId: string): Promise<void>;
  release(jobId: string): Promise<void>;
}
