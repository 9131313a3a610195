// compressd-init (src/runtime/init.c), the init the executable puts in front of itself as PID 1
// (src/runtime/pid1.ts), compiled for the target CPU; build.mjs puts it in the runtime tree. Stripped: the
// symbol table would hold the source's absolute path, and a release is the same wherever it is built.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cCompiler } from './c-compiler.mjs';

export class InitProgramError extends Error {}

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), '../src/runtime/init.c');

/** Compiles the program for `arch` to the file `dest`. */
export function buildInitProgram(arch, dest) {
  mkdirSync(dirname(dest), { recursive: true });
  const cc = cCompiler(arch);
  const r = spawnSync(cc, ['-O2', '-s', '-Wall', '-Wextra', '-Werror', '-o', dest, SOURCE], { encoding: 'utf8' });
  if (r.status !== 0) throw new InitProgramError(`${cc} could not build ${SOURCE}: ${r.error?.message ?? r.stderr.trim()}`);
  chmodSync(dest, 0o755);
  return dest;
}
