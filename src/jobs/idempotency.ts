import { ApiError } from '../errors.ts';

/** The key was bound by a request that differs from this one (another file, field or path). */
export const idempotencyMismatch = () =>
  new ApiError('request.idempotency_mismatch', 422, 'This Idempotency-Key was used with a different request in the last 24 hours; send a new key for a new request.');

/** A request with the same key is still being received or admitted. */
export const idempotencyInProgress = () =>
  new ApiError('request.idempotency_in_progress', 409, 'A request with this Idempotency-Key is still in progress; retry once it has been answered.', { headers: { 'Retry-After': '1' } });
