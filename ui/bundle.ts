import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

export interface UiAsset {
  body: string;
  contentType: string;
  etag: string;
}

/** The page's files by URL path: `/`, `/ui/app.js`, `/ui/app.css`. */
export type UiAssets = Map<string, UiAsset>;

const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

function asset(body: string, contentType: string): UiAsset {
  return { body, contentType, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

/**
 * Bundles the web UI in memory with esbuild (TypeScript → one minified script, one stylesheet).
 * Takes about 50 ms, once per server process; nothing is fetched from the network, so the page
 * works air-gapped. A build of the single executable can call this at build time and serve the result.
 */
export async function bundleUi(): Promise<UiAssets> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: { app: here('./src/main.ts'), 'app-style': here('./styles.css') },
    bundle: true,
    minify: true,
    write: false,
    outdir: '/ui',
    format: 'esm',
    target: ['chrome109', 'firefox115', 'safari16'],
    legalComments: 'none',
    logLevel: 'silent',
  });
  const output = (suffix: string) => {
    const file = result.outputFiles.find((f) => f.path.endsWith(suffix));
    if (!file) throw new Error(`esbuild produced no ${suffix}`);
    return file.text;
  };
  const html = await readFile(here('./index.html'), 'utf8');
  return new Map([
    ['/', asset(html, 'text/html; charset=utf-8')],
    ['/ui/app.js', asset(output('/app.js'), 'text/javascript; charset=utf-8')],
    ['/ui/app.css', asset(output('/app-style.css'), 'text/css; charset=utf-8')],
  ]);
}
