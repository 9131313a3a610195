import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VERSION = '2.9.6';

/**
 * Deno from its npm package, installed on first use into a cache folder of its own. It is not
 * a devDependency: the registry holds only this platform's binary package, so a lock file that
 * names all of them cannot be completed and `npm ci` would refuse the project.
 * Returns the path of the deno executable, or null when it cannot be installed or run here.
 */
export function denoBinary(): string | null {
  const prefix = join(ROOT, 'node_modules', '.cache', `deno-${VERSION}`);
  const bin = join(prefix, 'node_modules', '.bin', 'deno');
  if (!existsSync(bin)) {
    mkdirSync(prefix, { recursive: true });
    spawnSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', `deno@${VERSION}`], { stdio: 'ignore', timeout: 180_000 });
  }
  return existsSync(bin) && spawnSync(bin, ['--version']).status === 0 ? bin : null;
}
