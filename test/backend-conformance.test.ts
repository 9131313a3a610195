// The adapter-conformance suite (test/conformance/backend.ts) against the files backend.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openFilesBackend, type FilesStep } from '../src/jobs/files/index.ts';
import { backendConformance } from './conformance/backend.ts';

const STEPS: readonly FilesStep[] = ['admit.held', 'finish.recorded', 'finish.settled', 'finish.enqueued', 'cancel.recorded', 'compact.written', 'compact.swapped'];

backendConformance('files', {
  create: () => mkdtemp(join(tmpdir(), 'compressd-conformance-')),
  open: async (dir, { grants, crashAt }) => {
    // A crash in the compaction at open is test/journal.test.ts's; here the moves' ones count.
    let opened = false;
    const backend = await openFilesBackend(dir, {
      granted: (account) => grants[account] ?? 0,
      // To die in a compaction, every journal compacts after every append while the moves go on.
      ...(crashAt?.startsWith('compact.') ? { compaction: { ratio: 0, minRecords: 0 } } : {}),
      step: (step) => {
        if (step === crashAt && (opened || !step.startsWith('compact.'))) throw new Error(`killed at ${step}`);
      },
    });
    opened = true;
    return backend;
  },
  crashSteps: STEPS,
  destroy: (dir) => rm(dir, { recursive: true, force: true }),
});
