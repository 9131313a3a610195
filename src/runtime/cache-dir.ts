import { chmodSync, mkdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export class CacheDirError extends Error {}

/**
 * Where the single executable extracts its runtime tree: `COMPRESSD_CACHE_DIR`, else the XDG
 * cache home, else `~/.cache/compressd`, else a per-user directory in the temp dir (as under
 * `env -i`, where HOME is unset).
 */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.COMPRESSD_CACHE_DIR) return resolve(env.COMPRESSD_CACHE_DIR);
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, 'compressd');
  if (env.HOME) return join(env.HOME, '.cache', 'compressd');
  return join(tmpdir(), `compressd-${process.getuid?.() ?? 'user'}`);
}

/**
 * Creates the cache root (mode 0700) or checks an existing one: code is loaded from it, so it
 * must belong to this user and nobody else may write there.
 */
export function ensurePrivateRoot(root: string): void {
  try {
    mkdirSync(root, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new CacheDirError(`cannot create the cache directory ${root} (${(err as Error).message}); set COMPRESSD_CACHE_DIR to a writable, exec-capable directory`);
  }
  const st = statSync(root);
  if (!st.isDirectory()) throw new CacheDirError(`cache path ${root} is not a directory`);
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) throw new CacheDirError(`cache directory ${root} belongs to uid ${st.uid}, not to this user (${uid}); set COMPRESSD_CACHE_DIR`);
  if ((st.mode & 0o077) !== 0) chmodSync(root, 0o700);
}

/**
 * Native addons are mapped executable; on a `noexec` mount (Docker's `--tmpfs` default) that
 * fails deep inside the first job. Say so at start instead. Linux only; elsewhere no check.
 */
export function assertExecAllowed(dir: string): void {
  let mountinfo: string;
  try {
    mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return;
  }
  const real = realpathSync(dir);
  let best: { point: string; options: string[] } | undefined;
  for (const line of mountinfo.split('\n')) {
    const f = line.split(' ');
    if (f.length < 6) continue;
    const point = f[4].replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    const inside = point === '/' || real === point || real.startsWith(`${point}/`);
    if (inside && (!best || point.length >= best.point.length)) best = { point, options: f[5].split(',') };
  }
  if (best?.options.includes('noexec')) {
    throw new CacheDirError(
      `cache directory ${dir} is on a noexec mount (${best.point}); native code cannot load from it. ` +
        'Set COMPRESSD_CACHE_DIR to an exec-capable directory (in Docker: --tmpfs /tmp:rw,exec,mode=1777).',
    );
  }
}
