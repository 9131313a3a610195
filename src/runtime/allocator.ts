import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execve } from './execve.ts';

/**
 * The allocator decision (docs/operating.md, "Memory that comes back"): glibc's malloc keeps the
 * memory libvips frees in worker threads, jemalloc gives it back. The single executable carries
 * Debian's libjemalloc.so.2 in its runtime tree and, at start, replaces itself (same PID, so
 * systemd and Docker's PID 1 see one process) with itself under LD_PRELOAD of that library.
 * From source, `serve` does the same with the system's libjemalloc (./source-start.ts).
 */

/** The SEA asset build.mjs writes beside the runtime tree's manifest. */
export const ALLOCATOR_KEY = '@allocator';
export interface BundledAllocator {
  name: string;
  version: string;
  /** Path of the shared library inside the runtime tree. */
  path: string;
  /** Path of libcompressd-arena.so inside the runtime tree (see jemallocEnv). */
  arena?: string;
}

/** The only argument of a child started to learn whether the exec and the preload work here. */
const PROBE_ARG = '--allocator-probe';
const CHOICES = ['jemalloc', 'system'];

let described: string | undefined;

export const mapsJemalloc = (): boolean => {
  try {
    return /\/libjemalloc[^/\n]*$/m.test(readFileSync('/proc/self/maps', 'utf8'));
  } catch {
    return false;
  }
};

/** Says what this process allocates with, when it knows better than the maps (why it is not on jemalloc). */
export function describeAllocator(text: string): void {
  described = text;
}

/**
 * The environment that preloads `lib` (and `arena`, libcompressd-arena.so, after it), before what
 * LD_PRELOAD already holds, with compressd's MALLOC_CONF unless the environment has its own. Without
 * its background thread jemalloc purges freed pages only inside later malloc/free calls, so an idle
 * server kept them: 1,000-job soak, RSS at rest 282 MB without, 190 MB with (fresh: 127). With
 * `arena`, every thread shares one arena and a freed buffer of any size waits for that decay (10 s)
 * instead of going back to the kernel at once, so the next job's buffers are pages already mapped
 * (src/runtime/arena-tune.c; docs/operating.md, "Large buffers"): a 24 MP JPG's job, repeated,
 * 3.6–4.4 s → 2.8–3.4 s, its page faults 115,000 → 50,000. The library also gives a buffer, or a
 * WebAssembly memory's growth, of 4 MiB or more huge pages while it lives, unless MALLOC_CONF sets `thp`
 * (docs/operating.md, "Huge pages").
 */
export function jemallocEnv(lib: string, env: NodeJS.ProcessEnv, arena?: string): NodeJS.ProcessEnv {
  const libs = arena ? `${lib} ${arena}` : lib;
  const preload = env.LD_PRELOAD ?? '';
  const conf = arena ? 'background_thread:true,narenas:1,oversize_threshold:0' : 'background_thread:true';
  return { ...env, LD_PRELOAD: preload ? `${libs} ${preload}` : libs, MALLOC_CONF: env.MALLOC_CONF ?? conf };
}

/** COMPRESSD_ALLOCATOR: `jemalloc` (the default) or `system`. */
export function allocatorChoice(env: NodeJS.ProcessEnv): string {
  const choice = env.COMPRESSD_ALLOCATOR || 'jemalloc';
  if (!CHOICES.includes(choice)) throw new AllocatorError(`COMPRESSD_ALLOCATOR: expected ${CHOICES.join(' or ')}, got ${JSON.stringify(choice)}`);
  return choice;
}

/** What this process allocates with, for `--version` and the start log line. */
export function allocatorInUse(): string {
  return described ?? (mapsJemalloc() ? 'jemalloc (preloaded)' : 'glibc malloc');
}

/** In the probe child: say whether jemalloc is mapped, and stop before anything else runs. */
export function answerProbe(): void {
  if (process.argv.length !== 3 || process.argv[2] !== PROBE_ARG) return;
  process.stdout.write(mapsJemalloc() ? 'jemalloc' : 'none');
  process.exit(0);
}

export class AllocatorError extends Error {}

/**
 * Puts the executable on its bundled jemalloc unless it already runs on jemalloc (its own re-exec,
 * or an operator's LD_PRELOAD) or COMPRESSD_ALLOCATOR=system says not to. Node aborts the process
 * when process.execve fails, so a child started the same way first proves that this kernel runs the
 * executable and that the loader maps the library here (glibc new enough, the cache dir not noexec);
 * where it does not (qemu-user without binfmt, an old glibc), the server runs on glibc malloc and says why.
 */
export function useBundledAllocator(tree: string, bundled: BundledAllocator, env: NodeJS.ProcessEnv = process.env): void {
  const choice = allocatorChoice(env);
  const lib = join(tree, bundled.path);
  const arena = bundled.arena === undefined ? undefined : join(tree, bundled.arena);
  const preload = env.LD_PRELOAD ?? '';
  if (mapsJemalloc()) {
    described = preload.split(/[\s:]+/).includes(lib) ? `${bundled.name} ${bundled.version} (bundled)` : 'jemalloc (preloaded by LD_PRELOAD)';
    return;
  }
  if (choice === 'system') {
    described = 'glibc malloc (COMPRESSD_ALLOCATOR=system)';
    return;
  }
  const fallback = (why: string) => {
    described = `glibc malloc (the bundled ${bundled.name} ${bundled.version} ${why})`;
  };
  if (!execve) return fallback(`cannot be preloaded: Node ${process.version} cannot re-execute itself`);
  if (/[\s:]/.test(lib)) return fallback(`cannot be preloaded from a path with spaces or colons: ${lib}`);
  if (preload.split(/[\s:]+/).includes(lib)) return fallback('was preloaded but did not load');
  const preloadEnv = jemallocEnv(lib, env, arena);
  const probe = spawnSync(process.execPath, [PROBE_ARG], { env: preloadEnv, encoding: 'utf8', timeout: 60_000 });
  if (probe.stdout !== 'jemalloc') {
    const said = probe.stderr.replace(/\s+/g, ' ').trim().slice(0, 300);
    const ended = probe.error?.message ?? (probe.status === 0 ? `ran on ${probe.stdout || 'another allocator'}` : probe.status === null ? `ended by ${probe.signal}` : `ended with exit status ${probe.status}`);
    return fallback(`does not load here: a trial start with it ${ended}${said ? `: ${said}` : ''}`);
  }
  execve(process.execPath, [process.argv0, ...process.argv.slice(2)], preloadEnv);
}
