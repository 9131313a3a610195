import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { Hono, type Context } from 'hono';
import { ApiError } from '../../errors.ts';
import type { JobEngine } from '../../jobs/engine.ts';
import type { Job } from '../../jobs/types.ts';
import type { AppEnv } from '../env.ts';
import { outputFileName, statusView } from '../views.ts';

const notFound = () => new ApiError('jobs.not_found', 404, null);

/** The caller's job, or 404 (unknown) / 403 (another account's). */
export function ownedJob(engine: JobEngine, c: Context<AppEnv>): Job {
  const job = engine.get(c.req.param('id') ?? '');
  if (!job) throw notFound();
  if (job.account !== c.get('principal').account) throw new ApiError('jobs.forbidden', 403, 'This job belongs to another account.');
  return job;
}

function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\;]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Streams a Succeeded job's output; 409 before it is ready, 410 once retention has removed it. */
export async function downloadResponse(engine: JobEngine, job: Job): Promise<Response> {
  if (job.status === 'Queued' || job.status === 'Running') throw new ApiError('jobs.not_ready', 409, `The job is ${job.status}; poll until it has Succeeded.`);
  if (job.status !== 'Succeeded' || !job.output) throw new ApiError('jobs.not_ready', 409, `The job ${job.status}; it has no output.`);
  if (await engine.isExpired(job)) throw new ApiError('jobs.expired', 410, 'The output was deleted after its retention period.');
  let handle;
  try {
    handle = await open(job.output.path, 'r');
  } catch {
    throw new ApiError('jobs.expired', 410, 'The output is no longer available.');
  }
  let size: number;
  try {
    ({ size } = await handle.stat());
  } catch {
    await handle.close();
    throw new ApiError('jobs.expired', 410, 'The output is no longer available.');
  }
  // The file stream closes the handle when the client has it all or goes away (node-server cancels the body).
  const body = Readable.toWeb(handle.createReadStream()) as ReadableStream;
  return new Response(body, {
    headers: {
      'content-type': job.output.contentType,
      'content-length': String(size),
      'content-disposition': contentDisposition(outputFileName(job)),
      'cache-control': 'private, no-store',
      'x-content-type-options': 'nosniff',
    },
  });
}

export function jobRoutes(engine: JobEngine) {
  const app = new Hono<AppEnv>();
  app.get('/compress/job/:id', (c) => c.json(statusView(ownedJob(engine, c))));
  app.get('/compress/job/:id/download', async (c) => downloadResponse(engine, ownedJob(engine, c)));
  app.post('/compress/job/:id/cancel', (c) => {
    const job = ownedJob(engine, c);
    const canceled = engine.cancel(job.id);
    if (!canceled) throw new ApiError('jobs.not_cancellable', 409, `The job has already finished (${job.status}).`);
    return c.json(statusView(canceled));
  });
  app.delete('/compress/job/:id', async (c) => {
    const job = ownedJob(engine, c);
    if (!(await engine.remove(job.id))) throw new ApiError('jobs.not_deletable', 409, `The job is ${job.status}; cancel it or wait until it finishes.`);
    return c.json({ id: job.id, deleted: true });
  });
  return app;
}
