import { Hono, type Context } from 'hono';
import type { Logger } from 'pino';
import type { Plan } from '../accounts/plan.ts';
import type { Authenticator } from '../accounts/registry.ts';
import type { Clock } from '../clock.ts';
import { ApiError } from '../errors.ts';
import type { Ledger } from '../accounts/credits.ts';
import type { BlobStore } from '../jobs/backend.ts';
import type { JobEngine } from '../jobs/engine.ts';
import type { CompressorPool } from '../jobs/pool.ts';
import type { Spool } from '../jobs/spool.ts';
import type { DiskGuard } from '../ops/disk.ts';
import type { ServiceMetrics } from '../ops/metrics.ts';
import type { DownloadTokens } from '../webhooks/download-token.ts';
import { allowedMethods } from './allowed-methods.ts';
import type { AppEnv } from './env.ts';
import { requireApiKey } from './middleware/auth.ts';
import { clientIp } from './middleware/client-ip.ts';
import { compression } from './middleware/compression.ts';
import { ioPath } from './middleware/io-path.ts';
import { rateLimit } from './middleware/rate-limit.ts';
import { requestLog } from './middleware/request-log.ts';
import { pathWithoutVersion, versioning } from './middleware/versioning.ts';
import type { ProxyTrust } from './proxy-trust.ts';
import { compareRoutes } from './routes/compare.ts';
import { discoveryRoutes, schemaRoutes } from './routes/discovery.ts';
import { entitlementRoutes } from './routes/entitlements.ts';
import { jobRoutes } from './routes/jobs.ts';
import { opsRoutes } from './routes/ops.ts';
import { presignedRoutes } from './routes/presigned.ts';
import { submitRoutes, type InputFetcher } from './routes/submit.ts';
import { uiRoutes } from './routes/ui.ts';

export interface AppServices {
  accounts: Authenticator;
  ledger: Ledger;
  engine: JobEngine;
  blobs: BlobStore;
  spool: Spool;
  pool: CompressorPool;
  fetcher: InputFetcher;
  tokens: DownloadTokens;
  planOf(account: string): Plan;
  rateLimitPerMinute: number;
  /** What rate windows, idempotency keys' 24 hours and download links' expiry are measured by. */
  clock: Clock;
  trustProxy: ProxyTrust;
  log: Logger;
  dataDir: string;
  disk: DiskGuard;
  metrics: ServiceMetrics;
  metricsToken: string;
  poolReady(): boolean;
}

/** Browser calls are first-party only: a request whose Origin is another site is refused. */
function sameOriginOnly(c: Context<AppEnv>): void {
  const origin = c.req.header('origin');
  if (!origin || origin === 'null') return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    host = '';
  }
  if (host !== c.req.header('host')) throw new ApiError('request.cross_origin', 403, 'Browser requests from other sites are not allowed; call the API from a server.');
}

/** The HTTP face of compressd: route → middleware → validation → engine. */
export function createApp(s: AppServices): Hono<AppEnv> {
  const app = new Hono<AppEnv>({ getPath: (req) => pathWithoutVersion(new URL(req.url).pathname) });

  app.onError((err, c) => {
    if (err instanceof ApiError) {
      for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
      return c.json(err.body(), err.status as 400);
    }
    (c.get('log') ?? s.log).error({ err, path: c.req.path }, 'unexpected error');
    return c.json({ error: 'server.internal_error', detail: 'An unexpected error occurred.' }, 500);
  });
  const allowed = allowedMethods(() => app.routes);
  const unrouted = (c: Context<AppEnv>) => {
    const methods = allowed(c.req.path);
    if (methods.length === 0) return c.json({ error: 'route.not_found', detail: `No route for ${c.req.method} ${c.req.path}.` }, 404);
    c.header('Allow', methods.join(', '));
    return c.json({ error: 'route.method_not_allowed', detail: `${c.req.method} is not allowed on ${c.req.path}; use ${methods.join(', ')}.` }, 405);
  };
  app.notFound(unrouted);

  app.use('*', compression, ioPath, clientIp(s.trustProxy), requestLog(s.log, (method, status) => s.metrics.request(method, status)), rateLimit(s.rateLimitPerMinute, s.clock), versioning);
  // OPTIONS is served by no route: every caller, with a key or without, from this site or another
  // (a CORS preflight), gets the same 405 with Allow, and no CORS header lets another site in.
  app.use('*', async (c, next) => (c.req.method === 'OPTIONS' ? unrouted(c) : next()));
  app.route('/', opsRoutes({ ...s, routes: () => app.routes }));
  app.route('/', schemaRoutes());
  app.route('/', uiRoutes());
  app.route('/', presignedRoutes(s.engine, s.blobs, s.tokens, s.clock));
  app.use('*', async (c, next) => {
    sameOriginOnly(c);
    await next();
  });
  app.use('*', requireApiKey(s.accounts));
  app.route('/', discoveryRoutes(s.planOf));
  app.route('/', entitlementRoutes(s.ledger, s.planOf));
  app.route('/', submitRoutes(s));
  app.route('/', jobRoutes(s.engine, s.blobs));
  app.route('/', compareRoutes(s));
  return app;
}
