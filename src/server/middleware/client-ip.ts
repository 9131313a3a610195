import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';
import { clientAddress, type ProxyTrust } from '../proxy-trust.ts';

/** The client address: the socket's, or read from X-Forwarded-For through the trusted proxies. */
export function clientIp(trust: ProxyTrust): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    c.set('clientIp', clientAddress(c.env?.incoming?.socket?.remoteAddress ?? '', c.req.header('x-forwarded-for'), trust));
    await next();
  };
}
