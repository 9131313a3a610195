import type { Context, MiddlewareHandler } from 'hono';
import type { Ledger } from '../../accounts/credits.ts';
import type { Plan } from '../../accounts/plan.ts';
import { COMPRESSORS, creditsFor, MB, type CompressorEntry } from '../../catalog/index.ts';
import { ApiError } from '../../errors.ts';
import type { JobEngine } from '../../jobs/engine.ts';
import { insufficientCredits } from '../../jobs/lifecycle.ts';
import { RESERVATION_STEP_BYTES, type DiskGuard, type Reservation } from '../../ops/disk.ts';
import type { AppEnv } from '../env.ts';
import { tooLarge } from '../multipart.ts';
import type { UploadPlace, UploadSlots } from '../upload-slots.ts';

export interface UploadGateDeps {
  engine: Pick<JobEngine, 'assertQueueRoom'>;
  ledger: Pick<Ledger, 'summary'>;
  planOf(account: string): Plan;
  disk: Pick<DiskGuard, 'reserve'>;
  /** Shared by every submission path, so an account's uploads count together wherever they go. */
  slots: UploadSlots;
}

/** The least a submission can cost before its size is known: its compressor's base cost, on `POST /compress` the catalog's cheapest. */
const minimumCost = (dedicated: CompressorEntry | undefined) => Math.min(...(dedicated ? [dedicated] : COMPRESSORS).map((e) => creditsFor(e.costing, null)));

function assertSubmissionType(c: Context<AppEnv>): void {
  const contentType = (c.req.header('content-type') ?? '').toLowerCase();
  if (!contentType.startsWith('application/json') && !contentType.startsWith('multipart/form-data')) {
    throw new ApiError('request.invalid_content_type', 400, 'Send multipart/form-data (file upload) or application/json (URL input).');
  }
}

/**
 * 413 for a declared length far over the limit, 402 when the account cannot pay the minimum cost,
 * 429 when its open jobs and uploads in progress fill its queue, 503 when the declared length does
 * not fit in the free space that writes in progress leave, or the first step of the body does not
 * fit in the account's share of it. Returns the upload's place, with its disk reservation.
 */
async function takePlace(c: Context<AppEnv>, deps: UploadGateDeps, dedicated: CompressorEntry | undefined): Promise<UploadPlace> {
  const { account } = c.get('principal');
  const plan = deps.planOf(account);
  const header = c.req.header('content-length');
  const declared = header === undefined ? null : Number(header);
  // Multipart overhead is small: a body far beyond the limit is refused without reading it.
  if (declared !== null && declared > plan.maxFileSizeBytes + MB) throw tooLarge(plan.maxFileSizeBytes);
  const required = minimumCost(dedicated);
  const { available } = await deps.ledger.summary(account);
  if (available < required) throw insufficientCredits(required, available);
  // The slot is taken before any await, so of uploads racing in each counts those before it
  // still uploading once the counts are in (one admitted meanwhile is counted as a job).
  const slot = deps.slots.take(account);
  let disk: Reservation | undefined;
  const release = () => {
    slot.free();
    disk?.release();
  };
  try {
    await deps.engine.assertQueueRoom(account, () => slot.ahead());
    const known = declared !== null && Number.isFinite(declared);
    const limit = known ? declared : plan.maxFileSizeBytes + MB;
    disk = await deps.disk.reserve(account, { first: Math.min(limit, RESERVATION_STEP_BYTES), expected: known ? declared : 0, limit });
  } catch (err) {
    release();
    throw err;
  }
  return { disk, release };
}

/**
 * The gate of a submission's body: what is checked before a byte of it is read, so that the body of
 * an account that cannot pay, has no room in its queue, or would not fit on the volume never reaches
 * the disk (`takePlace`). Admission checks credits and the queue again and decides; these only stop
 * the bytes early. The route finds the upload's place in `c.var.upload`; it is given back when the
 * route is done (the route gives it back earlier, as soon as the job is admitted).
 */
export function uploadGate(deps: UploadGateDeps, dedicated: CompressorEntry | undefined): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    assertSubmissionType(c);
    const place = await takePlace(c, deps, dedicated);
    c.set('upload', place);
    try {
      await next();
    } finally {
      place.release();
    }
  };
}
