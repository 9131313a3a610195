// libcompressd-arena.so (src/runtime/arena-tune.c), preloaded after jemalloc so that its arena 0
// follows `oversize_threshold` (src/runtime/allocator.ts), compiled for the target CPU. build.mjs puts it
// in the runtime tree; scripts/setup.mjs builds it for the start from source:
//   node scripts/arena-tune.mjs [--arch x64|arm64]   → dist/arena-tune/<cpu>/libcompressd-arena.so
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cCompiler } from './c-compiler.mjs';

export class ArenaTuneError extends Error {}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = join(ROOT, 'src/runtime/arena-tune.c');
export const ARENA_TUNE_NAME = 'libcompressd-arena.so';

/** Where the start from source finds it (src/runtime/source-start.ts). */
export const sourceArenaTune = (arch) => join(ROOT, 'dist/arena-tune', arch, ARENA_TUNE_NAME);

/** Compiles the library for `arch` to the file `dest`. Stripped, as compressd-init is: a release is the same wherever it is built. */
export function buildArenaTune(arch, dest) {
  mkdirSync(dirname(dest), { recursive: true });
  const cc = cCompiler(arch);
  const r = spawnSync(cc, ['-O2', '-s', '-shared', '-fPIC', '-Wall', '-Wextra', '-Werror', '-o', dest, SOURCE], { encoding: 'utf8' });
  if (r.status !== 0) throw new ArenaTuneError(`${cc} could not build ${SOURCE}: ${r.error?.message ?? r.stderr.trim()}`);
  return dest;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { arch: { type: 'string', default: process.arch } } });
  try {
    console.log(buildArenaTune(values.arch, sourceArenaTune(values.arch)));
  } catch (e) {
    console.error(e instanceof ArenaTuneError ? e.message : e);
    process.exit(1);
  }
}
