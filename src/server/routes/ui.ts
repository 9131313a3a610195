import { Hono } from 'hono';
import { bundleUi, type UiAssets } from '../../../ui/bundle.ts';
import { ApiError } from '../../errors.ts';
import type { AppEnv } from '../env.ts';

/**
 * The page may load only its own script and style and talk only to this server; previews are
 * data: URLs and downloads blob: URLs. No framing (clickjacking), no referrer.
 */
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

/**
 * The web UI at `/` (no API key: the page asks the person for one and keeps it in the browser).
 * Bundled on the first request and kept for the life of the process; `load` lets a prebuilt
 * bundle (the single executable) replace the in-memory esbuild run.
 */
export function uiRoutes(load: () => Promise<UiAssets> = bundleUi) {
  const app = new Hono<AppEnv>();
  let assets: Promise<UiAssets> | null = null;

  const serve = (path: string) => async (c: { req: { header(name: string): string | undefined } }) => {
    assets ??= load();
    let all: UiAssets;
    try {
      all = await assets;
    } catch (err) {
      assets = null;
      throw new ApiError('ui.unavailable', 503, `The web UI could not be built: ${(err as Error).message}`);
    }
    const a = all.get(path)!;
    const headers: Record<string, string> = { ...PAGE_HEADERS, etag: a.etag, 'cache-control': 'no-cache' };
    if (c.req.header('if-none-match') === a.etag) return new Response(null, { status: 304, headers });
    return new Response(a.body, { headers: { ...headers, 'content-type': a.contentType } });
  };

  app.get('/', serve('/'));
  app.get('/ui/app.js', serve('/ui/app.js'));
  app.get('/ui/app.css', serve('/ui/app.css'));
  return app;
}
