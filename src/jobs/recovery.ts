import type { Ledger } from '../accounts/credits.ts';
import type { BlobStore, RecoveryReport } from './backend.ts';
import { settlementOf } from './moves.ts';
import type { JobStatus } from './types.ts';

/** What recovery asks a backend's job records. */
export interface RecoveryQueries {
  /** Open holds whose job has ended or is gone, with the job's status (undefined: gone). */
  staleHolds(): Promise<{ jobId: string; status: JobStatus | undefined }[]>;
  /**
   * Hands to the outbox every owed webhook of an ended job that a crash kept from it; resolves how
   * many. Absent: a backend whose moves are single transactions leaves none.
   */
  handOverOwed?(): Promise<number>;
  /** Of `ids`, those whose blobs stay: the job's record is there and not expired. */
  unexpiredOf(ids: string[]): Promise<Set<string>>;
}

/**
 * `Backend.recover`, the same for every backend: settles the holds of ended or unknown jobs as the
 * move table says (`settlementOf`), hands over owed webhooks, then deletes the blobs of expired or
 * unknown jobs. Idempotent.
 */
export async function recover(parts: { ledger: Ledger; blobs: BlobStore; records: RecoveryQueries }): Promise<RecoveryReport> {
  const report: RecoveryReport = { charged: 0, released: 0, webhooksEnqueued: 0, blobsDeleted: 0 };
  for (const { jobId, status } of await parts.records.staleHolds()) {
    const how = settlementOf(status);
    await parts.ledger.settle(jobId, how);
    report[how === 'charge' ? 'charged' : 'released']++;
  }
  report.webhooksEnqueued = (await parts.records.handOverOwed?.()) ?? 0;
  const ids = await parts.blobs.ids();
  if (ids.length === 0) return report;
  const keep = await parts.records.unexpiredOf(ids);
  for (const id of ids) {
    if (keep.has(id)) continue;
    await parts.blobs.delete(id);
    report.blobsDeleted++;
  }
  return report;
}
