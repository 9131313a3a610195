import { join } from 'node:path';
import { CreditLedger } from '../../accounts/ledger.ts';
import type { Backend, RecoveryReport } from '../backend.ts';
import { settlementOf } from '../moves.ts';
import { isTerminal } from '../types.ts';
import { LocalBlobStore } from './blobs.ts';
import { FilesJobStore, type FilesStep } from './job-store.ts';
import { FilesOutbox } from './outbox.ts';

export type { FilesStep };

export interface FilesBackendOptions {
  /** Credits granted to an account (the account registry's). */
  granted(account: string): number;
  log?: (entry: Record<string, unknown>) => void;
  /** Called between the writes of a move; the conformance suite throws from it to simulate a crash. */
  step?: (step: FilesStep) => void;
  /** False skips the fsyncs (in-process tests of what is built on top); default true. */
  sync?: boolean;
}

export interface FilesBackend extends Backend {
  jobs: FilesJobStore;
  ledger: CreditLedger;
  outbox: FilesOutbox;
  blobs: LocalBlobStore;
}

/** The default backend: journals and the spool in the data dir, for one node. */
export async function openFilesBackend(dataDir: string, opts: FilesBackendOptions): Promise<FilesBackend> {
  const sync = opts.sync ?? true;
  const ledger = await CreditLedger.open(dataDir, opts.granted, sync);
  const outbox = await FilesOutbox.open(dataDir, opts.log, sync);
  const jobs = await FilesJobStore.open(dataDir, ledger, outbox, { sync, step: opts.step ?? (() => {}) });
  const blobs = new LocalBlobStore(join(dataDir, 'spool'));
  return {
    jobs,
    ledger,
    outbox,
    blobs,
    async recover(): Promise<RecoveryReport> {
      const report: RecoveryReport = { charged: 0, released: 0, webhooksEnqueued: 0, blobsDeleted: 0 };
      for (const hold of await ledger.openHolds()) {
        const job = await jobs.get(hold.jobId);
        if (job && !isTerminal(job.status)) continue;
        if (settlementOf(job?.status) === 'charge') {
          await ledger.charge(hold.jobId);
          report.charged++;
        } else {
          await ledger.release(hold.jobId);
          report.released++;
        }
      }
      for (const id of [...jobs.owed.keys()]) {
        const job = await jobs.get(id);
        if (!job || !isTerminal(job.status)) continue;
        await jobs.settle(job);
        report.webhooksEnqueued++;
      }
      for (const id of await blobs.ids()) {
        const job = await jobs.get(id);
        if (job && !job.expired) continue;
        await blobs.delete(id);
        report.blobsDeleted++;
      }
      return report;
    },
    async close() {
      await jobs.close();
      await outbox.close();
      await ledger.close();
    },
  };
}
