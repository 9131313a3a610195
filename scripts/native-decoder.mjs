// What the native decoders have in common (scripts/heif-decoder.mjs, scripts/raw-decoder.mjs): a
// program of our own in workers/decoders/<name>/decode.c compiled for the target CPU against shared
// libraries from Debian's .debs (pinned by SHA256, scripts/debian-deb.mjs), with those libraries beside
// it in one directory. The workers run the program with LD_LIBRARY_PATH naming that directory.
//
// A decoder is described by:
//   name        the directory under workers/decoders with decode.c (and the dist/<name>-decoder/<cpu> it builds into)
//   title       how the notices and the build's log name it ("the HEIF decoder")
//   program     the program's file name
//   libraries   the carried libraries: { name, version, licence, website, debian: { package, version, copyright? }, lib }
//               (copyright: the package whose documentation directory holds the copyright file, when another's)
//   link        the library the program links by file name (the others come with it)
//   stubbed     sonames a stub of our own (workers/decoders/<name>/codec-stubs.c) stands in for
//   arches      per CPU: { debs: { <package>: { archive?, pool, sha256 } } }: the libraries', the headers' and the copyright files'
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cCompiler } from './c-compiler.mjs';
import { DebError, debUrl, fetchDeb, unpackDeb } from './debian-deb.mjs';

export class NativeDecoderError extends Error {}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TRIPLETS = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new NativeDecoderError(`${cmd} ${args.join(' ')} failed: ${r.error?.message ?? r.stderr.trim()}`);
}

/**
 * Builds `decoder` for `arch` into `dest` (replaced). Returns the program's path and the carried
 * libraries with their .debs and the paths of Debian's copyright files (under dest/.copyright, which
 * the caller keeps out of the tree).
 */
export async function buildNativeDecoder(decoder, arch, dest) {
  const target = decoder.arches[arch];
  const triplet = TRIPLETS[arch];
  if (!target || !triplet) throw new NativeDecoderError(`no ${decoder.title} for ${arch}`);
  const cc = cCompiler(arch);
  const sources = join(ROOT, 'workers/decoders', decoder.name);
  rmSync(dest, { recursive: true, force: true });
  mkdirSync(join(dest, '.copyright'), { recursive: true });
  const work = mkdtempSync(join(dirname(dest), `.${decoder.name}-`));
  try {
    const fetched = {};
    for (const [pkg, deb] of Object.entries(target.debs)) {
      fetched[pkg] = await fetchDeb(deb);
      unpackDeb(fetched[pkg].file, work);
    }
    const libraries = decoder.libraries.map((l) => {
      copyFileSync(join(work, 'usr/lib', triplet, l.lib), join(dest, l.lib));
      const copyright = join(dest, '.copyright', l.debian.package);
      copyFileSync(join(work, 'usr/share/doc', l.debian.copyright ?? l.debian.package, 'copyright'), copyright);
      const deb = target.debs[l.debian.package];
      return { ...l, deb: { name: fetched[l.debian.package].name, sha256: deb.sha256, url: debUrl(deb) }, copyright };
    });
    for (const soname of decoder.stubbed ?? []) run(cc, ['-O2', '-shared', '-fPIC', `-Wl,-soname,${soname}`, '-o', join(dest, soname), join(sources, 'codec-stubs.c')]);
    const program = join(dest, decoder.program);
    // Linked by file name against the carried library, found at run time through LD_LIBRARY_PATH;
    // -rdynamic puts the program's allocation functions (native-memory.h) before the C library's.
    run(cc, ['-O2', '-rdynamic', '-Wall', '-Wextra', '-Werror', '-I', join(work, 'usr/include', triplet), '-I', join(work, 'usr/include'), '-o', program, join(sources, 'decode.c'), join(dest, decoder.link), '-Wl,--allow-shlib-undefined']);
    for (const f of [...decoder.libraries.map((l) => l.lib), ...(decoder.stubbed ?? [])]) chmodSync(join(dest, f), 0o644);
    chmodSync(program, 0o755);
    return { program, libraries };
  } catch (err) {
    if (err instanceof DebError) throw new NativeDecoderError(err.message);
    throw err;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Where the workers find a decoder from source. */
export const sourceDir = (decoder, arch) => join(ROOT, 'dist', `${decoder.name}-decoder`, arch);

/** `node scripts/<name>-decoder.mjs [--arch x64|arm64]`: builds the decoder where the workers find it from source. */
export async function buildFromCommandLine(decoder) {
  const at = process.argv.indexOf('--arch');
  const arch = at < 0 ? 'x64' : process.argv[at + 1];
  try {
    const { program } = await buildNativeDecoder(decoder, arch, sourceDir(decoder, arch));
    console.log(`${decoder.name}-decoder: ${program}`);
  } catch (err) {
    if (!(err instanceof NativeDecoderError)) throw err;
    console.error(`${decoder.name}-decoder: ${err.message}`);
    process.exit(1);
  }
}
