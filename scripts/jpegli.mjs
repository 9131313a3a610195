#!/usr/bin/env node
// jpegli, the JPEG encoder of the JPEG XL project, for the JPEG search (workers/image/jpegli.ts) and the
// quality benchmark's peer: workers/image/jpegli/encode.cc compiled with jpegli from Debian's sources
// (jpeg-xl 0.11.2 and Highway 1.2.0, the SIMD library it is written on, as Debian trixie ships them;
// bookworm's libjxl 0.7 predates jpegli and no Debian package carries it as a library of its own). The
// original tarballs are fetched from Debian's archive, checked against the SHA256 pinned here
// (scripts/debian-deb.mjs) and kept in the build cache; only jpegli's encoder and Highway's runtime
// dispatch are compiled, statically into the one program, about 40 s on 2 cores (once: again only when
// encode.cc or this script changes).
//
//   node scripts/jpegli.mjs    builds dist/jpegli/<arch>/compressd-jpegli (npm test's setup does it)
//
// Needs g++ (scripts/apt-packages.txt). Without the program the search compares mozjpeg's table sets alone.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fetchDeb } from './debian-deb.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const JPEG_XL = { version: '0.11.2', dir: 'libjxl-0.11.2', pool: 'pool/main/j/jpeg-xl/jpeg-xl_0.11.2.orig.tar.gz', sha256: 'ab38928f7f6248e2a98cc184956021acb927b16a0dee71b4d260dc040a4320ea' };
const HIGHWAY = { dir: 'highway-1.2.0', pool: 'pool/main/h/highway/highway_1.2.0.orig.tar.gz', sha256: '7e0be78b8318e8bdbf6fa545d2ecb4c90f947df03f7aadc42c1967f019e63343' };
const JPEGLI_ENCODER = ['encode', 'encode_finish', 'encode_streaming', 'adaptive_quantization', 'bit_writer', 'bitstream', 'color_transform', 'common', 'downsample', 'entropy_coding', 'error', 'huffman', 'input', 'memory_manager', 'quant', 'simd', 'destination_manager'];
const HIGHWAY_RUNTIME = ['targets', 'abort', 'per_target', 'print', 'aligned_allocator'];

/** Where the workers (workers/image/jpegli.ts) and the benchmark find the program from source. */
const jpegliProgram = () => join(ROOT, 'dist', 'jpegli', process.arch, 'compressd-jpegli');
const SOURCE = join(ROOT, 'workers/image/jpegli/encode.cc');

function compile(args) {
  return new Promise((resolve, reject) => {
    const child = spawn('g++', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`g++ ${args.join(' ')} failed: ${err.trim()}`))));
  });
}

/** Runs the compilations two at a time (the machine's cores; each takes a few seconds). */
async function compileAll(jobs) {
  const queue = [...jobs];
  const lane = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) await compile(job);
  };
  await Promise.all([lane(), lane()]);
}

/** Builds the program unless it is newer than its source and this script. */
export async function buildJpegli() {
  const program = jpegliProgram();
  const built = statSync(program, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  if ([SOURCE, fileURLToPath(import.meta.url)].every((f) => statSync(f).mtimeMs < built)) return program;
  mkdirSync(join(ROOT, 'dist'), { recursive: true });
  const work = mkdtempSync(join(ROOT, 'dist', '.jpegli-'));
  try {
    for (const source of [JPEG_XL, HIGHWAY]) {
      const { file } = await fetchDeb(source);
      const unpacked = spawnSync('tar', ['-xzf', file, '-C', work], { encoding: 'utf8' });
      if (unpacked.status !== 0) throw new Error(`tar -xzf ${file} failed: ${unpacked.stderr.trim()}`);
    }
    const jxl = join(work, JPEG_XL.dir);
    const hwy = join(work, HIGHWAY.dir);
    const flags = ['-O2', '-std=c++17', '-DNDEBUG', `-DJPEGLI_VERSION="${JPEG_XL.version}"`, '-I', jxl, '-I', join(jxl, 'lib/include'), '-I', hwy];
    const objects = [];
    const jobs = [];
    const add = (source, name) => {
      const object = join(work, `${name}.o`);
      objects.push(object);
      jobs.push([...flags, '-c', source, '-o', object]);
    };
    for (const f of JPEGLI_ENCODER) add(join(jxl, 'lib/jpegli', `${f}.cc`), `jpegli-${f}`);
    for (const f of HIGHWAY_RUNTIME) add(join(hwy, 'hwy', `${f}.cc`), `hwy-${f}`);
    add(SOURCE, 'encode');
    await compileAll(jobs);
    const linked = join(work, 'compressd-jpegli');
    await compile(['-o', linked, ...objects]);
    mkdirSync(dirname(program), { recursive: true });
    renameSync(linked, program);
    return program;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(`jpegli: ${await buildJpegli()}`);
  } catch (err) {
    console.error(`jpegli: ${err.message}`);
    process.exit(1);
  }
}
