// Packages the lock file records but `npm ci` did not install here (platform builds for another
// CPU): fetched with npm's own client at the lock's version, checked against the lock's integrity,
// and kept in a cache so that a repeated build fetches nothing.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const buildCacheDir = () => process.env.COMPRESSD_BUILD_CACHE || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'compressd-build');

export class LockError extends Error {}

/** The lock file's entry for a top-level package: version, integrity, os/cpu/libc. */
export function lockedEntry(root, name) {
  const entry = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')).packages?.[`node_modules/${name}`];
  if (!entry?.version || !entry.integrity?.startsWith('sha512-')) throw new LockError(`${name} is not pinned with a sha512 integrity in package-lock.json`);
  return entry;
}

/** All lock entries, keyed by package name (top-level ones only: platform packages live there). */
export function lockedPackages(root) {
  const packages = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')).packages ?? {};
  return new Map(
    Object.entries(packages)
      .filter(([path]) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path))
      .map(([path, entry]) => [path.slice('node_modules/'.length), entry]),
  );
}

const sri = (file) => `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;

/**
 * The tarball of `name` exactly as package-lock.json pins it. A cached copy is re-checked on
 * every use; a fresh download that differs from the lock fails the build.
 */
export function lockedTarball(root, name) {
  const { version, integrity } = lockedEntry(root, name);
  const cache = buildCacheDir();
  const file = join(cache, `${name.replace('/', '+')}-${version}.tgz`);
  if (existsSync(file) && sri(file) === integrity) return file;
  mkdirSync(cache, { recursive: true });
  const tmp = mkdtempSync(join(cache, '.fetch-'));
  try {
    const packed = spawnSync('npm', ['pack', `${name}@${version}`, '--pack-destination', tmp, '--silent'], { encoding: 'utf8' });
    if (packed.status !== 0) throw new LockError(`npm pack ${name}@${version} failed: ${(packed.stderr || packed.stdout).trim()}`);
    const [got] = readdirSync(tmp);
    const actual = sri(join(tmp, got));
    if (actual !== integrity) throw new LockError(`${name}@${version} from the registry has integrity ${actual}, package-lock.json records ${integrity}`);
    renameSync(join(tmp, got), file);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return file;
}

/** Unpacks the locked tarball of `name` into `dest` (the tarball's `package/` becomes `dest`). */
export function unpackLocked(root, name, dest, only = []) {
  const tarball = lockedTarball(root, name);
  mkdirSync(dest, { recursive: true });
  const r = spawnSync('tar', ['-xzf', tarball, '-C', dest, '--strip-components=1', '--no-same-owner', ...only.map((p) => `package/${p}`)], { encoding: 'utf8' });
  if (r.status !== 0) throw new LockError(`unpacking ${tarball}: ${r.stderr.trim()}`);
  return tarball;
}
