// The C compiler for a target CPU: this machine's own gcc for its CPU, Debian's cross compiler for the
// other (gcc-aarch64-linux-gnu or gcc-x86-64-linux-gnu; scripts/apt-packages.txt). The native helpers
// the executable carries are built with it (scripts/heif-decoder.mjs, scripts/init-program.mjs).
const CROSS = { x64: 'x86_64-linux-gnu-gcc', arm64: 'aarch64-linux-gnu-gcc' };

export function cCompiler(arch) {
  if (!CROSS[arch]) throw new Error(`no C compiler for ${arch}`);
  return process.arch === arch ? 'gcc' : CROSS[arch];
}
