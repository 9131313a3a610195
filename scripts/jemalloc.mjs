// The allocator the executable runs on: Debian bookworm's libjemalloc2 for the target CPU, fetched from
// the Debian archive as the .deb pinned below by its SHA256 (scripts/debian-deb.mjs). The same file
// for every build: the release's and the Docker image's from-source stage. Debian's copyright file travels into THIRD_PARTY_NOTICES.txt.
import { mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { DebError, debUrl, fetchDeb, unpackDeb } from './debian-deb.mjs';

export class JemallocError extends Error {}

export const JEMALLOC = {
  name: 'jemalloc',
  version: '5.3.0',
  licence: { id: 'BSD-2-Clause' },
  website: 'https://jemalloc.net/',
  debian: { package: 'libjemalloc2', version: '5.3.0-1' },
};

const DEBS = {
  x64: { pool: 'pool/main/j/jemalloc/libjemalloc2_5.3.0-1_amd64.deb', sha256: 'a4117c23c5c8acf6c9678a6cb086f000b79476369da7efe8a78a70826956ad3d', lib: 'usr/lib/x86_64-linux-gnu/libjemalloc.so.2' },
  arm64: { pool: 'pool/main/j/jemalloc/libjemalloc2_5.3.0-1_arm64.deb', sha256: '866eba7688ec5cbb98200a05540c4909df6320557371b634b5d394cd32b9f252', lib: 'usr/lib/aarch64-linux-gnu/libjemalloc.so.2' },
};
const COPYRIGHT = `usr/share/doc/${JEMALLOC.debian.package}/copyright`;

/**
 * Unpacks jemalloc for `arch` ('x64' or 'arm64') into `dest`; returns the paths of its shared library
 * and Debian's copyright file, and what the SBOM says of its origin.
 */
export async function fetchJemalloc(arch, dest) {
  const deb = DEBS[arch];
  if (!deb) throw new JemallocError(`no jemalloc pinned for ${arch}`);
  let fetched;
  try {
    fetched = await fetchDeb(deb);
    rmSync(dest, { recursive: true, force: true });
    mkdirSync(dest, { recursive: true });
    const tmp = mkdtempSync(join(dest, '.deb-'));
    unpackDeb(fetched.file, tmp);
    renameSync(join(tmp, deb.lib), join(dest, 'libjemalloc.so.2'));
    renameSync(join(tmp, COPYRIGHT), join(dest, 'copyright'));
    rmSync(tmp, { recursive: true, force: true });
  } catch (err) {
    if (err instanceof DebError) throw new JemallocError(err.message);
    throw err;
  }
  return { lib: join(dest, 'libjemalloc.so.2'), copyright: join(dest, 'copyright'), deb: { name: fetched.name, sha256: deb.sha256, url: debUrl(deb) } };
}
