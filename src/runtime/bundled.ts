import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where the code that cannot live inside one JavaScript file is found. From source this is the
 * repository itself; in the single executable it is the runtime tree the executable extracted
 * at start (worker bundles, native addons, WASM), announced once with `useRuntimeTree`.
 */
let tree: string | undefined;

export function useRuntimeTree(dir: string): void {
  tree = dir;
}

/** The extracted runtime tree, when running as the single executable. */
export function runtimeTree(): string | undefined {
  return tree;
}

/** A file the checkout's scripts built under dist/ (from source only: the executable has its runtime tree). */
export function sourceDistFile(path: string): string | undefined {
  return tree ? undefined : fileURLToPath(new URL(`../../dist/${path}`, import.meta.url));
}

/** The module the compressor pool's threads load (piscina's `filename`). */
export function workerEntry(): string {
  if (tree) return join(tree, 'worker.mjs');
  // Deno runs TypeScript itself; the tsx loader hooks of entry.mjs are a Node affair.
  if ('Deno' in globalThis) return new URL('../../workers/compress.ts', import.meta.url).href;
  return new URL('../../workers/entry.mjs', import.meta.url).href;
}

/**
 * Loads a package that travels as files in the runtime tree (it carries native or WASM
 * files). The executable's own `require` only knows built-in modules.
 */
export function requireFromTree(specifier: string): unknown {
  if (!tree) throw new Error(`${specifier} requested before the runtime tree was extracted`);
  return createRequire(join(tree, 'main.cjs'))(specifier);
}
