import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { workerData } from 'node:worker_threads';
import { JobError } from '../contract.ts';
import { checkPixelBudget, imageError } from '../image/decode-policy.ts';
import { workerLog } from '../shared/log.ts';
import { spareCore } from '../shared/spare-core.ts';
import type { RawPixels } from './pixels.ts';
import type { DecodeLimits } from './types.ts';

/**
 * HEIF through Debian's libheif and libde265, natively: a small program (heif/decode.c, built with its
 * libraries by scripts/heif-decoder.mjs) run once per picture, which reads the file on stdin and writes
 * a PAM image to stdout. A process of its own, so that a fault of the HEVC decoder on a hostile file
 * fails one job instead of ending the server. In the single executable it lies in the runtime tree's
 * lib/heif (the pool hands its threads the tree's path); from source in dist/heif-decoder/<cpu>.
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

/** Runs the program; resolves with its exit code (or the signal that ended it), stdout and stderr. */
function run(dir: string, args: string[], input: Buffer | undefined, signal?: AbortSignal): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: Buffer; err: string }> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, dir].filter(Boolean).join(':') };
    const child = spawn(join(dir, PROGRAM), args, { env, signal, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (err += d));
    // The program stops reading when it refuses a file; the rest of stdin is not wanted then.
    child.stdin.on('error', () => {});
    child.on('error', reject);
    child.on('close', (code, sig) => resolve({ code, signal: sig, out: Buffer.concat(out), err: err.trim() }));
    child.stdin.end(input);
  });
}

/** The native decoder when its program and libraries load on this machine, else undefined (said in the log; a thread asks once). */
export async function probeNativeHeif(dir = defaultDir()): Promise<NativeHeif | undefined> {
  const said = await run(dir, ['--version'], undefined).catch((err: Error) => ({ code: -1, signal: null, out: Buffer.alloc(0), err: err.message }));
  const version = said.out.toString().trim();
  if (said.code === 0 && /^\d+\.\d+\.\d+$/.test(version)) return { dir, version };
  workerLog.warn({ event: 'heic.native_unavailable', dir, reason: said.err || `exit ${said.code ?? said.signal}` }, 'HEIC decodes through WebAssembly: the native libheif does not load here');
  return undefined;
}

/** A PAM (P7) image of 3 or 4 samples per pixel, 8 bits each, as the program writes it. */
function parsePam(b: Buffer): RawPixels {
  const end = b.indexOf('ENDHDR\n');
  const head = end < 0 ? '' : b.toString('latin1', 0, end);
  const field = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(head)?.[1]);
  const [width, height, depth] = [field('WIDTH'), field('HEIGHT'), field('DEPTH')];
  const data = b.subarray(end + 7);
  if (!head.startsWith('P7\n') || (depth !== 3 && depth !== 4) || data.length !== width * height * depth) {
    throw new JobError('image.decode_failed', 'The native HEIF decoder returned no complete picture.');
  }
  return { data, width, height, channels: depth };
}

/**
 * Decodes the primary image to 8-bit RGB(A). Grid pictures (a phone's 512-pixel tiles) are decoded on
 * every core while no other job runs, on one otherwise. The pixel budget is checked again on libheif's
 * own reading of the header, before it decodes anything. A file cut short fails as `image.truncated`
 * (libheif-js decoded the tiles it had and left the others grey).
 */
export async function decodeHeifNatively(heif: NativeHeif, bytes: Buffer, limits: DecodeLimits): Promise<RawPixels> {
  const threads = spareCore() ? availableParallelism() : 1;
  const r = await run(heif.dir, [String(limits.maxPixels), String(threads)], bytes, limits.signal);
  if (r.code === 0) return parsePam(r.out);
  const refused = /^pixels (\d+) (\d+)$/.exec(r.err);
  if (r.code === 3 && refused) checkPixelBudget(Number(refused[1]), Number(refused[2]), limits.maxPixels);
  if (r.code === 1) throw imageError(new Error(`libheif: ${r.err.replace(/^\w+: /, '')}`));
  throw new JobError('image.decode_failed', `libheif failed on this file (${r.signal ? `signal ${r.signal}` : `exit ${r.code}: ${r.err}`}).`);
}
