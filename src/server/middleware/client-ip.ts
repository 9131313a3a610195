import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';

/** The client address: the socket's, or with a trusted proxy the first X-Forwarded-For entry. */
export function clientIp(trustProxy: boolean): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    let ip = c.env?.incoming?.socket?.remoteAddress ?? '';
    if (trustProxy) {
      const forwarded = c.req.header('x-forwarded-for')?.split(',')[0]?.trim();
      if (forwarded) ip = forwarded;
    }
    c.set('clientIp', ip);
    await next();
  };
}
