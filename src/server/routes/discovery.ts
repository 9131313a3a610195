import { Hono } from 'hono';
import type { Plan } from '../../accounts/plan.ts';
import {
  COMPRESSORS,
  compressorForFormat,
  creditsFor,
  normaliseFormat,
  optionsSchemaOf,
  outputFormatsOf,
  SUBMIT_ENDPOINT,
  supportedFormats,
  unionOptionsSchema,
  type CompressorEntry,
} from '../../catalog/index.ts';
import { ApiError } from '../../errors.ts';
import type { AppEnv } from '../env.ts';

const CATEGORIES = new Set(['images', 'documents']);

interface Selection {
  from?: string;
  to?: string;
  /** Input or output format (the `{filter}` path form). */
  either?: string;
  formats?: string[];
  /** Every category named (path and query) must match. */
  categories?: string[];
}

function compressorRecord(c: CompressorEntry, plan: Plan) {
  return {
    job: c.jobType,
    category: c.category,
    costing: c.costing,
    endpoint: SUBMIT_ENDPOINT,
    inputFormats: c.inputFormats,
    outputFormats: outputFormatsOf(c),
    maxFileSizeBytes: plan.maxFileSizeBytes,
    maxConcurrentJobs: Math.min(c.maxConcurrentJobs, plan.maxConcurrentJobs),
  };
}

/** The compressors listing: records, the format graph and the caller's limits, all derived from the catalog. */
export function listing(sel: Selection, plan: Plan) {
  const accepts = (c: CompressorEntry, f: string) => c.inputFormats.includes(f);
  const produces = (c: CompressorEntry, f: string) => outputFormatsOf(c).includes(f);
  const chosen = COMPRESSORS.filter(
    (c) =>
      (!sel.from || accepts(c, sel.from)) &&
      (!sel.to || produces(c, sel.to)) &&
      (!sel.either || accepts(c, sel.either) || produces(c, sel.either)) &&
      (!sel.categories || sel.categories.every((cat) => c.category === cat)) &&
      (!sel.formats || sel.formats.some((f) => accepts(c, f) || produces(c, f))),
  );
  const sourceFormatTo: Record<string, object[]> = {};
  for (const c of chosen) {
    for (const source of c.inputFormats) {
      if (sel.from && source !== sel.from) continue;
      for (const target of c.outputsFor(source)) {
        if (sel.to && target !== sel.to) continue;
        (sourceFormatTo[source] ??= []).push({
          sourceFormat: source,
          targetFormat: target,
          job: c.jobType,
          endpoint: SUBMIT_ENDPOINT,
          category: c.category,
          costing: c.costing,
          maxFileSizeBytes: plan.maxFileSizeBytes,
          maxConcurrentJobs: Math.min(c.maxConcurrentJobs, plan.maxConcurrentJobs),
        });
      }
    }
  }
  return {
    compressors: chosen.map((c) => compressorRecord(c, plan)),
    sourceFormatTo,
    maxFileSizeBytes: plan.maxFileSizeBytes,
    maxConcurrentJobs: plan.maxConcurrentJobs,
    maxBatchFiles: plan.maxBatchFiles,
  };
}

function querySelection(query: Record<string, string>): Selection {
  const sel: Selection = {};
  if (query.formats) sel.formats = query.formats.split(',').map(normaliseFormat).filter(Boolean);
  if (query.category) sel.categories = [query.category.trim().toLowerCase()];
  return sel;
}

function unsupported(code: string, format: string): ApiError {
  return new ApiError(code, 400, `No compressor accepts the format "${format}".`, { format, supportedFormats: supportedFormats() });
}

/** Routes that need no API key: the option schemas. */
export function schemaRoutes() {
  const app = new Hono<AppEnv>();
  const schemaJson = (body: object) =>
    new Response(JSON.stringify(body), { headers: { 'content-type': 'application/schema+json; charset=utf-8' } });
  app.get('/compress/schema', () => schemaJson(unionOptionsSchema()));
  app.get('/compress/schema/:format', (c) => {
    const format = normaliseFormat(c.req.param('format'));
    const entry = compressorForFormat(format);
    if (!entry) throw unsupported('schema.unsupported_format', format);
    return schemaJson(optionsSchemaOf(entry));
  });
  return app;
}

/** Listing, legacy listing and estimate (API key required). */
export function discoveryRoutes(planOf: (account: string) => Plan) {
  const app = new Hono<AppEnv>();
  const plan = (c: { get(k: 'principal'): { account: string } }) => planOf(c.get('principal').account);

  app.get('/compress', (c) =>
    c.json({
      compressors: COMPRESSORS.map((e) => ({
        jobId: e.jobType,
        category: e.category,
        pool: e.category,
        formats: e.inputFormats.map((f) => `.${f}`),
        endpoint: SUBMIT_ENDPOINT,
      })),
      next: '/compress/compressors',
    }),
  );
  app.get('/compress/compressors', (c) => c.json(listing(querySelection(c.req.query()), plan(c))));
  app.get('/compress/compressors/from/:format', (c) =>
    c.json(listing({ ...querySelection(c.req.query()), from: normaliseFormat(c.req.param('format')) }, plan(c))),
  );
  app.get('/compress/compressors/to/:format', (c) =>
    c.json(listing({ ...querySelection(c.req.query()), to: normaliseFormat(c.req.param('format')) }, plan(c))),
  );
  app.get('/compress/compressors/:filter', (c) => {
    const filter = normaliseFormat(c.req.param('filter'));
    const sel = querySelection(c.req.query());
    if (CATEGORIES.has(filter)) return c.json(listing({ ...sel, categories: [...(sel.categories ?? []), filter] }, plan(c)));
    return c.json(listing({ ...sel, either: filter }, plan(c)));
  });

  app.get('/compress/estimate/:format', (c) => {
    const format = normaliseFormat(c.req.param('format'));
    const entry = compressorForFormat(format);
    if (!entry) throw unsupported('estimate.unsupported_format', format);
    const q = c.req.query();
    const number = (name: string, whole: boolean) => {
      if (q[name] === undefined || q[name] === '') return null;
      const n = Number(q[name]);
      if (!Number.isFinite(n) || n < 0 || (whole && !Number.isInteger(n))) throw new ApiError('estimate.invalid_size', 400, `${name} must be a ${whole ? 'whole ' : ''}number ≥ 0.`);
      return n;
    };
    const fileSizeBytes = number('fileSizeBytes', true);
    const fileSizeMb = number('fileSizeMb', false);
    const bytes = fileSizeBytes ?? (fileSizeMb === null ? null : Math.round(fileSizeMb * 1024 * 1024));
    return c.json({
      job: entry.jobType,
      category: entry.category,
      estimatedCredits: creditsFor(entry.costing, bytes),
      costing: entry.costing,
      inputs: { fileSizeBytes, fileSizeMb },
      limits: { maxFileSizeBytes: plan(c).maxFileSizeBytes },
    });
  });
  return app;
}
