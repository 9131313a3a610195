import { ApiError } from '../errors.ts';

/** A `url_fetch.*` answer: every one carries `isRetryable`, as the spec requires. */
export function urlFetchError(
  code: string,
  detail: string,
  isRetryable: boolean,
  { status = 400, headers = {} }: { status?: number; headers?: Record<string, string> } = {},
): ApiError {
  return new ApiError(`url_fetch.${code}`, status, detail, { isRetryable, headers });
}
