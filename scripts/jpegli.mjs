#!/usr/bin/env node
// jpegli, the JPEG encoder of the JPEG XL project, for the JPEG search (workers/image/jpegli.ts) and the
// quality benchmark's peer: workers/image/jpegli/encode.cc compiled with jpegli from Debian's sources
// (jpeg-xl 0.11.2 and Highway 1.2.0, the SIMD library it is written on, as Debian trixie ships them;
// bookworm's libjxl 0.7 predates jpegli and no Debian package carries it as a library of its own), and
// libjpeg's API headers from bookworm's libjpeg62-turbo-dev (jpegli's API is libjpeg's: the JPEG XL project
// builds it with libjpeg-turbo's headers). The tarballs and .debs are fetched from Debian's archive,
// checked against the SHA256 pinned here (scripts/debian-deb.mjs) and kept in the build cache; only
// jpegli's encoder and Highway's runtime dispatch are compiled, statically into the one program, for the
// target CPU (Highway compiles each SIMD path for several instruction sets and picks the best the CPU has
// at run time: SSE4, AVX2, AVX-512 on x64; NEON, SVE, SVE2 on arm64), about 40 s per CPU on 2 cores.
// The compiled program is kept in the build cache too, named by a hash of what made it (the pinned
// files, encode.cc, this script, the compiler's version): it is compiled again only when one of them
// changes, and the start from source, the executable and a release built again reuse it.
// libstdc++ and libgcc stay shared, as for every helper program of ours: the executable's base has
// them, and a program Debian bookworm's toolchain links needs glibc 2.34 (__libc_start_main), which
// comes with a newer libstdc++ than this program needs (GLIBCXX_3.4.21, GCC 5).
//
//   node scripts/jpegli.mjs [--arch x64|arm64]   builds dist/jpegli/<arch>/compressd-jpegli (npm test's setup does it)
// build.mjs builds the same into the executable's runtime tree (lib/jpegli). Needs g++ (and
// g++-aarch64-linux-gnu for arm64 on an x64 machine; scripts/apt-packages.txt) and dpkg-deb. Without
// the program the search compares mozjpeg's table sets alone.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cxxCompiler } from './c-compiler.mjs';
import { DebError, debUrl, fetchDeb, unpackDeb } from './debian-deb.mjs';
import { buildCacheDir } from './locked-package.mjs';

export class JpegliError extends Error {}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SCRIPT = fileURLToPath(import.meta.url);
const SOURCE = join(ROOT, 'workers/image/jpegli/encode.cc');
const TRIPLETS = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

/**
 * What the program is compiled from, with what the release's notices and SBOM say of each: the pinned
 * file per CPU (an original tarball of a Debian source package, the same for every CPU, or a .deb), the
 * directory a tarball unpacks to, and the files in it that state its licence (the notices quote them).
 */
const JPEG_XL = {
  name: 'jpegli',
  version: '0.11.2',
  licence: { id: 'BSD-3-Clause' },
  website: 'https://github.com/libjxl/libjxl',
  role: "jpegli's encoder, compiled into the program",
  purl: () => 'pkg:deb/debian/jpeg-xl@0.11.2?arch=source',
  pinned: () => ({ pool: 'pool/main/j/jpeg-xl/jpeg-xl_0.11.2.orig.tar.gz', sha256: 'ab38928f7f6248e2a98cc184956021acb927b16a0dee71b4d260dc040a4320ea' }),
  dir: 'libjxl-0.11.2',
  licenceFiles: ['libjxl-0.11.2/LICENSE', 'libjxl-0.11.2/PATENTS'],
};
const HIGHWAY = {
  name: 'highway',
  version: '1.2.0',
  licence: { expression: 'Apache-2.0 OR BSD-3-Clause' },
  website: 'https://github.com/google/highway',
  role: "Highway's run-time dispatch, compiled into the program",
  purl: () => 'pkg:deb/debian/highway@1.2.0?arch=source',
  pinned: () => ({ pool: 'pool/main/h/highway/highway_1.2.0.orig.tar.gz', sha256: '7e0be78b8318e8bdbf6fa545d2ecb4c90f947df03f7aadc42c1967f019e63343' }),
  dir: 'highway-1.2.0',
  licenceFiles: ['highway-1.2.0/LICENSE', 'highway-1.2.0/LICENSE-BSD3'],
};
const DEB_ARCH = { x64: 'amd64', arm64: 'arm64' };
const LIBJPEG_HEADERS_DEBS = {
  x64: { pool: 'pool/main/libj/libjpeg-turbo/libjpeg62-turbo-dev_2.1.5-2_amd64.deb', sha256: '10485411f751c24472c43b28fe24ab6389fedb027d496bbc2c831496f750ab01' },
  arm64: { pool: 'pool/main/libj/libjpeg-turbo/libjpeg62-turbo-dev_2.1.5-2_arm64.deb', sha256: 'd2ab47457f162d08ee9bfdd1a383013c25fe67b7e9a2210e7468333c5d18f6b7' },
};
const LIBJPEG_HEADERS = {
  name: 'libjpeg-turbo',
  version: '2.1.5',
  licence: { expression: 'IJG AND BSD-3-Clause AND Zlib' },
  website: 'https://libjpeg-turbo.org',
  role: "libjpeg's API headers (jpeglib.h and what it includes), which jpegli's API is declared with",
  purl: (arch) => `pkg:deb/debian/libjpeg62-turbo-dev@${encodeURIComponent('1:2.1.5-2')}?arch=${DEB_ARCH[arch]}&distro=debian-12`,
  pinned: (arch) => LIBJPEG_HEADERS_DEBS[arch],
  licenceFiles: ['usr/share/doc/libjpeg62-turbo-dev/copyright'],
};
const SOURCES = [JPEG_XL, HIGHWAY, LIBJPEG_HEADERS];
const JPEGLI_ENCODER = ['encode', 'encode_finish', 'encode_streaming', 'adaptive_quantization', 'bit_writer', 'bitstream', 'color_transform', 'common', 'downsample', 'entropy_coding', 'error', 'huffman', 'input', 'memory_manager', 'quant', 'simd', 'destination_manager'];
const HIGHWAY_RUNTIME = ['targets', 'abort', 'per_target', 'print', 'aligned_allocator'];

/** How build.mjs and the notices name the program, and its file name. */
export const JPEGLI = { title: 'the jpegli encoder', program: 'compressd-jpegli' };

/** Where the workers (workers/image/jpegli.ts) and the benchmark find the program from source. */
export const sourceDir = (arch) => join(ROOT, 'dist', 'jpegli', arch);

function compile(cxx, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cxx, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.on('error', (e) => reject(new JpegliError(`${cxx} does not run (${e.message}): install it (scripts/apt-packages.txt)`)));
    child.on('close', (code) => (code === 0 ? resolve() : reject(new JpegliError(`${cxx} ${args.join(' ')} failed: ${err.trim()}`))));
  });
}

/** Runs the compilations two at a time (the machine's cores; each takes a few seconds). */
async function compileAll(cxx, jobs) {
  const queue = [...jobs];
  const lane = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) await compile(cxx, job);
  };
  await Promise.all([lane(), lane()]);
}

/**
 * Compiles the program for `arch` in `work` (the pinned files unpacked there) to `out`. Its bytes
 * depend on its inputs only, not on where they lie (a release is the same wherever it is built): the
 * source paths jpegli's and Highway's error messages name are made relative (the later map wins, and
 * `work` may lie inside ROOT), the symbols are stripped, and GCC's per-file random names are seeded by
 * the file's name.
 */
async function compileProgram(arch, cxx, work, out) {
  const jxl = join(work, JPEG_XL.dir);
  const hwy = join(work, HIGHWAY.dir);
  const libjpeg = join(work, 'usr/include');
  const flags = [
    '-O2',
    '-std=c++17',
    '-DNDEBUG',
    `-DJPEGLI_VERSION="${JPEG_XL.version}"`,
    `-ffile-prefix-map=${ROOT}=.`,
    `-ffile-prefix-map=${work}=.`,
    ...['-I', jxl, '-I', join(jxl, 'lib/include'), '-I', hwy, '-I', join(libjpeg, TRIPLETS[arch]), '-I', libjpeg],
  ];
  const objects = [];
  const jobs = [];
  const add = (source, name) => {
    const object = join(work, `${name}.o`);
    objects.push(object);
    jobs.push([...flags, `-frandom-seed=${name}`, '-c', source, '-o', object]);
  };
  for (const f of JPEGLI_ENCODER) add(join(jxl, 'lib/jpegli', `${f}.cc`), `jpegli-${f}`);
  for (const f of HIGHWAY_RUNTIME) add(join(hwy, 'hwy', `${f}.cc`), `hwy-${f}`);
  add(SOURCE, 'encode');
  await compileAll(cxx, jobs);
  await compile(cxx, ['-s', '-o', out, ...objects]);
}

/** The program's name in the build cache: a hash of its inputs and of the compiler that makes it. */
function cacheName(arch, cxx) {
  const version = spawnSync(cxx, ['--version'], { encoding: 'utf8' });
  if (version.status !== 0) throw new JpegliError(`${cxx} does not run (${version.error?.message ?? version.stderr.trim()}): install it (scripts/apt-packages.txt)`);
  const hash = createHash('sha256').update(`${arch}\0${version.stdout}\0`);
  for (const source of SOURCES) hash.update(`${source.pinned(arch).sha256}\0`);
  for (const file of [SOURCE, SCRIPT]) hash.update(readFileSync(file)).update('\0');
  return `compressd-jpegli-${arch}-${hash.digest('hex').slice(0, 16)}`;
}

/**
 * Builds the program for `arch` into `dest` (its other files are left alone): dest/compressd-jpegli,
 * and the sources' licence files under dest/.licences/<name>/, which the caller keeps out of any tree
 * it ships. Returns the program's path and what it is compiled from: each source with its pinned file
 * ({ name, sha256, url }), purl and licence files ({ name: its path in that file, path }).
 */
export async function buildJpegli(arch, dest = sourceDir(arch)) {
  if (!TRIPLETS[arch]) throw new JpegliError(`no jpegli for ${arch}`);
  const cxx = cxxCompiler(arch);
  const cached = join(buildCacheDir(), cacheName(arch, cxx));
  const compiled = existsSync(cached);
  mkdirSync(dest, { recursive: true });
  const work = mkdtempSync(join(dest, '.build-'));
  try {
    const sources = [];
    for (const source of SOURCES) {
      const pinned = source.pinned(arch);
      let file;
      try {
        ({ file } = await fetchDeb(pinned));
        if (!source.dir) unpackDeb(file, work);
      } catch (err) {
        if (err instanceof DebError) throw new JpegliError(err.message);
        throw err;
      }
      if (source.dir) {
        // The licence files always (they are an output too); the whole tree only to compile it.
        const unpacked = spawnSync('tar', ['-xzf', file, '-C', work, ...(compiled ? source.licenceFiles : [])], { encoding: 'utf8' });
        if (unpacked.status !== 0) throw new JpegliError(`tar -xzf ${file} failed: ${unpacked.error?.message ?? unpacked.stderr.trim()}`);
      }
      const licences = join(dest, '.licences', source.name);
      rmSync(licences, { recursive: true, force: true });
      mkdirSync(licences, { recursive: true });
      const licenceFiles = source.licenceFiles.map((name) => {
        const path = join(licences, basename(name));
        copyFileSync(join(work, name), path);
        return { name, path };
      });
      const { name, version, licence, website, role } = source;
      sources.push({ name, version, licence, website, role, file: { name: basename(file), sha256: pinned.sha256, url: debUrl(pinned) }, purl: source.purl(arch), licenceFiles });
    }
    if (!compiled) {
      const linked = join(work, 'linked');
      await compileProgram(arch, cxx, work, linked);
      mkdirSync(dirname(cached), { recursive: true });
      copyFileSync(linked, `${cached}.${process.pid}`);
      renameSync(`${cached}.${process.pid}`, cached);
    }
    const program = join(dest, JPEGLI.program);
    const staged = join(work, JPEGLI.program);
    copyFileSync(cached, staged);
    chmodSync(staged, 0o755);
    renameSync(staged, program);
    return { program, sources };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === SCRIPT) {
  const { values } = parseArgs({ options: { arch: { type: 'string', default: process.arch } } });
  try {
    console.log(`jpegli: ${(await buildJpegli(values.arch)).program}`);
  } catch (err) {
    if (!(err instanceof JpegliError)) throw err;
    console.error(`jpegli: ${err.message}`);
    process.exit(1);
  }
}
