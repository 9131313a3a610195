import { Hono, type Context, type Next } from 'hono';
import type { Clock } from '../../clock.ts';
import { ApiError } from '../../errors.ts';
import type { BlobStore } from '../../jobs/backend.ts';
import type { JobEngine } from '../../jobs/engine.ts';
import type { DownloadTokens } from '../../webhooks/download-token.ts';
import type { AppEnv } from '../env.ts';
import { downloadResponse } from './jobs.ts';

/**
 * Presigned downloads (the links in webhooks): the `token` query parameter replaces the
 * API key. Served at `/api/compress/job/{id}/download` and on the plain download path.
 */
export function presignedRoutes(engine: JobEngine, blobs: BlobStore, tokens: DownloadTokens, clock: Clock) {
  const app = new Hono<AppEnv>();
  const handle = async (c: Context<AppEnv>, next: Next) => {
    const token = c.req.query('token');
    if (token === undefined) return next();
    const claim = tokens.verify(token, clock());
    if (!claim || claim.jobId !== c.req.param('id')) throw new ApiError('download.invalid_token', 401, 'The download link is invalid or has expired.');
    const job = await engine.get(claim.jobId);
    if (!job) throw new ApiError('jobs.expired', 410, 'The job and its output were deleted.');
    return downloadResponse(engine, blobs, job, c.req);
  };
  app.get('/api/compress/job/:id/download', (c, next) => {
    if (c.req.query('token') === undefined) throw new ApiError('download.invalid_token', 401, 'A token query parameter is required.');
    return handle(c, next);
  });
  app.get('/compress/job/:id/download', handle);
  return app;
}
