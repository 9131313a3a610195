import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { workerData } from 'node:worker_threads';
import { JobError } from '../contract.ts';
import { checkPixelBudget, imageError } from '../image/decode-policy.ts';
import { workerLog } from '../shared/log.ts';
import { spareCore } from '../shared/spare-core.ts';
import { pixelsInPlace, type RawPixels } from './pixels.ts';
import type { DecodeLimits } from './types.ts';

/**
 * HEIF through Debian's libheif, natively, with libde265 for HEIC (HEVC) and dav1d for AVIF (AV1): a
 * small program (heif/decode.c, built with its libraries by scripts/heif-decoder.mjs) run once per
 * picture, which reads the file on stdin and writes a PAM image to stdout. A process of its own, so
 * that a fault of a video decoder on a hostile file fails one job instead of ending the server. In
 * the single executable it lies in the runtime tree's lib/heif (the pool hands its threads the
 * tree's path); from source in dist/heif-decoder/<cpu>.
 */
const PROGRAM = 'compressd-heif-decode';
const TREE_DIR = 'lib/heif';

function defaultDir(): string {
  const tree = (workerData as { runtimeTree?: unknown } | undefined)?.runtimeTree;
  if (typeof tree === 'string') return join(tree, TREE_DIR);
  return fileURLToPath(new URL(`../../dist/heif-decoder/${process.arch}`, import.meta.url));
}

export interface NativeHeif {
  dir: string;
  /** libheif's version, as the program says it. */
  version: string;
}

/**
 * The program's environment: its libraries, and transparent huge pages from whichever malloc it runs
 * on (the server's jemalloc, inherited with LD_PRELOAD, reads MALLOC_CONF; glibc's reads
 * GLIBC_TUNABLES). Every page a process touches first costs a fault, on some virtual machines about
 * 12 µs a 4 KB page; a 12 MP decode touches some 100 MB, and huge pages cut IMG_2682.heic's decode
 * from 0.70 to 0.35 s on jemalloc (0.83 to 0.53 on glibc). The server itself does not take them
 * (docs/operating.md, "Huge pages"): what they cost it is memory kept; this process lives a second.
 */
export function programEnv(dir: string, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const append = (value: string | undefined, add: string, sep: string) => (value ? `${value}${sep}${add}` : add);
  return {
    ...env,
    LD_LIBRARY_PATH: append(env.LD_LIBRARY_PATH, dir, ':'),
    MALLOC_CONF: append(env.MALLOC_CONF, 'thp:always', ','),
    GLIBC_TUNABLES: append(env.GLIBC_TUNABLES, 'glibc.malloc.hugetlb=1', ':'),
  };
}

/** How the program ended: exit code (or the signal that ended it), stdout when it was piped, stderr. */
interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: Buffer;
  err: string;
}

/** Runs the program on `input`; its stdout is piped back, or written to `output`. */
function run(dir: string, args: string[], io: { input?: Buffer; signal?: AbortSignal; output?: FileHandle } = {}): Promise<Ended> {
  const { input, signal, output } = io;
  return new Promise((resolve, reject) => {
    const child = spawn(join(dir, PROGRAM), args, { env: programEnv(dir), signal, stdio: ['pipe', output?.fd ?? 'pipe', 'pipe'] });
    // Piped as asked: stdin and stderr always, stdout unless it goes to the file.
    const [stdin, stdout, stderr] = [child.stdin!, child.stdout, child.stderr!];
    const out: Buffer[] = [];
    let err = '';
    stdout?.on('data', (d: Buffer) => out.push(d));
    stderr.on('data', (d: Buffer) => (err += d));
    // The program stops reading when it refuses a file; the rest of stdin is not wanted then.
    stdin.on('error', () => {});
    child.on('error', reject);
    child.on('close', (code, sig) => resolve({ code, signal: sig, out: Buffer.concat(out), err: err.trim() }));
    stdin.end(input);
  });
}

let native: Promise<NativeHeif | undefined> | undefined;

/** This thread's native decoder, probed on first use: undefined where it does not load (HEIC then decodes through WebAssembly, AVIF through libvips). */
export function nativeHeif(): Promise<NativeHeif | undefined> {
  native ??= probeNativeHeif();
  return native;
}

/** Decode with the native decoder in `dir` when it loads there, else without it (tests point it at a broken one). */
export function useNativeHeif(dir?: string): void {
  native = probeNativeHeif(dir);
}

/** The native decoder when its program and libraries load on this machine, else undefined (said in the log; a thread asks once). */
export async function probeNativeHeif(dir = defaultDir()): Promise<NativeHeif | undefined> {
  const said = await run(dir, ['--version']).catch((err: Error) => ({ code: -1, signal: null, out: Buffer.alloc(0), err: err.message }));
  const version = said.out.toString().trim();
  if (said.code === 0 && /^\d+\.\d+\.\d+$/.test(version)) return { dir, version };
  workerLog.warn({ event: 'heic.native_unavailable', dir, reason: said.err || `exit ${said.code ?? said.signal}` }, 'HEIC decodes through WebAssembly and AVIF through libvips: the native libheif does not load here');
  return undefined;
}

/** The longest PAM header the program writes (its fields are at most 10 digits). */
const PAM_HEADER_MAX = 128;

/** Where the program's picture is read from: its temporary file, or what came through the pipe. */
interface PamSource {
  size: number;
  /** Fills `into` with the bytes from `position` on. */
  read(into: Buffer, position: number): Promise<void>;
}

async function fileSource(file: FileHandle): Promise<PamSource> {
  const { size } = await file.stat();
  return {
    size,
    async read(into, position) {
      for (let at = 0; at < into.length; ) {
        const { bytesRead } = await file.read(into, at, into.length - at, position + at);
        if (bytesRead === 0) throw new JobError('image.decode_failed', 'The native HEIF decoder returned no complete picture.');
        at += bytesRead;
      }
    },
  };
}

const piped = (out: Buffer): PamSource => ({ size: out.length, read: async (into, position) => void out.copy(into, 0, position, position + into.length) });

/**
 * The program's PAM (P7) image, 3 or 4 samples per pixel, 8 bits each, read straight into place
 * (pixelsInPlace), the profile `icc` attached.
 */
async function readPam(source: PamSource, icc: Buffer | undefined): Promise<RawPixels> {
  const first = Buffer.alloc(Math.min(PAM_HEADER_MAX, source.size));
  await source.read(first, 0);
  const end = first.indexOf('ENDHDR\n');
  const head = end < 0 ? '' : first.toString('latin1', 0, end);
  const field = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(head)?.[1]);
  const [width, height, depth] = [field('WIDTH'), field('HEIGHT'), field('DEPTH')];
  const start = end + 7;
  if (!head.startsWith('P7\n') || (depth !== 3 && depth !== 4) || source.size !== start + width * height * depth) {
    throw new JobError('image.decode_failed', 'The native HEIF decoder returned no complete picture.');
  }
  return pixelsInPlace({ width, height, channels: depth, icc }, (into) => source.read(into, start));
}

let saidNoFile = false;

/**
 * A new temporary file, already unlinked (nothing is left behind whatever ends the job), or
 * undefined where none can be made (the program's picture then comes through the pipe, slower).
 */
async function temporaryFile(): Promise<FileHandle | undefined> {
  const path = join(tmpdir(), `compressd-heif-${randomUUID()}.pam`);
  let file: FileHandle | undefined;
  try {
    file = await open(path, 'wx+', 0o600);
    await unlink(path);
    return file;
  } catch (err) {
    await file?.close();
    if (!saidNoFile) workerLog.warn({ event: 'heic.no_temporary_file', dir: tmpdir(), reason: (err as Error).message }, 'HEIF pictures come through a pipe: no temporary file can be made');
    saidNoFile = true;
    return undefined;
  }
}

/**
 * Decodes the primary image to 8-bit RGB(A), in the profile `icc` (the container's). Grid pictures
 * (a phone's 512-pixel tiles) are decoded on every core while no other job runs, on one otherwise.
 * The pixel budget is checked again on libheif's own reading of the header, before it decodes
 * anything. A file cut short fails as `image.truncated` (libheif-js decoded the tiles it had and
 * left the others grey).
 *
 * The picture comes back through a temporary file: through a pipe, Node reads it in 64 KB pieces,
 * and a 12 MP picture's 36 MB took 0.4 s to cross, longer than the decode (0.35 s); from the file it
 * is one read into its place.
 */
export async function decodeHeifNatively(heif: NativeHeif, bytes: Buffer, limits: DecodeLimits, icc?: Buffer): Promise<RawPixels> {
  const threads = spareCore() ? availableParallelism() : 1;
  const decode = (output?: FileHandle) => run(heif.dir, [String(limits.maxPixels), String(threads)], { input: bytes, signal: limits.signal, output });
  const file = await temporaryFile();
  try {
    let r = await decode(file);
    if (file && r.code === 0) return await readPam(await fileSource(file), icc);
    if (file && r.code === 2 && r.err.startsWith('output:')) {
      // The file's filesystem is full (a small tmpfs, a large picture): the pipe needs no room.
      workerLog.warn({ event: 'heic.temporary_file_failed', dir: tmpdir(), reason: r.err }, 'a HEIF picture did not fit in a temporary file and comes through a pipe');
      r = await decode();
    }
    if (r.code === 0) return await readPam(piped(r.out), icc);
    const refused = /^pixels (\d+) (\d+)$/.exec(r.err);
    if (r.code === 3 && refused) checkPixelBudget(Number(refused[1]), Number(refused[2]), limits.maxPixels);
    if (r.code === 1) throw imageError(new Error(`libheif: ${r.err.replace(/^\w+: /, '')}`));
    throw new JobError('image.decode_failed', `libheif failed on this file (${r.signal ? `signal ${r.signal}` : `exit ${r.code}: ${r.err}`}).`);
  } finally {
    await file?.close();
  }
}
