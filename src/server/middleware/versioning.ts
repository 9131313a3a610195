import type { MiddlewareHandler } from 'hono';
import { ApiError } from '../../errors.ts';
import type { AppEnv } from '../env.ts';

export const SUPPORTED_VERSIONS = [1];
const SUFFIX = /\/v(\d+)$/;
/** The query parameter and the header carry the bare number (spec: `?version=<N>`); only the path suffix has the `v`. */
const NUMBER = /^\d+$/;

/**
 * Whether a path (without its suffix, or a route's template) takes the version as a `/v<N>` suffix:
 * the API's (the spec's `POST /compress/v<N>`), except the filtered listing, whose suffixed form
 * `/compress/compressors/from/v1` would read as both a directional listing and a version. The
 * probes, the page and the OpenAPI document take the version as the query or header only.
 */
export function takesVersionSuffix(path: string): boolean {
  return /^\/(api\/)?compress(\/|$)/.test(path) && !/^\/compress\/compressors\/[^/]+$/.test(path);
}

/** The `/v<N>` suffix's number, when the path is an API path that has one. */
function suffixVersion(path: string): string | undefined {
  const n = SUFFIX.exec(path)?.[1];
  return n !== undefined && takesVersionSuffix(path.replace(SUFFIX, '')) ? n : undefined;
}

/** Routing ignores an API path's `/v<N>` suffix; the version itself is read by `versioning`. */
export function pathWithoutVersion(path: string): string {
  return suffixVersion(path) === undefined ? path : path.replace(SUFFIX, '');
}

/**
 * Endpoint version from the route suffix, else `?version=`, else the
 * `X-Service-Endpoint-Version` header; none means the latest. Every endpoint is at v1.
 */
export const versioning: MiddlewareHandler<AppEnv> = async (c, next) => {
  const url = new URL(c.req.url);
  const raw = suffixVersion(url.pathname) ?? url.searchParams.get('version') ?? c.req.header('x-service-endpoint-version');
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
