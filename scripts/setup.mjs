// Installs the Debian packages the tests and the benchmark need, so that `npm test`
// works on a fresh machine. Lists: scripts/apt-packages.txt (tests), plus
// scripts/apt-packages-bench.txt when called with --bench. Then builds the library `serve` from source
// preloads after jemalloc (scripts/arena-tune.mjs) and the native decoders the workers use from source
// (scripts/heif-decoder.mjs, scripts/raw-decoder.mjs; without them HEIC and camera RAW decode through
// WebAssembly) and jpegli (scripts/jpegli.mjs; without it the JPEG search compares mozjpeg's forms alone).
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

if (spawnSync(process.execPath, [join(here, 'arena-tune.mjs'), '--arch', process.arch], { stdio: 'inherit' }).status !== 0) {
  console.warn('setup: libcompressd-arena.so was not built; the server from source gives freed buffers back to the kernel at once');
}
for (const [script, what] of [['heif-decoder.mjs', 'HEIF decoder was not built; HEIC decodes'], ['raw-decoder.mjs', 'RAW decoder was not built; camera RAW decodes']]) {
  const built = spawnSync(process.execPath, [join(here, script), '--arch', process.arch], { stdio: 'inherit' });
  if (built.status !== 0) console.warn(`setup: the native ${what} through WebAssembly from source`);
}
if (spawnSync(process.execPath, [join(here, 'jpegli.mjs')], { stdio: 'inherit' }).status !== 0) {
  console.warn('setup: jpegli was not built; the JPEG search from source compares mozjpeg\'s forms alone, and the quality benchmark compares without it');
}
