import { join } from 'node:path';
import { CreditLedger } from '../../accounts/ledger.ts';
import { systemClock, type Clock } from '../../clock.ts';
import { COMPACTION_DEFAULTS, type CompactionSettings } from '../../durable/compaction.ts';
import type { Backend } from '../backend.ts';
import { recover } from '../recovery.ts';
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
  /** What key expiry at open and owed webhooks' due times read (default: the system clock). */
  clock?: Clock;
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
  const clock = opts.clock ?? systemClock;
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
  const outbox = await FilesOutbox.open(dataDir, log, { ...journal, clock });
  opts.phases?.mark('outbox.jsonl');
  const jobs = await FilesJobStore.open(dataDir, ledger, outbox, { ...journal, clock, phases: opts.phases });
  const blobs = new LocalBlobStore(join(dataDir, 'spool'));
  return {
    jobs,
    ledger,
    outbox,
    blobs,
    recover: () => recover({ ledger, blobs, records: jobs }),
    async close() {
      await jobs.close();
      await outbox.close();
      await ledger.close();
    },
  };
}
