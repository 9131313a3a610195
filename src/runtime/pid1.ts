import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { execve } from './execve.ts';

/**
 * As PID 1 (a container started without `--init`), the executable replaces itself with the init it
 * carries (./init.c), which runs it again as its child: the kernel gives PID 1 no default signal
 * actions, so a server there could not end itself by a signal, and a stop whose worker thread was
 * inside a long native call waited for the container's SIGKILL (src/ops/exit.ts). The init forwards
 * the stop's signals, reaps every process that ends under it and exits as the server does.
 */

/** Where the runtime tree holds the init (build.mjs puts it there). */
const INIT_PATH = 'lib/compressd-init';

/**
 * Execs the tree's init in front of this process when it is PID 1; returns otherwise, and also when
 * the init does not run here (a trial start first, since Node aborts when process.execve fails): the
 * server then runs as PID 1 itself, as before, and `warn` says why.
 */
export function putInitInFront(tree: string, warn: (text: string) => void): void {
  if (process.pid !== 1 || !execve) return;
  const init = join(tree, INIT_PATH);
  const probe = spawnSync(init, ['--probe'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.stdout.trim() !== 'compressd-init') {
    warn(`runs as PID 1 without its init (${init}: ${probe.error?.message ?? (probe.stderr.trim() || `exit status ${probe.status}`)}); a stop during a long native call then waits for the container's timeout`);
    return;
  }
  execve(init, [init, process.execPath, process.argv0, ...process.argv.slice(2)], process.env);
}
