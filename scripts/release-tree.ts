// A released version's source tree with its own dependencies installed, for the golden-data
// script and the rolling-upgrade test: `node --import tsx scripts/release-tree.ts 0.1.0` prints its path.
// Exported from git history (`git archive` of the release commit, so no worktree bookkeeping is
// left in the repository) into .scratch/releases/<version>, then `npm ci`; kept for later runs.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Every release and its commit; a new release adds a line when it is tagged. */
export const RELEASES: Record<string, string> = {
  '0.1.0': '2f3155ceceeda6334cf2d120e75f46fd5207f8ba',
};

function run(command: string, args: string[], opts: Parameters<typeof spawnSync>[2] = {}): string {
  const result = spawnSync(command, args, { encoding: 'utf8', ...opts });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${(String(result.stderr ?? '') || result.error?.message || '').trim()}`);
  return String(result.stdout);
}

/** The installed tree of `version`, made on first use. */
export function releaseTree(version: string): string {
  const commit = RELEASES[version];
  if (!commit) throw new Error(`unknown release ${version} (known: ${Object.keys(RELEASES).join(', ')})`);
  const dir = join(ROOT, '.scratch', 'releases', version);
  const ready = join(dir, '.ready');
  if (existsSync(ready)) return dir;
  if (spawnSync('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: ROOT }).status !== 0) {
    throw new Error(`commit ${commit} of release ${version} is not in this clone: fetch the full history (git fetch --unshallow)`);
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const archive = spawnSync('git', ['archive', '--format=tar', commit], { cwd: ROOT, maxBuffer: 1 << 30 });
  if (archive.status !== 0) throw new Error(`git archive ${commit} failed: ${archive.stderr}`);
  run('tar', ['-x', '-C', dir], { input: archive.stdout, encoding: 'buffer' });
  run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  writeFileSync(ready, `${commit}\n`);
  return dir;
}

if (process.argv[1] && join(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const version = process.argv[2];
  if (!version) {
    console.error('usage: node --import tsx scripts/release-tree.ts VERSION');
    process.exit(2);
  }
  console.log(releaseTree(version));
}
