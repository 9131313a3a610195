import { readdirSync, realpathSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, resolve } from 'node:path';
import { glob, isDynamicPattern } from 'tinyglobby';
import { compressorForFormat } from '../catalog/index.ts';

/** One file to compress, with the directory its output path is kept relative to. */
export interface InputFile {
  path: string;
  /** The output keeps `relative(base, path)` under --out: a directory argument's layout survives. */
  base: string;
}

export interface Expanded {
  files: InputFile[];
  /** Arguments that named nothing (no such file, a glob that matched nothing). */
  missing: string[];
}

const formatOf = (path: string) => extname(path).slice(1).toLowerCase();

function walk(dir: string, out: string[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (entry.isFile()) out.push(path);
  }
}

/**
 * Files named on the command line. A file is taken whatever its extension (an unsupported one
 * fails visibly); directories are walked and globs expanded, keeping only supported formats.
 * The same file reached twice is compressed once.
 */
export async function expandInputs(args: string[], cwd = process.cwd()): Promise<Expanded> {
  const files: InputFile[] = [];
  const missing: string[] = [];
  const seen = new Set<string>();
  const add = (path: string, base: string) => {
    const real = realpathSync(path);
    if (seen.has(real)) return;
    seen.add(real);
    files.push({ path, base });
  };
  for (const arg of args) {
    const path = resolve(cwd, arg);
    const st = statSync(path, { throwIfNoEntry: false });
    if (st?.isFile()) {
      add(path, dirname(path));
    } else if (st?.isDirectory()) {
      const found: string[] = [];
      walk(path, found);
      for (const f of found.sort()) if (compressorForFormat(formatOf(f))) add(f, path);
    } else if (isDynamicPattern(arg)) {
      const matched = (await glob(arg, { cwd, absolute: true, onlyFiles: true })).filter((f) => compressorForFormat(formatOf(f)));
      if (!matched.length) missing.push(arg);
      for (const f of matched.sort()) add(f, dirname(f));
    } else {
      missing.push(arg);
    }
  }
  return { files, missing };
}

export function displayPath(path: string, cwd = process.cwd()): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') ? rel : path;
}
