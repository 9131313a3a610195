import assert from 'node:assert/strict';
import { JobError } from '../../workers/contract.ts';

/**
 * Asserts that `work` fails with a JobError whose code is `code` (or matches it), and returns the
 * error for a closer look at its detail.
 */
export async function rejectsWithJobError(work: Promise<unknown>, code: string | RegExp, message?: string): Promise<JobError> {
  let failure: JobError | undefined;
  await assert.rejects(work, (err: unknown) => {
    assert.ok(err instanceof JobError, `expected a JobError, got ${String(err)}`);
    if (typeof code === 'string') assert.equal(err.code, code, message ?? err.message);
    else assert.match(err.code, code, message ?? err.message);
    failure = err;
    return true;
  });
  return failure!;
}
