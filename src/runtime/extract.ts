import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
 * written to a private temporary directory and published by one rename, so a reader never sees
 * half a tree and concurrent starts agree on one copy. Every start checks each file's size, so a
 * tree cut short (a crash before the data reached the disk, a file removed by hand) is replaced
 * rather than loaded; that check is why files are not fsynced. Trees of other builds that no
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
      writeFileSync(target, read(f.path), { mode: f.mode & 0o755, flag: 'wx' });
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
