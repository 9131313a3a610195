// Debian .debs the build carries libraries from, fetched from Debian's archive by their pool path and
// checked against the SHA256 pinned beside them (a mismatch fails the build), kept in the build cache,
// and unpacked with dpkg-deb. DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR name other mirrors of the main
// and the security archive.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { buildCacheDir } from './locked-package.mjs';

export class DebError extends Error {}

const ARCHIVES = {
  debian: () => process.env.DEBIAN_MIRROR || 'http://deb.debian.org/debian',
  'debian-security': () => process.env.DEBIAN_SECURITY_MIRROR || 'http://deb.debian.org/debian-security',
};

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** Where a pinned .deb ({ archive, pool, sha256 }) is fetched from. */
export const debUrl = (deb) => `${ARCHIVES[deb.archive ?? 'debian']().replace(/\/+$/, '')}/${deb.pool}`;

/** The pinned .deb in the build cache (fetched once): its path and file name. */
export async function fetchDeb(deb) {
  const name = basename(deb.pool);
  const cache = buildCacheDir();
  const file = join(cache, name);
  if (existsSync(file) && sha256(readFileSync(file)) === deb.sha256) return { file, name };
  const url = debUrl(deb);
  let bytes;
  try {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    bytes = Buffer.from(await res.arrayBuffer());
  } catch (err) {
    const variable = deb.archive === 'debian-security' ? 'DEBIAN_SECURITY_MIRROR' : 'DEBIAN_MIRROR';
    throw new DebError(`cannot fetch ${url} (${err.cause?.message ?? err.message}); set ${variable} to a Debian mirror that holds it`);
  }
  const got = sha256(bytes);
  if (got !== deb.sha256) throw new DebError(`${url} has SHA256 ${got}, the build pins ${deb.sha256}`);
  mkdirSync(cache, { recursive: true });
  const tmp = `${file}.${process.pid}`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, file);
  return { file, name };
}

/** Unpacks a .deb's files into `dir`. */
export function unpackDeb(file, dir) {
  mkdirSync(dir, { recursive: true });
  const unpacked = spawnSync('dpkg-deb', ['-x', file, dir], { encoding: 'utf8' });
  if (unpacked.status !== 0) throw new DebError(`dpkg-deb -x ${file} failed: ${unpacked.error?.message ?? unpacked.stderr.trim()}`);
}
