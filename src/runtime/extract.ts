import { closeSync, existsSync, fsyncSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { assertExecAllowed, ensurePrivateRoot } from './cache-dir.ts';
import { pruneOldTrees, takeLease } from './lease.ts';

/** What build.mjs embeds next to the files: their content hash names the extracted directory. */
export interface RuntimeManifest {
  /** `<version>-<16 hex of sha256 over every path, mode and content>`. */
  id: string;
  files: { path: string; mode: number; size: number }[];
}

/** The SEA asset key of the manifest; every other asset key is a file's path in the tree. */
export const MANIFEST_KEY = '@manifest';

/**
 * Makes sure `<root>/<manifest.id>` holds the runtime tree and returns its path. The tree is
 * written to a private temporary directory, flushed, and published by one rename, so a reader
 * never sees half a tree and concurrent starts agree on one copy. Trees of other builds that no
 * live process uses are removed.
 */
export function ensureRuntimeTree(root: string, manifest: RuntimeManifest, read: (key: string) => Uint8Array): string {
  ensurePrivateRoot(root);
  assertExecAllowed(root);
  takeLease(root, manifest.id);
  const dir = join(root, manifest.id);
  if (!isComplete(dir, manifest)) {
    if (existsSync(dir)) retire(root, dir);
    publish(root, dir, manifest, read);
  }
  pruneOldTrees(root, manifest.id);
  return dir;
}

function isComplete(dir: string, manifest: RuntimeManifest): boolean {
  try {
    return manifest.files.every((f) => statSync(join(dir, f.path)).size === f.size);
  } catch {
    return false;
  }
}

/** A damaged tree (a file removed or cut by hand) is moved aside whole, then deleted. */
function retire(root: string, dir: string): void {
  const aside = mkdtempSync(join(root, '.tmp-'));
  renameSync(dir, join(aside, 'damaged'));
  rmSync(aside, { recursive: true, force: true });
}

function publish(root: string, dir: string, manifest: RuntimeManifest, read: (key: string) => Uint8Array): void {
  const tmp = mkdtempSync(join(root, '.tmp-'));
  try {
    for (const f of manifest.files) {
      const target = join(tmp, f.path);
      mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
      writeDurably(target, read(f.path), f.mode & 0o755);
    }
    try {
      renameSync(tmp, dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Another process published the same tree first: use theirs.
      if ((code === 'ENOTEMPTY' || code === 'EEXIST') && isComplete(dir, manifest)) return;
      throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function writeDurably(path: string, bytes: Uint8Array, mode: number): void {
  const fd = openSync(path, 'wx', mode);
  try {
    for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off, bytes.length - off);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
