// The allocator the executable runs on: Debian bookworm's libjemalloc2 for the target CPU, fetched from
// the Debian archive as the .deb pinned below by its SHA256 (a mismatch fails the build), kept in the
// build cache, and unpacked with dpkg-deb. The same file for every build: the release's and the Docker
// image's from-source stage. Debian's copyright file travels into THIRD_PARTY_NOTICES.txt.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildCacheDir } from './locked-package.mjs';

export class JemallocError extends Error {}

export const JEMALLOC = {
  name: 'jemalloc',
  version: '5.3.0',
  licence: { id: 'BSD-2-Clause' },
  website: 'https://jemalloc.net/',
  debian: { package: 'libjemalloc2', version: '5.3.0-1' },
};

const DEBS = {
  x64: { debArch: 'amd64', sha256: 'a4117c23c5c8acf6c9678a6cb086f000b79476369da7efe8a78a70826956ad3d', lib: 'usr/lib/x86_64-linux-gnu/libjemalloc.so.2' },
  arm64: { debArch: 'arm64', sha256: '866eba7688ec5cbb98200a05540c4909df6320557371b634b5d394cd32b9f252', lib: 'usr/lib/aarch64-linux-gnu/libjemalloc.so.2' },
};
const COPYRIGHT = `usr/share/doc/${JEMALLOC.debian.package}/copyright`;
/** Where the .deb is fetched: Debian's pool, or the mirror DEBIAN_MIRROR names (the pinned SHA256 guards either). */
const mirror = () => (process.env.DEBIAN_MIRROR || 'http://deb.debian.org/debian').replace(/\/+$/, '');

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

async function debFile(arch) {
  const { debArch, sha256: pinned } = DEBS[arch];
  const name = `${JEMALLOC.debian.package}_${JEMALLOC.debian.version}_${debArch}.deb`;
  const cache = buildCacheDir();
  const file = join(cache, name);
  if (existsSync(file) && sha256(readFileSync(file)) === pinned) return { file, name };
  const url = `${mirror()}/pool/main/j/jemalloc/${name}`;
  let bytes;
  try {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    bytes = Buffer.from(await res.arrayBuffer());
  } catch (err) {
    throw new JemallocError(`cannot fetch ${url} (${err.cause?.message ?? err.message}); set DEBIAN_MIRROR to a Debian mirror that holds it`);
  }
  const got = sha256(bytes);
  if (got !== pinned) throw new JemallocError(`${url} has SHA256 ${got}, scripts/jemalloc.mjs pins ${pinned}`);
  mkdirSync(cache, { recursive: true });
  const tmp = `${file}.${process.pid}`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, file);
  return { file, name };
}

/**
 * Unpacks jemalloc for `arch` ('x64' or 'arm64') into `dest`; returns the paths of its shared library
 * and Debian's copyright file, and what the SBOM says of its origin.
 */
export async function fetchJemalloc(arch, dest) {
  const deb = DEBS[arch];
  if (!deb) throw new JemallocError(`no jemalloc pinned for ${arch}`);
  const { file, name } = await debFile(arch);
  rmSync(dest, { recursive: true, force: true });
  mkdirSync(dest, { recursive: true });
  const tmp = mkdtempSync(join(dest, '.deb-'));
  const unpacked = spawnSync('dpkg-deb', ['-x', file, tmp], { encoding: 'utf8' });
  if (unpacked.status !== 0) throw new JemallocError(`dpkg-deb -x ${file} failed: ${unpacked.error?.message ?? unpacked.stderr.trim()}`);
  const lib = join(dest, 'libjemalloc.so.2');
  const copyright = join(dest, 'copyright');
  renameSync(join(tmp, deb.lib), lib);
  renameSync(join(tmp, COPYRIGHT), copyright);
  rmSync(tmp, { recursive: true, force: true });
  return { lib, copyright, deb: { name, sha256: deb.sha256, url: `${mirror()}/pool/main/j/jemalloc/${name}` } };
}
