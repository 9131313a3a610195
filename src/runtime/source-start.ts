import { existsSync } from 'node:fs';
import NODE_OPTIONS from './node-options.json' with { type: 'json' };
import { allocatorChoice, describeAllocator, jemallocEnv, mapsJemalloc } from './allocator.ts';
import { runtimeTree, sourceDistFile } from './bundled.ts';
import { execve } from './execve.ts';

/**
 * `serve` from source (`npm start`, `npx .`, `npx tsx src/main.ts serve`) runs as the executable
 * does (docs/operating.md, "Memory that comes back"): on jemalloc and with the executable's Node
 * options. Run on glibc malloc with V8's default young generation, a 6-minute soak from source kept
 * 587 MB more at rest than a fresh start, the executable 61 MB. The process replaces itself
 * (`process.execve`: the same PID, so `npm start`'s exec and a supervisor's signals still reach the
 * server) with itself under LD_PRELOAD of the system's libjemalloc (Debian's `libjemalloc2`, which
 * scripts/setup.mjs installs) and those options. A Node without `process.execve` (before 22.15; the
 * npm scripts and `npx` run the pinned Node 24) runs on as it is and says why.
 */

/** Where distributions put libjemalloc.so.2: Debian's multiarch directory first. */
const JEMALLOC_PATHS: Record<string, string[]> = {
  x64: ['/usr/lib/x86_64-linux-gnu/libjemalloc.so.2', '/usr/lib64/libjemalloc.so.2'],
  arm64: ['/usr/lib/aarch64-linux-gnu/libjemalloc.so.2', '/usr/lib64/libjemalloc.so.2'],
};
const GENERIC_PATHS = ['/usr/lib/libjemalloc.so.2', '/usr/local/lib/libjemalloc.so.2'];

export function systemJemalloc(): string | undefined {
  return [...(JEMALLOC_PATHS[process.arch] ?? []), ...GENERIC_PATHS].find((p) => existsSync(p));
}

/** libcompressd-arena.so as scripts/setup.mjs builds it (scripts/arena-tune.mjs), if it did. */
export function sourceArenaTune(): string | undefined {
  const built = sourceDistFile(`arena-tune/${process.arch}/libcompressd-arena.so`);
  return built && existsSync(built) ? built : undefined;
}

/** The options of `node-options.json` this process was not started with. */
function missingOptions(env: NodeJS.ProcessEnv): string[] {
  const given = [...process.execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)];
  return NODE_OPTIONS.filter((o) => !given.some((g) => g.split('=')[0] === o.split('=')[0]));
}

/**
 * Re-executes this process as the executable runs (see above), or says why it runs on as it is. The
 * re-executed process has the options and the preload, so it never re-executes again (a preload the
 * loader refused is reported, not retried).
 */
export function runAsTheExecutable(argv: string[] = process.argv, env: NodeJS.ProcessEnv = process.env): void {
  // The executable (its runtime tree is in use) has moved onto its own jemalloc already; Deno has its own allocator.
  if (runtimeTree() !== undefined || 'Deno' in globalThis || argv[2] !== 'serve') return;
  const choice = allocatorChoice(env);
  const lib = systemJemalloc();
  const preloaded = lib !== undefined && (env.LD_PRELOAD ?? '').split(/[\s:]+/).includes(lib);
  const onJemalloc = mapsJemalloc();
  if (choice === 'system') describeAllocator('glibc malloc (COMPRESSD_ALLOCATOR=system)');
  else if (onJemalloc && preloaded) describeAllocator(`jemalloc (${lib}, preloaded by the start from source)`);
  else if (!onJemalloc && !lib) describeAllocator("glibc malloc (no libjemalloc.so.2 on this system: install Debian's libjemalloc2)");
  else if (!onJemalloc && preloaded) describeAllocator(`glibc malloc (${lib} was preloaded but did not load)`);
  const preload = choice === 'jemalloc' && !onJemalloc && !preloaded ? lib : undefined;
  const options = missingOptions(env);
  if (!preload && options.length === 0) return;
  if (!execve) {
    if (preload) describeAllocator(`glibc malloc (Node ${process.version} cannot re-execute itself onto ${preload}: run Node 22.15+ or preload it with LD_PRELOAD)`);
    return;
  }
  execve(process.execPath, [process.execPath, ...options, ...process.execArgv, ...argv.slice(1)], preload ? jemallocEnv(preload, env, sourceArenaTune()) : env);
}

runAsTheExecutable();
