import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engineUnavailable, makeBaseImage, startEngine } from './docker.ts';

/**
 * `npm run release`, made once per test run and shared by the tests that need it (the release
 * test and the Docker test, which loads the release's image archive): the first of them builds
 * it, with a private Docker engine for the image, and marks dist/ with the test runner's identity
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
};
/** Every file the release directory holds, by name. */
export const ALL_RELEASE_FILES = [releaseFiles.bundle('x64'), releaseFiles.bundle('arm64'), releaseFiles.image, releaseFiles.sbom, releaseFiles.sums].sort();
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
  const engine = await startEngine();
  try {
    await makeBaseImage(engine);
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, [join(ROOT, 'scripts/release.mjs')], { cwd: ROOT, env: { ...process.env, ...engine.env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let said = '';
      child.stdout.on('data', (d) => (said += d));
      child.stderr.on('data', (d) => (said += d));
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve(said) : reject(new Error(`npm run release exited with ${code}:\n${said.slice(-4000)}`))));
    });
    writeFileSync(MARK, identity);
    console.log(`${output.trim()}\nnpm run release (with a private Docker engine) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await engine.stop();
  }
}
