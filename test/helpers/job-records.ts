import { queuedJob, type Job, type Submission } from '../../src/jobs/types.ts';

let seq = 0;

/**
 * A queued job record for `account`, as a backend's admission takes it: a 1-credit JPEG job with a
 * webhook, unique in this process, with `opts` laid over it. Creation times are distinct and
 * increasing (FIFO order is by createdAt).
 */
export function newJob(account: string, opts: Partial<Job> = {}): Job {
  seq++;
  const submission: Submission = {
    id: `job-${process.pid}-${seq}`,
    account,
    jobType: 'image.jpg-compress',
    format: 'jpg',
    fileName: `photo${seq}`,
    options: {},
    inputBytes: 1000,
    creditCost: 1,
    webhook: { url: 'https://hooks.example.com/in', secret: 'whsec_0123456789abcdef', events: ['succeeded', 'failed'] },
  };
  return { ...queuedJob(submission, new Date(Date.UTC(2026, 0, 1) + seq)), ...opts };
}
