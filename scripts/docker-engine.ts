import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { freemem, homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A private Docker engine, the one `npm run release` builds the image on and test/docker.test.ts
 * runs it on: Debian's docker.io (scripts/apt-packages.txt) started with its own data root, exec
 * root, pid file and socket, no iptables and no bridge (containers and builds use the host
 * network), so it touches nothing of the machine and two runs may coexist. The base image comes
 * from no registry: Debian from debootstrap.
 */

const DOCKER = '/usr/bin/docker';
const DOCKERD = '/usr/sbin/dockerd';
const DEBOOTSTRAP = '/usr/sbin/debootstrap';
const SUITE = 'bookworm';
const DATA_ROOT_IN_RAM_BYTES = 4 * 1024 ** 3;
const ROOTFS_IN_RAM_BYTES = 1024 ** 3;

export const BASE_IMAGE = 'debian:bookworm-slim';

/** Where the debootstrap root file system is kept between runs (the name is older than the release's use of it). */
const CACHE = process.env.COMPRESSD_TEST_CACHE ?? join(homedir(), '.cache', 'compressd-test');

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function run(cmd: string, args: string[], options: SpawnOptions = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d) => (stdout += d));
    child.stderr?.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function must(cmd: string, args: string[], options: SpawnOptions = {}): Promise<string> {
  const r = await run(cmd, args, options);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.code}:\n${(r.stderr || r.stdout).slice(-4000)}`);
  return r.stdout;
}

/** Why no engine can run here, or null when one should. */
export function engineUnavailable(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root: dockerd and debootstrap need root';
  for (const tool of [DOCKERD, DOCKER, DEBOOTSTRAP]) {
    if (!existsSync(tool)) return `${tool} is missing (scripts/setup.mjs installs docker.io and debootstrap with apt when run as root)`;
  }
  return null;
}

export class EngineFailed extends Error {}

export interface Engine {
  docker(args: string[], options?: SpawnOptions): Promise<string>;
  /** What a docker CLI run by another program needs to reach this engine (with `DOCKER`: the CLI to use). */
  env: NodeJS.ProcessEnv;
  /** Stops dockerd by its pid and removes what it leaves: mounts, its exec root, its data root. */
  stop(): Promise<void>;
}

function mountsUnder(dirs: string[]): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((m): m is string => !!m && dirs.some((d) => m === d || m.startsWith(`${d}/`)))
    .sort((a, b) => b.length - a.length);
}

export async function startEngine(): Promise<Engine> {
  const scratch = mkdtempSync(join(tmpdir(), 'compressd-dockerd-'));
  const dataRoot = join(scratch, 'data');
  const execRoot = join(scratch, 'exec');
  const pidfile = join(scratch, 'dockerd.pid');
  const host = `unix://${join(scratch, 'docker.sock')}`;
  // Images, layers and build cache (about 1.5 GB at the peak) go to a RAM disk when the machine
  // has room: deleting tens of thousands of files from a busy disk took longer than the build.
  mkdirSync(dataRoot);
  if (freemem() > DATA_ROOT_IN_RAM_BYTES * 2) spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${DATA_ROOT_IN_RAM_BYTES},mode=0710`, 'tmpfs', dataRoot]);
  const log = openSync(join(scratch, 'dockerd.log'), 'a');
  const dockerd = spawn(
    DOCKERD,
    ['--data-root', dataRoot, '--exec-root', execRoot, '--pidfile', pidfile, '--host', host, '--storage-driver', 'overlay2', '--iptables=false', '--ip-masq=false', '--bridge', 'none'],
    { stdio: ['ignore', log, log] },
  );
  closeSync(log);
  const env = { ...process.env, DOCKER_HOST: host, DOCKER_BUILDKIT: '1', DOCKER_CONFIG: join(scratch, 'client') };
  const exited = new Promise<void>((resolve) => dockerd.once('exit', () => resolve()));

  const engine: Engine = {
    docker: (args, options = {}) => must(DOCKER, args, { env, ...options }),
    env: { DOCKER_HOST: host, DOCKER_BUILDKIT: '1', DOCKER_CONFIG: env.DOCKER_CONFIG, DOCKER },
    async stop() {
      if (dockerd.exitCode === null && dockerd.signalCode === null) {
        dockerd.kill('SIGTERM');
        const killed = setTimeout(() => dockerd.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(killed);
      }
      for (const mount of mountsUnder([execRoot, dataRoot])) spawnSync('umount', ['-l', mount]);
      rmSync(scratch, { recursive: true, force: true });
    },
  };

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (dockerd.exitCode !== null || dockerd.signalCode !== null || Date.now() > deadline) {
      const said = readFileSync(join(scratch, 'dockerd.log'), 'utf8').split('\n').slice(-15).join('\n');
      await engine.stop();
      throw new EngineFailed(`dockerd did not start (${dockerd.exitCode ?? dockerd.signalCode ?? 'timed out'}):\n${said}`);
    }
    if ((await run(DOCKER, ['version'], { env })).code === 0) return engine;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The Debian mirror apt itself uses for the suite's main component. */
function aptMirror(): string {
  const policy = spawnSync('apt-cache', ['policy'], { encoding: 'utf8' }).stdout ?? '';
  const m = new RegExp(`\\s(https?://\\S+) ${SUITE}/main `).exec(policy);
  if (!m) throw new Error(`apt has no ${SUITE}/main source to debootstrap from`);
  return m[1];
}

/** Writes `make(tmp)`'s file into the cache under `name` once; concurrent runs race harmlessly. */
async function cached(name: string, make: (tmp: string) => Promise<void>): Promise<string> {
  const path = join(CACHE, name);
  if (existsSync(path)) return path;
  mkdirSync(CACHE, { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    await make(tmp);
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return path;
}

/** Files a container never needs: documentation, translations, apt's downloaded lists. */
const TRIMMED = ['usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'var/cache/apt', 'var/lib/apt/lists'];

/** `debian:bookworm-slim` from `debootstrap --variant=minbase`, as a tar kept in the cache. */
async function debianRootfs(): Promise<string> {
  const mirror = aptMirror();
  const arch = (await must('dpkg', ['--print-architecture'])).trim();
  const key = `${SUITE}-minbase-${arch}-${mirror.replace(/[^\w.-]+/g, '_')}.tar`;
  return cached(key, async (tmp) => {
    const root = mkdtempSync(join(tmpdir(), 'compressd-rootfs-'));
    // dpkg syncs every file it unpacks: on a RAM disk debootstrap takes a fraction of the time.
    if (freemem() > ROOTFS_IN_RAM_BYTES * 2) spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${ROOTFS_IN_RAM_BYTES},mode=0755`, 'tmpfs', root]);
    try {
      await must(DEBOOTSTRAP, ['--variant=minbase', SUITE, root, mirror]);
      for (const dir of TRIMMED) {
        rmSync(join(root, dir), { recursive: true, force: true });
        mkdirSync(join(root, dir), { recursive: true });
      }
      await must('tar', ['--numeric-owner', '-C', root, '-cf', tmp, '.']);
    } finally {
      // Deepest first: whatever debootstrap left mounted in the chroot, then the RAM disk itself.
      for (const mount of mountsUnder([root])) spawnSync('umount', ['-l', mount]);
      rmSync(root, { recursive: true, force: true });
    }
  });
}

/** `debian:bookworm-slim` (the Dockerfile's runtime base) in the engine, imported from the debootstrap tar. */
export async function makeBaseImage(engine: Engine): Promise<void> {
  await engine.docker(['import', await debianRootfs(), BASE_IMAGE]);
}
