import { getAsset, getRawAsset } from 'node:sea';
import { ALLOCATOR_KEY, answerProbe, useBundledAllocator, type BundledAllocator } from './allocator.ts';
import { useRuntimeTree } from './bundled.ts';
import { cacheRoot } from './cache-dir.ts';
import { ensureRuntimeTree, MANIFEST_KEY, type RuntimeManifest } from './extract.ts';
import { putInitInFront } from './pid1.ts';

/**
 * Entry of the single executable (build.mjs bundles it as the SEA main script): extract the
 * runtime tree, put the tree's init in front as PID 1 (it runs this executable again as its child),
 * move onto the bundled allocator (which may re-execute this process), then run
 * the ordinary CLI. The CLI is imported only afterwards, so nothing that needs the tree runs
 * before it exists, and nothing runs twice.
 */
function start(): void {
  const manifest = JSON.parse(getAsset(MANIFEST_KEY, 'utf8')) as RuntimeManifest;
  const dir = ensureRuntimeTree(cacheRoot(), manifest, (key) => new Uint8Array(getRawAsset(key) as ArrayBuffer));
  putInitInFront(dir, (text) => console.error(`compressd: ${text}`));
  useBundledAllocator(dir, JSON.parse(getAsset(ALLOCATOR_KEY, 'utf8')) as BundledAllocator);
  useRuntimeTree(dir);
}

try {
  answerProbe();
  start();
} catch (err) {
  console.error(`compressd: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
import('../main.ts').catch((err: unknown) => {
  console.error(`compressd: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
