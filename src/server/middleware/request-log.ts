import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import { inRequestScope } from '../../ops/fatal.ts';
import type { AppEnv } from '../env.ts';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A request id on every request (the client's `X-Request-Id` when it is sane, else a new
 * one), returned as a header and put on the request's log line. Keys and tokens are never logged.
 */
export function requestLog(log: Logger, onDone?: (method: string, status: number) => void): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const incoming = c.req.header('x-request-id');
    const id = incoming && SAFE_ID.test(incoming) ? incoming : randomUUID();
    const started = performance.now();
    c.set('requestId', id);
    c.set('log', log.child({ requestId: id }));
    await inRequestScope(id, next);
    c.header('X-Request-Id', id);
    onDone?.(c.req.method, c.res.status);
    c.get('log').info({ method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - started), ip: c.get('clientIp') }, 'request');
  };
}
