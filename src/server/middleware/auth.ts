import type { MiddlewareHandler } from 'hono';
import type { Authenticator } from '../../accounts/registry.ts';
import { ApiError } from '../../errors.ts';
import type { AppEnv } from '../env.ts';

export const unauthorized = () =>
  new ApiError('api_key.invalid_or_ip_not_allowed', 401, 'The API key is missing or invalid, or not allowed from this IP address.');

/** `X-Service-Api-Key` → the caller's principal; missing, unknown, revoked and IP-refused keys look the same. */
export function requireApiKey(accounts: Authenticator): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const principal = await accounts.authenticate(c.req.header('x-service-api-key'), c.get('clientIp'));
    if (!principal) throw unauthorized();
    c.set('principal', principal);
    await next();
  };
}
