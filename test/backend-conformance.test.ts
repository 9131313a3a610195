// The adapter-conformance suite (test/conformance/backend.ts) against the files backend.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openFilesBackend, type FilesStep } from '../src/jobs/files/index.ts';
import { backendConformance } from './conformance/backend.ts';

const STEPS: readonly FilesStep[] = ['admit.held', 'finish.recorded', 'finish.settled', 'finish.enqueued', 'cancel.recorded'];

backendConformance('files', {
  create: () => mkdtemp(join(tmpdir(), 'compressd-conformance-')),
  open: (dir, { grants, crashAt }) =>
    openFilesBackend(dir, {
      granted: (account) => grants[account] ?? 0,
      step: (step) => {
        if (step === crashAt) throw new Error(`killed at ${step}`);
      },
    }),
  crashSteps: STEPS,
  destroy: (dir) => rm(dir, { recursive: true, force: true }),
});
