import type { MiddlewareHandler } from 'hono';
import { COMPRESSORS } from '../../catalog/index.ts';
import { withIoPath } from '../../ops/io-counts.ts';
import type { AppEnv } from '../env.ts';

const SUBMIT_PATHS = new Set(['/compress', ...COMPRESSORS.map((e) => e.path)]);

/** Counts what a request costs the database and storage: a submission under `admission`, any other request under `request`. */
export const ioPath: MiddlewareHandler<AppEnv> = (c, next) => withIoPath(c.req.method === 'POST' && SUBMIT_PATHS.has(c.req.path) ? 'admission' : 'request', next);
