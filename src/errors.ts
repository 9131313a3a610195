/** Envelope fields beyond `error` and `detail`; under `headers`, the response headers the answer carries. */
export type ErrorExtras = Record<string, unknown> & { headers?: Record<string, string> };

/**
 * An error the API answers with: a spec code, an HTTP status, a public detail and
 * optional extra envelope fields and headers. Raised where the problem is known, rendered once
 * by the server's error handler.
 */
export class ApiError extends Error {
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: string,
    readonly status: number,
    readonly detail: string | null = null,
    { headers = {}, ...extra }: ErrorExtras = {},
  ) {
    super(detail ?? code);
    this.name = 'ApiError';
    this.extra = extra;
    this.headers = headers;
  }

  body(): Record<string, unknown> {
    return { error: this.code, detail: this.detail, ...this.extra };
  }
}

export const ERROR_DETAIL_MAX = 256;

/** Cuts to at most `max` UTF-16 units without splitting a surrogate pair, marking the cut. */
export function truncateDetail(detail: string, max: number = ERROR_DETAIL_MAX): string {
  if (detail.length <= max) return detail;
  let out = '';
  for (const ch of detail) {
    if (out.length + ch.length > max - 1) break;
    out += ch;
  }
  return `${out}…`;
}
