/**
 * An error the API answers with: a spec code, an HTTP status, a public detail and
 * optional extra envelope fields. Raised where the problem is known, rendered once
 * by the server's error handler.
 */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    readonly detail: string | null = null,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(detail ?? code);
    this.name = 'ApiError';
  }

  body(): Record<string, unknown> {
    return { error: this.code, detail: this.detail, ...this.extra };
  }
}

/** A reason a job ended Failed: a machine-readable code and a short human detail. */
export interface JobFailure {
  code: string;
  detail: string;
}
