/** The error envelope of the API, or a network failure (`code` "network"), as one thrown value. */
export class ApiProblem extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    readonly detail: string | null,
    readonly body: Record<string, unknown> = {},
    /** Seconds from a `Retry-After` header, when the server sent one. */
    readonly retryAfter: number | null = null,
  ) {
    super(detail ?? code);
    this.name = 'ApiProblem';
  }
}
