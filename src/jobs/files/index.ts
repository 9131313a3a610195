import { join } from 'node:path';
import { CreditLedger } from '../../accounts/ledger.ts';
import { COMPACTION_DEFAULTS, type CompactionSettings } from '../../durable/compaction.ts';
import type { Backend, RecoveryReport } from '../backend.ts';
import { settlementOf } from '../moves.ts';
import { isTerminal } from '../types.ts';
import type { StartupPhases } from '../../ops/startup-phases.ts';
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
  /** When the journals are compacted while running; default COMPACTION_DEFAULTS. */
  compaction?: CompactionSettings;
  /** Marks the opening of each journal (a server's start). */
  phases?: StartupPhases;
}

export interface FilesBackend extends Backend {
  jobs: FilesJobStore;
  ledger: CreditLedger;
  outbox: FilesOutbox;
  blobs: LocalBlobStore;
}

/** The default backend: journals and the spool in the data dir, for one node. */
export async function openFilesBackend(dataDir: string, opts: FilesBackendOptions): Promise<FilesBackend> {
  const step = opts.step ?? (() => {});
  const log = opts.log ?? (() => {});
  const journal = {
    sync: opts.sync ?? true,
    step,
    compaction: opts.compaction ?? COMPACTION_DEFAULTS,
    // The old journal stays whole; the next compaction tries again.
    onError: (err: unknown) => log({ msg: 'journal compaction failed', err: err instanceof Error ? err.message : String(err) }),
  };
  const ledger = await CreditLedger.open(dataDir, opts.granted, journal);
  opts.phases?.mark('ledger.log');
  const outbox = await FilesOutbox.open(dataDir, log, journal);
  opts.phases?.mark('outbox.jsonl');
  const jobs = await FilesJobStore.open(dataDir, ledger, outbox, { ...journal, phases: opts.phases });
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
