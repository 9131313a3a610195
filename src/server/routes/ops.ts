import { randomBytes, timingSafeEqual } from 'node:crypto';
import { unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Hono } from 'hono';
import { ApiError } from '../../errors.ts';
import type { DiskGuard } from '../../ops/disk.ts';
import type { ServiceMetrics } from '../../ops/metrics.ts';
import { openApiDocument } from '../openapi/document.ts';
import { DOCS_PAGE, DOCS_SCRIPT, DOCS_STYLE } from '../openapi/docs-page.ts';
import type { AppEnv } from '../env.ts';
import { inlineSource, pageHeaders } from '../page-headers.ts';

const DOCS_HEADERS = pageHeaders({ script: inlineSource(DOCS_SCRIPT), style: inlineSource(DOCS_STYLE) });

export interface OpsDeps {
  dataDir: string;
  disk: DiskGuard;
  metrics: ServiceMetrics;
  metricsToken: string;
  poolReady(): boolean;
  /** The router's routes, for the OpenAPI document. */
  routes(): { method: string; path: string }[];
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Health, readiness, metrics and API docs: no API key (metrics may require a bearer token). */
export function opsRoutes(d: OpsDeps) {
  const app = new Hono<AppEnv>();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const problems: string[] = [];
    const probe = join(d.dataDir, `.ready-${randomBytes(4).toString('hex')}`);
    try {
      await writeFile(probe, 'ok', { mode: 0o600 });
      await unlink(probe);
    } catch (err) {
      problems.push(`data dir not writable: ${(err as Error).message}`);
    }
    if (!d.poolReady()) problems.push('worker pool is not running');
    try {
      const free = await d.disk.freeBytes();
      if (free < d.disk.minFreeBytes) problems.push(`low disk space: ${Math.floor(free / 1048576)} MB free`);
    } catch (err) {
      problems.push(`disk space unknown: ${(err as Error).message}`);
    }
    return problems.length === 0 ? c.json({ status: 'ready' }) : c.json({ status: 'not_ready', reasons: problems }, 503);
  });
  app.get('/metrics', async (c) => {
    if (d.metricsToken && !sameSecret(c.req.header('authorization') ?? '', `Bearer ${d.metricsToken}`)) {
      throw new ApiError('metrics.unauthorized', 401, 'A valid bearer token is required for /metrics.');
    }
    return c.body(await d.metrics.registry.metrics(), 200, { 'content-type': d.metrics.registry.contentType });
  });
  app.get('/openapi.json', (c) => c.json(openApiDocument(d.routes())));
  app.get('/docs', (c) => c.html(DOCS_PAGE, 200, DOCS_HEADERS));
  return app;
}
