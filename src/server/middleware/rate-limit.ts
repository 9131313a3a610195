import type { MiddlewareHandler } from 'hono';
import { LRUCache } from 'lru-cache';
import { systemClock, type Clock } from '../../clock.ts';
import { ApiError } from '../../errors.ts';
import type { AppEnv } from '../env.ts';

/**
 * Probes are neither limited nor counted: a load balancer's health check shares the address of the
 * proxy whose clients fill the window, and a 429 there would take a busy but healthy server out.
 */
export const RATE_LIMIT_EXEMPT: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** A fixed one-minute window per client IP; 429 `rate_limited` with Retry-After past the limit. */
export function rateLimit(perMinute: number, clock: Clock = systemClock): MiddlewareHandler<AppEnv> {
  const windows = new LRUCache<string, { start: number; count: number }>({ max: 100_000 });
  return async (c, next) => {
    if (perMinute > 0 && !RATE_LIMIT_EXEMPT.has(c.req.path)) {
      const ip = c.get('clientIp');
      const now = clock().getTime();
      let w = windows.get(ip);
      if (!w || now - w.start >= 60_000) {
        w = { start: now, count: 0 };
        windows.set(ip, w);
      }
      if (++w.count > perMinute) {
        const retry = Math.max(1, Math.ceil((w.start + 60_000 - now) / 1000));
        throw new ApiError('rate_limited', 429, `More than ${perMinute} requests per minute from this address.`, { headers: { 'Retry-After': String(retry) } });
      }
    }
    await next();
  };
}
