// The C and C++ compilers for a target CPU: this machine's own gcc and g++ for its CPU, Debian's cross
// compilers for the other (gcc-aarch64-linux-gnu and g++-aarch64-linux-gnu, or their x86-64 counterparts;
// scripts/apt-packages.txt). The native helpers the executable carries are built with them
// (scripts/heif-decoder.mjs, scripts/init-program.mjs; jpegli's C++, scripts/jpegli.mjs).
const TRIPLETS = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

function compiler(arch, own, language) {
  if (!TRIPLETS[arch]) throw new Error(`no ${language} compiler for ${arch}`);
  return process.arch === arch ? own : `${TRIPLETS[arch]}-${own}`;
}

export const cCompiler = (arch) => compiler(arch, 'gcc', 'C');
export const cxxCompiler = (arch) => compiler(arch, 'g++', 'C++');
