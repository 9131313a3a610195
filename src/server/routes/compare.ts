import { Hono } from 'hono';
import { LRUCache } from 'lru-cache';
import type { Comparison, PreviewJob } from '../../catalog/contract.ts';
import { ApiError, truncateDetail } from '../../errors.ts';
import type { BlobStore } from '../../jobs/backend.ts';
import type { JobEngine } from '../../jobs/engine.ts';
import type { CompressorPool } from '../../jobs/pool.ts';
import type { Spool } from '../../jobs/spool.ts';
import type { Job } from '../../jobs/types.ts';
import type { AppEnv } from '../env.ts';
import { PreviewLimiter, previewLimits } from '../preview-limit.ts';
import { ownedJob } from './jobs.ts';

export interface CompareSettings {
  /** Past this, making previews stops and the answer is 504 `compare.timeout`. */
  timeoutMs: number;
  /** Encoded previews kept in memory, counted in base64 characters. */
  cacheBytes: number;
}

export const COMPARE_DEFAULTS: CompareSettings = { timeoutMs: 30_000, cacheBytes: 64 * 1024 * 1024 };

/** Per-entry overhead besides the two base64 strings (numbers, keys, the map's own bookkeeping). */
const ENTRY_OVERHEAD = 256;

/** The preview failures answered with their own code, and their status; any other is `422 compare.unavailable`. */
const PREVIEW_FAILURES: Record<string, number> = { 'compare.invalid_query': 400, 'compare.too_large': 422 };

/**
 * Makes compare previews in the worker pool, once per job: finished results are kept in an LRU
 * bounded by bytes, and concurrent requests for the same job share one run and its time limit.
 * Failures are kept like results, so a hostile file costs one run however often it is asked for;
 * only a timeout, which depends on the load, is not kept: asking again retries.
 */
export class Comparer {
  private readonly cache: LRUCache<string, Comparison | ApiError>;
  private readonly running = new Map<string, Promise<Comparison>>();

  constructor(
    private readonly pool: Pick<CompressorPool, 'preview'>,
    private readonly settings: CompareSettings = COMPARE_DEFAULTS,
  ) {
    this.cache = new LRUCache({
      maxSize: settings.cacheBytes,
      sizeCalculation: (c) => (c instanceof ApiError ? (c.detail?.length ?? 0) : c.before.data.length + c.after.data.length) + ENTRY_OVERHEAD,
    });
  }

  /**
   * Previews for `key`, kept at most `ttlMs` (the rest of the job's retention); rejects with
   * ApiError `compare.timeout` (504), `compare.invalid_query` (400), `compare.too_large` or
   * `compare.unavailable` (422).
   */
  comparison(key: string, job: PreviewJob, ttlMs?: number): Promise<Comparison> {
    const hit = this.cache.get(key);
    if (hit instanceof ApiError) return Promise.reject(hit);
    if (hit) return Promise.resolve(hit);
    let run = this.running.get(key);
    if (!run) {
      run = this.make(key, job, ttlMs).finally(() => this.running.delete(key));
      this.running.set(key, run);
    }
    return run;
  }

  private async make(key: string, job: PreviewJob, ttlMs?: number): Promise<Comparison> {
    const outcome = await this.pool.preview(job, AbortSignal.timeout(this.settings.timeoutMs));
    const keep = ttlMs && ttlMs > 0 ? { ttl: ttlMs } : {};
    if (outcome.ok) {
      this.cache.set(key, outcome.comparison, keep);
      return outcome.comparison;
    }
    if (outcome.code === 'compare.timeout') {
      throw new ApiError('compare.timeout', 504, `Making the previews took longer than ${this.settings.timeoutMs / 1000} s.`);
    }
    const status = PREVIEW_FAILURES[outcome.code];
    const failure = status ? new ApiError(outcome.code, status, truncateDetail(outcome.detail)) : new ApiError('compare.unavailable', 422, truncateDetail(outcome.detail));
    this.cache.set(key, failure, keep);
    throw failure;
  }
}

/** The spec's Compare response. */
export function compareView(job: Job, c: Comparison): Record<string, unknown> {
  return {
    beforeImage: c.before.data,
    afterImage: c.after.data,
    originalBytes: job.inputBytes,
    compressedBytes: job.output?.bytes ?? 0,
    beforeMimeType: c.before.mimeType,
    afterMimeType: c.after.mimeType,
    previewWidth: c.before.width,
    previewHeight: c.before.height,
    afterPreviewWidth: c.after.width,
    afterPreviewHeight: c.after.height,
    inputWidth: c.input.width,
    inputHeight: c.input.height,
    outputWidth: c.output.width,
    outputHeight: c.output.height,
    wasResized: c.input.width !== c.output.width || c.input.height !== c.output.height,
  };
}

/**
 * The page's own extension of the spec's compare request (the response shape stays the spec's):
 * `size=fit` (default, PREVIEW_EDGE) or `size=full` (made only when asked, for zooming in), and
 * `page` (1-based, PDFs). What was shown is told in headers, outside the spec's body:
 * `X-Compare-Page` and `X-Compare-Page-Count` for a PDF, `X-Compare-Picture` for DOCX/PPTX.
 */
function previewQuery(q: Record<string, string>): Pick<PreviewJob, 'size' | 'page'> {
  const size = q.size ?? 'fit';
  if (size !== 'fit' && size !== 'full') throw new ApiError('compare.invalid_query', 400, 'size must be "fit" or "full".');
  const page = q.page === undefined ? 1 : Number(q.page);
  if (!Number.isInteger(page) || page < 1 || page > 100_000) throw new ApiError('compare.invalid_query', 400, 'page must be a whole number from 1.');
  return { size, page };
}

const expired = () => new ApiError('compare.expired', 410, 'The files were deleted after their retention period.');

export interface CompareDeps {
  engine: JobEngine;
  blobs: BlobStore;
  spool: Spool;
  pool: Pick<CompressorPool, 'preview' | 'previewThreads'>;
}

/** `GET /compress/job/{id}/compare`: before/after previews of a Succeeded job. */
export function compareRoutes({ engine, blobs, spool, pool }: CompareDeps, settings: CompareSettings = COMPARE_DEFAULTS) {
  const comparer = new Comparer(pool, settings);
  const limiter = new PreviewLimiter(previewLimits(pool.previewThreads));
  const app = new Hono<AppEnv>();
  app.get('/compress/job/:id/compare', async (c) => {
    const query = previewQuery(c.req.query());
    const job = await ownedJob(engine, c);
    if (job.status !== 'Succeeded' || !job.output) {
      throw new ApiError('compare.not_ready', 409, `The job is ${job.status}; previews exist only for a Succeeded job.`);
    }
    if (await engine.isExpired(job)) throw expired();
    // Copies land in the job's scratch when the blobs are not on this disk (cluster storage); they
    // are deleted after use, since any node may be asked and none runs the job any more.
    const scratch = spool.dir(job.id);
    let comparison: Comparison;
    const release = limiter.enter(c.get('principal').account);
    try {
      const [inputPath, outputPath] = await Promise.all([blobs.localFile(job.id, 'input', scratch), blobs.localFile(job.id, 'output', scratch)]);
      if (!inputPath || !outputPath) throw expired();
      const files: PreviewJob = { inputPath, inputFormat: job.format, outputPath, outputFormat: job.output.format, ...query };
      const ttl = job.expiresAt ? Date.parse(job.expiresAt) - engine.lifecycle.now().getTime() : undefined;
      comparison = await comparer.comparison(`${job.id}/${job.completedAt}/${query.size}/${query.page}`, files, ttl);
    } catch (err) {
      // Files deleted while the previews were being made (retention, DELETE) read as unreadable.
      if (err instanceof ApiError) throw err;
      if ((await engine.isExpired(job)) || (await blobs.size(job.id, 'input')) === null || (await blobs.size(job.id, 'output')) === null) throw expired();
      throw err;
    } finally {
      release();
      await spool.discardCopies(job.id);
    }
    c.header('cache-control', 'private, no-store');
    if (comparison.page) {
      c.header('x-compare-page', String(comparison.page.number));
      c.header('x-compare-page-count', String(comparison.page.count));
    }
    if (comparison.picture) c.header('x-compare-picture', encodeURI(comparison.picture));
    return c.json(compareView(job, comparison));
  });
  return app;
}
