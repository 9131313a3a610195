import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, open, readFile, rm, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { workerData } from 'node:worker_threads';
import { JobError } from '../contract.ts';
import { workerLog } from '../shared/log.ts';
import { pixelsInPlace, type RawPixels } from './pixels.ts';
import { runFromShell } from './spawner.ts';

/**
 * What the native decoders share (heic-native.ts, raw-native.ts): a small program of ours built with
 * Debian's libraries (scripts/native-decoder.mjs), run once per picture, which reads the file on stdin
 * and writes a PAM image to stdout. A process of its own, so that a fault of a decoder on a hostile
 * file fails one job instead of ending the server, its memory bounded by the picture its file
 * declares (NATIVE_MEMORY), and the first process the kernel ends when memory runs out (rather than
 * the server with every job it holds); started from the thread's shell (spawner.ts),
 * with its files in a private temporary directory, or directly where that cannot be done. In the single executable the program lies in the
 * runtime tree's lib/<name> (the pool hands its threads the tree's path); from source in
 * dist/<name>-decoder/<cpu>.
 */
export interface NativeProgram {
  dir: string;
  program: string;
  /** What its log events begin with (`heic`, `raw`): operators' alerts may name them. */
  events: string;
  /** The library's version, as the program says it. */
  version: string;
  /** The bound on its memory (NATIVE_MEMORY; tests make it tighter). */
  memory: MemoryBound;
}

/** A program's memory: `baseBytes` and `bytesPerPixel` a pixel its file's header declares, beside the file itself. */
export interface MemoryBound {
  baseBytes: number;
  bytesPerPixel: number;
}

/**
 * The native decoders' bound, about twice what each needed at its least, measured with the server's
 * allocator (RLIMIT_DATA, the smallest under which it still decoded): a 10-bit AVIF 40 bytes a pixel
 * (libheif converts in 16-bit planes; 634 MB at 15.9 MP), the 12 MP DNGs 25-28 (LibRaw's 16-bit
 * working image), HEICs 12-17, and 44-74 MB for a 2 MP picture, mostly the libraries and their
 * threads' stacks. A 100 MP picture may take 8 GB; a file that declares 2 MP, 224 MB, whatever it
 * makes the decoder ask for.
 */
export const NATIVE_MEMORY: MemoryBound = { baseBytes: 64 * 1024 ** 2, bytesPerPixel: 80 };

/** The bound as the programs take it: BASE_BYTES BYTES_PER_PIXEL, after their own arguments. */
export const memoryArgs = ({ memory }: NativeProgram): string[] => [String(memory.baseBytes), String(memory.bytesPerPixel)];

/**
 * The job's failure when the program ended at its memory's bound (status 6, "memory BOUND"): a file
 * whose decoding needs more than a picture of the size it declares is damaged or hostile, and is not
 * tried again another way (libvips's AVIF, LibRaw in WebAssembly: both in the server's memory).
 */
export class PastMemoryBound extends JobError {}

export function pastMemoryBound({ code, err }: Ended): PastMemoryBound | undefined {
  const bound = code === 6 ? /^memory (\d+)$/m.exec(err) : null;
  if (!bound) return undefined;
  const mb = Math.round(Number(bound[1]) / 1024 ** 2).toLocaleString('en-US');
  return new PastMemoryBound('image.decode_failed', `Decoding this file needs more memory than a picture of the size it declares may take (${mb} MB): the file is damaged.`);
}

function defaultDir(name: string, fromSource: string): string {
  const tree = (workerData as { runtimeTree?: unknown } | undefined)?.runtimeTree;
  if (typeof tree === 'string') return join(tree, 'lib', name);
  return fileURLToPath(new URL(`../../dist/${fromSource}/${process.arch}`, import.meta.url));
}

/**
 * The program's environment: its libraries, and transparent huge pages from whichever malloc it runs
 * on (the server's jemalloc, inherited with LD_PRELOAD, reads MALLOC_CONF; glibc's reads
 * GLIBC_TUNABLES). Every page a process touches first costs a fault, on some virtual machines about
 * 12 µs a 4 KB page; a 12 MP decode touches some 100 MB, and huge pages cut IMG_2682.heic's decode
 * from 0.70 to 0.35 s on jemalloc (0.83 to 0.53 on glibc). The server itself does not take them
 * (docs/operating.md, "Huge pages"): what they cost it is memory kept; this process lives a second.
 */
export function programEnv(dir: string, env: NodeJS.ProcessEnv = process.env, add: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const append = (value: string | undefined, more: string, sep: string) => (value ? `${value}${sep}${more}` : more);
  return {
    ...env,
    ...add,
    LD_LIBRARY_PATH: append(env.LD_LIBRARY_PATH, dir, ':'),
    MALLOC_CONF: append(env.MALLOC_CONF, 'thp:always', ','),
    GLIBC_TUNABLES: append(env.GLIBC_TUNABLES, 'glibc.malloc.hugetlb=1', ':'),
  };
}

/** What the thread's shell sets for a program: its environment where it differs from the shell's (inherited from this process). */
export function shellEnv(dir: string, add?: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(programEnv(dir, process.env, add)).filter(([k, v]) => v !== undefined && v !== process.env[k])) as Record<string, string>;
}

/** How the program ended: exit code (or the signal that ended it), stdout when it was piped, stderr. */
export interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: Buffer;
  err: string;
}

/** Runs the program on `input`; its stdout is piped back, or written to `output`. */
export function runProgram(
  program: { dir: string; program: string },
  args: string[],
  io: { input?: Buffer; signal?: AbortSignal; output?: FileHandle; env?: NodeJS.ProcessEnv } = {},
): Promise<Ended> {
  const { input, signal, output, env } = io;
  return new Promise((resolve, reject) => {
    const child = spawn(join(program.dir, program.program), args, { env: programEnv(program.dir, process.env, env), signal, stdio: ['pipe', output?.fd ?? 'pipe', 'pipe'] });
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

/**
 * Runs the program from the thread's shell (spawner.ts) with its stdin, stdout and stderr in a
 * private temporary directory, and hands `use` its end and its stdout's path while they exist.
 * Undefined where that cannot be done (no room for the files, no shell), or where `use` says so:
 * the caller then runs the program directly.
 */
async function inShell<T>(
  program: { dir: string; program: string },
  args: string[],
  io: { input?: Buffer; signal?: AbortSignal; env?: NodeJS.ProcessEnv },
  use: (ended: Ended, stdout: string) => Promise<T | undefined>,
): Promise<T | undefined> {
  let dir: string;
  try {
    dir = await mkdtemp(join(tmpdir(), 'compressd-decode-'));
  } catch {
    return undefined;
  }
  try {
    const [stdin, stdout, stderr] = ['in', 'out', 'err'].map((f) => join(dir, f));
    try {
      await writeFile(stdin, io.input ?? Buffer.alloc(0), { mode: 0o600 });
    } catch {
      return undefined;
    }
    const end = await runFromShell({ program: join(program.dir, program.program), args, env: shellEnv(program.dir, io.env), stdin, stdout, stderr, signal: io.signal });
    io.signal?.throwIfAborted();
    if (end.lost) return undefined;
    const err = (await readFile(stderr, 'latin1').catch(() => '')).trim();
    return await use({ code: end.code, signal: end.signal, out: Buffer.alloc(0), err }, stdout);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Runs the program on `input` with its stdout kept whole: from the thread's shell (inShell), or directly where that cannot be done. */
export async function runForOutput(program: { dir: string; program: string }, args: string[], io: { input?: Buffer; signal?: AbortSignal } = {}): Promise<Ended> {
  return (await inShell(program, args, io, async (ended, stdout) => ({ ...ended, out: await readFile(stdout) }))) ?? runProgram(program, args, io);
}

/** The program in `dir` when it and its libraries load on this machine, else undefined (said in the log, with what decodes instead). */
export async function probeProgram(found: Omit<NativeProgram, 'version' | 'memory'>, instead: string): Promise<NativeProgram | undefined> {
  const said = await runForOutput(found, ['--version']).catch((err: Error) => ({ code: -1, signal: null, out: Buffer.alloc(0), err: err.message }));
  const version = said.out.toString().trim();
  if (said.code === 0 && /^\d+\.\d+\.\d+$/.test(version)) return { ...found, version, memory: NATIVE_MEMORY };
  workerLog.warn({ event: `${found.events}.native_unavailable`, dir: found.dir, reason: said.err || `exit ${said.code ?? said.signal}` }, instead);
  return undefined;
}

/**
 * One native program as a thread uses it: probed on first use (`get`), or pointed at another
 * directory or bound (`use`; tests point it at a broken one or a tight bound, and no argument goes
 * back to the default). From source it lies in dist/`fromSource`/<cpu> (a decoder's, dist/<name>-decoder).
 */
export function nativeDecoder(name: string, found: Omit<NativeProgram, 'version' | 'dir' | 'memory'>, instead: string, fromSource = `${name}-decoder`) {
  const probe = (dir = defaultDir(name, fromSource)) => probeProgram({ ...found, dir }, instead);
  let native: Promise<NativeProgram | undefined> | undefined;
  return {
    probe,
    get: (): Promise<NativeProgram | undefined> => (native ??= probe()),
    use: (dir?: string, memory?: MemoryBound): void => void (native = probe(dir).then((p) => p && { ...p, memory: memory ?? p.memory })),
  };
}

/** The longest PAM header the programs write (its fields are at most 10 digits; raw-native's comments under 1 KB). */
const PAM_HEADER_MAX = 1024;

/** Where the program's picture is read from: its temporary file, or what came through the pipe. */
export interface PamSource {
  size: number;
  /** Fills `into` with the bytes from `position` on. */
  read(into: Buffer, position: number): Promise<void>;
}

const INCOMPLETE = 'The native decoder returned no complete picture.';

export async function fileSource(file: FileHandle): Promise<PamSource> {
  const { size } = await file.stat();
  return {
    size,
    async read(into, position) {
      for (let at = 0; at < into.length; ) {
        const { bytesRead } = await file.read(into, at, into.length - at, position + at);
        if (bytesRead === 0) throw new JobError('image.decode_failed', INCOMPLETE);
        at += bytesRead;
      }
    },
  };
}

export const piped = (out: Buffer): PamSource => ({ size: out.length, read: async (into, position) => void out.copy(into, 0, position, position + into.length) });

/** A PAM (P7) image's header: its shape, its comment lines (without "# "), and where its samples start. */
export interface PamHeader {
  width: number;
  height: number;
  depth: number;
  comments: string[];
  start: number;
}

export async function readPamHeader(source: PamSource, depths: readonly number[]): Promise<PamHeader> {
  const first = Buffer.alloc(Math.min(PAM_HEADER_MAX, source.size));
  await source.read(first, 0);
  const end = first.indexOf('ENDHDR\n');
  const head = end < 0 ? '' : first.toString('latin1', 0, end);
  const field = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(head)?.[1]);
  const [width, height, depth] = [field('WIDTH'), field('HEIGHT'), field('DEPTH')];
  const start = end + 7;
  if (!head.startsWith('P7\n') || !depths.includes(depth) || source.size !== start + width * height * depth) throw new JobError('image.decode_failed', INCOMPLETE);
  const comments = head.split('\n').filter((l) => l.startsWith('# ')).map((l) => l.slice(2));
  return { width, height, depth, comments, start };
}

/** The PAM's 8-bit samples read straight into place (pixelsInPlace), the profile `icc` attached. */
export function readPamPixels(source: PamSource, header: PamHeader, icc?: Buffer): Promise<RawPixels> {
  const { width, height, depth, start } = header;
  return pixelsInPlace({ width, height, channels: depth as RawPixels['channels'], icc }, (into) => source.read(into, start));
}

const saidNoFile = new Set<string>();

/**
 * A new temporary file, already unlinked (nothing is left behind whatever ends the job), or
 * undefined where none can be made (the program's picture then comes through the pipe, slower).
 * Through a pipe Node reads a picture in 64 KB pieces: a 12 MP picture's 36 MB took 0.4 s to cross,
 * longer than its decode; from the file it is one read into its place.
 */
export async function temporaryFile(events: string): Promise<FileHandle | undefined> {
  const path = join(tmpdir(), `compressd-decode-${randomUUID()}.pam`);
  let file: FileHandle | undefined;
  try {
    file = await open(path, 'wx+', 0o600);
    await unlink(path);
    return file;
  } catch (err) {
    await file?.close();
    if (!saidNoFile.has(events)) workerLog.warn({ event: `${events}.no_temporary_file`, dir: tmpdir(), reason: (err as Error).message }, 'pictures come through a pipe: no temporary file can be made');
    saidNoFile.add(events);
    return undefined;
  }
}

/**
 * Runs the program with its picture going to a file: from the thread's shell (inShell), or, where
 * that cannot be done, directly, to a temporary file, or through the pipe where there is no file or
 * the file's filesystem is full (a small tmpfs, a large picture: the pipe needs no room).
 * `read` is given the picture when the program exits 0; otherwise the program's end is returned.
 */
export async function runToPicture<T>(
  program: NativeProgram,
  args: string[],
  io: { input: Buffer; signal?: AbortSignal; env?: NodeJS.ProcessEnv },
  read: (source: PamSource) => Promise<T>,
): Promise<{ picture: T } | { ended: Ended }> {
  const fromShell = await inShell(program, args, io, async (ended, stdout): Promise<{ picture: T } | { ended: Ended } | undefined> => {
    if (ended.code === 2 && ended.err.startsWith('output:')) return undefined;
    if (ended.code !== 0) return { ended };
    const file = await open(stdout, 'r');
    try {
      return { picture: await read(await fileSource(file)) };
    } finally {
      await file.close();
    }
  });
  if (fromShell) return fromShell;
  const file = await temporaryFile(program.events);
  try {
    let r = await runProgram(program, args, { ...io, output: file });
    if (file && r.code === 0) return { picture: await read(await fileSource(file)) };
    if (file && r.code === 2 && r.err.startsWith('output:')) {
      workerLog.warn({ event: `${program.events}.temporary_file_failed`, dir: tmpdir(), reason: r.err }, 'a picture did not fit in a temporary file and comes through a pipe');
      r = await runProgram(program, args, io);
    }
    if (r.code === 0) return { picture: await read(piped(r.out)) };
    return { ended: r };
  } finally {
    await file?.close();
  }
}
