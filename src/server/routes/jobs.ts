import { Readable } from 'node:stream';
import { Hono, type Context, type HonoRequest } from 'hono';
import { ApiError } from '../../errors.ts';
import type { BlobStore } from '../../jobs/backend.ts';
import type { JobEngine } from '../../jobs/engine.ts';
import type { Job } from '../../jobs/types.ts';
import { expectedOutputFormat, outputFileName } from '../../options.ts';
import { select } from '../conditional.ts';
import type { AppEnv } from '../env.ts';
import { statusView } from '../views.ts';

const notFound = () => new ApiError('jobs.not_found', 404, null);
const gone = () => new ApiError('jobs.expired', 410, 'The output is no longer available.');

/** The caller's job, or 404 (unknown) / 403 (another account's). */
export async function ownedJob(engine: JobEngine, c: Context<AppEnv>): Promise<Job> {
  const job = await engine.get(c.req.param('id') ?? '');
  if (!job) throw notFound();
  if (job.account !== c.get('principal').account) throw new ApiError('jobs.forbidden', 403, 'This job belongs to another account.');
  return job;
}

function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\;]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * Streams a Succeeded job's output; 409 before it is ready, 410 once retention has removed it.
 * Resumable and revalidatable: one byte range (206), `If-None-Match`/`If-Modified-Since` (304),
 * `If-Range`; several ranges get the whole file. HEAD opens no stream.
 */
export async function downloadResponse(engine: JobEngine, blobs: BlobStore, job: Job, req: HonoRequest): Promise<Response> {
  if (job.status === 'Queued' || job.status === 'Running') throw new ApiError('jobs.not_ready', 409, `The job is ${job.status}; poll until it has Succeeded.`);
  if (job.status !== 'Succeeded' || !job.output) throw new ApiError('jobs.not_ready', 409, `The job ${job.status}; it has no output.`);
  if (await engine.isExpired(job)) throw new ApiError('jobs.expired', 410, 'The output was deleted after its retention period.');
  const size = job.output.bytes;
  const validators = { etag: job.output.sha256 ? `"${job.output.sha256}"` : null, lastModified: new Date(job.completedAt!) };
  const headers: Record<string, string> = {
    'accept-ranges': 'bytes',
    'last-modified': validators.lastModified.toUTCString(),
    ...(validators.etag ? { etag: validators.etag } : {}),
    // no-transform: a proxy must not re-encode the bytes the ETag and ranges describe.
    'cache-control': 'private, no-store, no-transform',
  };
  const selection = select(req, validators, size);
  if (selection.kind === 'not-modified') return new Response(null, { status: 304, headers });
  if (selection.kind === 'unsatisfiable') {
    throw new ApiError('download.range_not_satisfiable', 416, `The range ${JSON.stringify(req.header('range'))} is outside the ${size}-byte output.`, { headers: { 'Content-Range': `bytes */${size}` } });
  }
  const range = selection.kind === 'part' ? selection.range : undefined;
  Object.assign(headers, {
    'content-type': job.output.contentType,
    'content-length': String(range ? range.end - range.start + 1 : size),
    'content-disposition': contentDisposition(outputFileName(job.fileName, expectedOutputFormat(job))),
    'x-content-type-options': 'nosniff',
    ...(range ? { 'content-range': `bytes ${range.start}-${range.end}/${size}` } : {}),
  });
  const status = range ? 206 : 200;
  if (req.method === 'HEAD') {
    if ((await blobs.size(job.id, 'output')) === null) throw gone();
    return new Response(null, { status, headers });
  }
  const blob = await blobs.get(job.id, 'output', range);
  if (!blob) throw gone();
  return new Response(Readable.toWeb(blob.body) as ReadableStream, { status, headers });
}

export function jobRoutes(engine: JobEngine, blobs: BlobStore) {
  const app = new Hono<AppEnv>();
  app.get('/compress/job/:id', async (c) => c.json(statusView(await ownedJob(engine, c))));
  app.get('/compress/job/:id/download', async (c) => downloadResponse(engine, blobs, await ownedJob(engine, c), c.req));
  app.post('/compress/job/:id/cancel', async (c) => {
    const job = await ownedJob(engine, c);
    const canceled = await engine.cancel(job.id);
    if (!canceled) throw new ApiError('jobs.not_cancellable', 409, `The job has already finished (${job.status}).`);
    return c.json(statusView(canceled));
  });
  app.delete('/compress/job/:id', async (c) => {
    const job = await ownedJob(engine, c);
    if (!(await engine.remove(job.id))) throw new ApiError('jobs.not_deletable', 409, `The job is ${job.status}; cancel it or wait until it finishes.`);
    return c.json({ id: job.id, deleted: true });
  });
  return app;
}
