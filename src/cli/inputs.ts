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
  /** Files a directory walk or a glob found and left alone, with the reason (hidden entries are not listed). */
  skipped: { path: string; reason: string }[];
}

const formatOf = (path: string) => extname(path).slice(1).toLowerCase();

/**
 * Why a file is not compressed, or null when some compressor takes it. The format is the extension's,
 * never guessed from the bytes: the API takes it the same way.
 */
export function unsupportedReason(path: string): string | null {
  const ext = formatOf(path);
  if (!ext) return "no extension, so its format is unknown; rename it with its format's extension (.jpg, .png, .pdf, …)";
  return compressorForFormat(ext) ? null : `no compressor takes .${ext} files`;
}

function walk(dir: string, out: string[], skipped: Expanded['skipped']): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out, skipped);
    else if (entry.isFile()) out.push(path);
    else skipped.push({ path, reason: entry.isSymbolicLink() ? 'a symbolic link (not followed in a directory)' : 'not a regular file' });
  }
}

/**
 * Files named on the command line. A file is taken whatever its extension (an unsupported one
 * fails visibly); directories are walked and globs expanded, keeping only supported formats and
 * listing the rest as skipped. The same file reached twice is compressed once.
 */
export async function expandInputs(args: string[], cwd = process.cwd()): Promise<Expanded> {
  const files: InputFile[] = [];
  const missing: string[] = [];
  const skipped: Expanded['skipped'] = [];
  const keep = (found: string[], base: (f: string) => string) => {
    for (const f of found.sort()) {
      const reason = unsupportedReason(f);
      if (reason) skipped.push({ path: f, reason });
      else add(f, base(f));
    }
  };
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
      walk(path, found, skipped);
      keep(found, () => path);
    } else if (isDynamicPattern(arg)) {
      const matched = await glob(arg, { cwd, absolute: true, onlyFiles: true });
      if (!matched.length) missing.push(arg);
      keep(matched, dirname);
    } else {
      missing.push(arg);
    }
  }
  return { files, missing, skipped };
}

export function displayPath(path: string, cwd = process.cwd()): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') ? rel : path;
}
