import type { MiddlewareHandler } from 'hono';
import { ApiError } from '../../errors.ts';
import type { AppEnv } from '../env.ts';

export const SUPPORTED_VERSIONS = [1];
const SUFFIX = /\/v(\d+)$/;
/** The query parameter and the header carry the bare number (spec: `?version=<N>`); only the path suffix has the `v`. */
const NUMBER = /^\d+$/;

/** Routing ignores a `/v<N>` route suffix; the version itself is read by `versioning`. */
export function pathWithoutVersion(path: string): string {
  return path.replace(SUFFIX, '') || '/';
}

/**
 * Endpoint version from the route suffix, else `?version=`, else the
 * `X-Service-Endpoint-Version` header; none means the latest. Every endpoint is at v1.
 */
export const versioning: MiddlewareHandler<AppEnv> = async (c, next) => {
  const url = new URL(c.req.url);
  const raw = SUFFIX.exec(url.pathname)?.[1] ?? url.searchParams.get('version') ?? c.req.header('x-service-endpoint-version');
  let version = SUPPORTED_VERSIONS[SUPPORTED_VERSIONS.length - 1];
  if (raw !== undefined && raw !== null) {
    if (!NUMBER.test(raw) || !SUPPORTED_VERSIONS.includes(Number(raw))) {
      throw new ApiError('request.unsupported_version', 400, `Endpoint version ${JSON.stringify(raw)} is not available; supported: ${SUPPORTED_VERSIONS.join(', ')}.`, {
        supportedVersions: SUPPORTED_VERSIONS,
      });
    }
    version = Number(raw);
  }
  c.set('version', version);
  await next();
};
