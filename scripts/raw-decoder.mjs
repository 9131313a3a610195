#!/usr/bin/env node
// The native RAW decoder (workers/decoders/raw.ts): workers/decoders/raw/decode.c compiled against
// Debian bookworm's LibRaw 0.20 for the target CPU, with LibRaw and what it links beyond a C++ runtime
// (GCC's OpenMP runtime, libjpeg-turbo, Little CMS) from Debian's .debs beside it (scripts/native-decoder.mjs).
// The directory holds:
//   compressd-raw-decode, libraw.so.20, libgomp.so.1, libjpeg.so.62, liblcms2.so.2
//
//   node scripts/raw-decoder.mjs [--arch x64|arm64]    builds dist/raw-decoder/<arch> (from source, npm test does it)
// build.mjs builds the same into the executable's runtime tree.
import { fileURLToPath } from 'node:url';
import { buildFromCommandLine } from './native-decoder.mjs';

/** The carried libraries, with what the notices and the SBOM say of them. */
const LIBRARIES = [
  { name: 'LibRaw', version: '0.20.2', licence: { expression: 'LGPL-2.1-only OR CDDL-1.0' }, website: 'https://www.libraw.org', debian: { package: 'libraw20', version: '0.20.2-2.1+deb12u2' }, lib: 'libraw.so.20' },
  {
    name: 'libgomp',
    version: '12.2.0',
    licence: { expression: 'GPL-3.0-or-later WITH GCC-exception-3.1' },
    website: 'https://gcc.gnu.org/onlinedocs/libgomp/',
    // The package's documentation directory is gcc-12-base's.
    debian: { package: 'libgomp1', version: '12.2.0-14+deb12u1', copyright: 'gcc-12-base' },
    lib: 'libgomp.so.1',
  },
  { name: 'libjpeg-turbo', version: '2.1.5', licence: { expression: 'IJG AND BSD-3-Clause AND Zlib' }, website: 'https://libjpeg-turbo.org', debian: { package: 'libjpeg62-turbo', version: '1:2.1.5-2' }, lib: 'libjpeg.so.62' },
  { name: 'lcms2', version: '2.14', licence: { id: 'MIT' }, website: 'https://www.littlecms.com', debian: { package: 'liblcms2-2', version: '2.14-2+deb12u1' }, lib: 'liblcms2.so.2' },
];

const ARCHES = {
  x64: {
    debs: {
      libraw20: { archive: 'debian-security', pool: 'pool/updates/main/libr/libraw/libraw20_0.20.2-2.1+deb12u2_amd64.deb', sha256: 'b9fdac90d46c33a05c11a9053925e5d06f42a6eac8e1d8f786cc795300fa559a' },
      'libraw-dev': { archive: 'debian-security', pool: 'pool/updates/main/libr/libraw/libraw-dev_0.20.2-2.1+deb12u2_amd64.deb', sha256: '7568da1e749832db9ed247c422307c289c77429a85a44e216f1e7af825411572' },
      libgomp1: { pool: 'pool/main/g/gcc-12/libgomp1_12.2.0-14+deb12u1_amd64.deb', sha256: '48fec46bda7f5b1638b9e959889bfbc20491247d402d120bb152687eb48143d7' },
      'gcc-12-base': { pool: 'pool/main/g/gcc-12/gcc-12-base_12.2.0-14+deb12u1_amd64.deb', sha256: '1896a2aacf4ad681ff5eacc24a5b0ca4d5d9c9b9c9e4b6de5197bc1e116ea619' },
      'libjpeg62-turbo': { pool: 'pool/main/libj/libjpeg-turbo/libjpeg62-turbo_2.1.5-2_amd64.deb', sha256: '95ec30140789a342add8f8371ed018924de51b539056522b66f207b25cba9cad' },
      'liblcms2-2': { pool: 'pool/main/l/lcms2/liblcms2-2_2.14-2+deb12u1_amd64.deb', sha256: '333efe13d165b8a98194d95e72fd10b502ebbee4dc2eb43fc2ab83e2b53e5f17' },
    },
  },
  arm64: {
    debs: {
      libraw20: { archive: 'debian-security', pool: 'pool/updates/main/libr/libraw/libraw20_0.20.2-2.1+deb12u2_arm64.deb', sha256: 'e0ccc9a8ba3708eb63f1a4be3f056a0a5929cf0e322f24b9a232f95d8b21042e' },
      'libraw-dev': { archive: 'debian-security', pool: 'pool/updates/main/libr/libraw/libraw-dev_0.20.2-2.1+deb12u2_arm64.deb', sha256: '06a172530e74c22555e420840b273969de41af7c6329de507fd54e8f50505134' },
      libgomp1: { pool: 'pool/main/g/gcc-12/libgomp1_12.2.0-14+deb12u1_arm64.deb', sha256: 'a48b70dd1a95585466b40bd94564bce56ebcb2566e49ccdb6441e996aaab2098' },
      'gcc-12-base': { pool: 'pool/main/g/gcc-12/gcc-12-base_12.2.0-14+deb12u1_arm64.deb', sha256: '674cf6cba6d432bd200c45fe866c1652c7a53523cc2e7a613e05bc4abf7b5440' },
      'libjpeg62-turbo': { pool: 'pool/main/libj/libjpeg-turbo/libjpeg62-turbo_2.1.5-2_arm64.deb', sha256: 'de66f186f3ff3c1d10c2e75ae056b019b3f7f091f51096a06cade48b2dea875b' },
      'liblcms2-2': { pool: 'pool/main/l/lcms2/liblcms2-2_2.14-2+deb12u1_arm64.deb', sha256: '753a2c7baa2d0a84b7c6ca6e80bbe37beadc2410939e5b34cbb4341234428a92' },
    },
  },
};

export const RAW_DECODER = {
  name: 'raw',
  title: 'the RAW decoder',
  program: 'compressd-raw-decode',
  libraries: LIBRARIES,
  link: 'libraw.so.20',
  arches: ARCHES,
};

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildFromCommandLine(RAW_DECODER);
