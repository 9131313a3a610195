import { promisify } from 'node:util';
import { brotliCompress, constants, gzip as gzipCallback } from 'node:zlib';
import { Hono } from 'hono';
import { bundleUi, type UiAsset, type UiAssets } from '../../../ui/bundle.ts';
import { ApiError } from '../../errors.ts';
import { noneMatchHits } from '../conditional.ts';
import type { AppEnv } from '../env.ts';
import { pageHeaders } from '../page-headers.ts';
import { MIN_COMPRESSED_BYTES, negotiateEncoding, type ContentCoding } from '../middleware/compression.ts';

const brotli = promisify(brotliCompress);
const gzip = promisify(gzipCallback);

/** The page's own script and style only; previews are data: URLs and downloads blob: URLs. */
const PAGE_HEADERS = pageHeaders({ script: "'self'", style: "'self'", img: "'self' data: blob:" });

interface Variant {
  body: string | Buffer;
  etag: string;
  coding: ContentCoding | null;
}

/** Compressed once per process at the best settings: the files never change while it runs. */
const encode: Record<ContentCoding, (body: string) => Promise<Buffer>> = {
  br: (body) => brotli(body, { params: { [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY, [constants.BROTLI_PARAM_SIZE_HINT]: Buffer.byteLength(body) } }),
  gzip: (body) => gzip(body, { level: constants.Z_BEST_COMPRESSION }),
};

/** The identical-bytes rule of a strong ETag holds per coding: each compressed variant has its own tag. */
const variantTag = (etag: string, coding: ContentCoding) => `${etag.slice(0, -1)}-${coding}"`;

/**
 * The web UI at `/` (no API key: the page asks the person for one and keeps it in the browser).
 * Bundled on the first request and kept for the life of the process; `load` lets a prebuilt
 * bundle (the single executable) replace the in-memory esbuild run.
 */
export function uiRoutes(load: () => Promise<UiAssets> = bundleUi) {
  const app = new Hono<AppEnv>();
  let assets: Promise<UiAssets> | null = null;
  const compressed = new Map<string, Promise<Variant>>();

  const variant = (a: UiAsset, coding: ContentCoding | null): Promise<Variant> => {
    if (!coding || Buffer.byteLength(a.body) < MIN_COMPRESSED_BYTES) return Promise.resolve({ body: a.body, etag: a.etag, coding: null });
    const key = `${a.etag} ${coding}`;
    let v = compressed.get(key);
    if (!v) compressed.set(key, (v = encode[coding](a.body).then((body) => ({ body, etag: variantTag(a.etag, coding), coding }))));
    return v;
  };

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
    const v = await variant(a, negotiateEncoding(c.req.header('accept-encoding')));
    const headers: Record<string, string> = { ...PAGE_HEADERS, etag: v.etag, 'cache-control': 'no-cache', vary: 'Accept-Encoding' };
    if (noneMatchHits(c.req.header('if-none-match'), v.etag)) return new Response(null, { status: 304, headers });
    return new Response(v.body, { headers: { ...headers, 'content-type': a.contentType, ...(v.coding ? { 'content-encoding': v.coding } : {}) } });
  };

  app.get('/', serve('/'));
  app.get('/ui/app.js', serve('/ui/app.js'));
  app.get('/ui/app.css', serve('/ui/app.css'));
  return app;
}
