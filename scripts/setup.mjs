// Installs the Debian packages the tests and the benchmark need, so that `npm test`
// works on a fresh machine. Lists: scripts/apt-packages.txt (tests), plus
// scripts/apt-packages-bench.txt when called with --bench. Then builds the native HEIF decoder
// the workers use from source (scripts/heif-decoder.mjs; without it HEIC decodes through WebAssembly).
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const lists = ['apt-packages.txt', ...(process.argv.includes('--bench') ? ['apt-packages-bench.txt'] : [])];
const wanted = lists
  .map((f) => join(here, f))
  .filter((f) => existsSync(f))
  .flatMap((f) => readFileSync(f, 'utf8').split('\n'))
  .map((l) => l.replace(/#.*/, '').trim())
  .filter(Boolean);

const installed = (pkg) => spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' }).stdout?.includes('install ok installed');
const missing = [...new Set(wanted)].filter((p) => !installed(p));

if (missing.length === 0) {
  // nothing to install
} else if (process.getuid?.() !== 0 || spawnSync('which', ['apt-get']).status !== 0) {
  console.warn(`setup: please install these Debian packages: ${missing.join(' ')}`);
} else {
  console.log(`setup: installing ${missing.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', 'install', '-y', '-qq', '--no-install-recommends', ...missing], { stdio: 'inherit', env });
}

const heif = spawnSync(process.execPath, [join(here, 'heif-decoder.mjs'), '--arch', process.arch], { stdio: 'inherit' });
if (heif.status !== 0) console.warn('setup: the native HEIF decoder was not built; HEIC decodes through WebAssembly from source');
