import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engineUnavailable } from '../../scripts/docker-engine.ts';

/**
 * `npm run release`, made once per test run and shared by the tests that need it (the release
 * test and the Docker test, which loads the release's image archive): the first of them builds
 * it (the release starts its own private Docker engine for the image and stops it), signed with a
 * throwaway minisign key, and marks dist/ with the test runner's identity
 * (`node --test` runs each file as its child); the next finds the mark and reuses the files.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const RELEASE_DIR = join(ROOT, 'dist', 'release');
const MARK = join(ROOT, 'dist', '.release-test-run');
export const VERSION = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;

export const releaseFiles = {
  bundle: (arch: 'x64' | 'arm64') => `compressd-${VERSION}-linux-${arch}.tar.gz`,
  image: `compressd-${VERSION}-image-linux-amd64.tar`,
  sbom: `compressd-${VERSION}.cdx.json`,
  sums: 'SHA256SUMS',
  signature: 'SHA256SUMS.minisig',
};
/** Every file the release directory holds, by name. */
export const ALL_RELEASE_FILES = [releaseFiles.bundle('x64'), releaseFiles.bundle('arm64'), releaseFiles.image, releaseFiles.sbom, releaseFiles.sums, releaseFiles.signature].sort();
export const IMAGE = `compressd:${VERSION}`;

/** The test runner: its pid and start time, which no later process shares. */
function runIdentity(): string {
  const stat = readFileSync(`/proc/${process.ppid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return `${process.ppid}:${fields[19]}`;
}

/** Why the release cannot be built here (it needs a Docker engine for the image), or null. */
export const releaseUnavailable = engineUnavailable;

let pending: Promise<void> | undefined;

export function sharedRelease(): Promise<void> {
  pending ??= build();
  return pending;
}

async function build(): Promise<void> {
  const identity = runIdentity();
  const complete = ALL_RELEASE_FILES.every((f) => existsSync(join(RELEASE_DIR, f)));
  if (complete && existsSync(MARK) && readFileSync(MARK, 'utf8') === identity) return;
  rmSync(MARK, { force: true });
  const started = Date.now();
  const output = await new Promise<string>((resolve, reject) => {
    // Without DOCKER_HOST the release brings up its own engine, as at a maintainer's machine.
    const env = { ...process.env, DOCKER_HOST: '', COMPRESSD_RELEASE_SIGN_KEY: signingKey().secret };
    const child = spawn(process.execPath, [join(ROOT, 'scripts/release.mjs')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let said = '';
    child.stdout.on('data', (d) => (said += d));
    child.stderr.on('data', (d) => (said += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(said) : reject(new Error(`npm run release exited with ${code}:\n${said.slice(-4000)}`))));
  });
  writeFileSync(MARK, identity);
  console.log(`${output.trim()}\nnpm run release (with its private Docker engine) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

const KEYS = join(ROOT, 'dist', '.release-test-key');

/** A throwaway minisign key pair without a password, made once per checkout: the release test signs with it. */
export function signingKey(): { secret: string; public: string } {
  const key = { secret: join(KEYS, 'minisign.key'), public: join(KEYS, 'minisign.pub') };
  if (!existsSync(key.public)) {
    rmSync(KEYS, { recursive: true, force: true });
    mkdirSync(KEYS, { recursive: true });
    const made = spawnSync('minisign', ['-G', '-W', '-s', key.secret, '-p', key.public], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`minisign -G failed: ${made.error?.message ?? made.stderr}`);
  }
  return key;
}
