import { mkdirSync, readdirSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processAlive } from '../durable/lock.ts';

/** Extracted trees are named `<version>-<16 hex>`; anything else in the cache root is left alone. */
const TREE_NAME = /^[\w.+]+-[0-9a-f]{16}$/;
const STALE_TMP_MS = 3600_000;

/**
 * Marks the tree `id` as used by this process until it exits (`.leases/<id>.<pid>`). Pool
 * threads load files from the tree long after start, so a tree stays while its process lives.
 */
export function takeLease(root: string, id: string): void {
  const dir = join(root, '.leases');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${id}.${process.pid}`);
  writeFileSync(file, '');
  process.once('exit', () => {
    try {
      unlinkSync(file);
    } catch {
      // Already gone (a prune by a later start after this process was judged dead).
    }
  });
}

/** Removes trees of other builds with no live process, abandoned temporary dirs and dead leases. */
export function pruneOldTrees(root: string, current: string): void {
  const leaseDir = join(root, '.leases');
  const live = new Set<string>();
  for (const name of readdirSync(leaseDir)) {
    const dot = name.lastIndexOf('.');
    const pid = Number(name.slice(dot + 1));
    if (Number.isInteger(pid) && pid > 0 && processAlive(pid)) live.add(name.slice(0, dot));
    else rmSync(join(leaseDir, name), { force: true });
  }
  for (const name of readdirSync(root)) {
    const path = join(root, name);
    if (name.startsWith('.tmp-')) {
      if (Date.now() - statSync(path).mtimeMs > STALE_TMP_MS) rmSync(path, { recursive: true, force: true });
    } else if (name !== current && TREE_NAME.test(name) && !live.has(name)) {
      rmSync(path, { recursive: true, force: true });
    }
  }
}
