#!/usr/bin/env node
// The native HEIF decoder (workers/decoders/heic.ts, avif.ts): workers/decoders/heif/decode.c compiled
// against Debian bookworm's libheif 1.15, libde265 1.0.11 (HEVC) and dav1d 1.0.0 (AV1) for the target CPU,
// with those shared libraries from Debian's .debs (pinned by SHA256, scripts/debian-deb.mjs) beside it.
// libheif also links x265 and libaom, which this decoder never calls (it decodes, and AV1 through dav1d):
// in their place it gets workers/decoders/heif/codec-stubs.c under their SONAMEs (21 MB less per CPU,
// and no GPL x265). The directory holds:
//   compressd-heif-decode, libheif.so.1, libde265.so.0, libdav1d.so.6, libx265.so.199, libaom.so.3
// and heic-native.ts runs the program with LD_LIBRARY_PATH naming its own directory (scripts/native-decoder.mjs).
//
//   node scripts/heif-decoder.mjs [--arch x64|arm64]    builds dist/heif-decoder/<arch> (from source, npm test does it)
// build.mjs builds the same into the executable's runtime tree. Needs gcc (and gcc-aarch64-linux-gnu for
// arm64 on an x64 machine), dpkg-deb, and Debian's archive on the first run (the .debs stay in the build cache).
import { fileURLToPath } from 'node:url';
import { buildFromCommandLine } from './native-decoder.mjs';

const LGPL3 = { id: 'LGPL-3.0-or-later' };
const BSD2 = { id: 'BSD-2-Clause' };

/** The carried libraries, with what the notices and the SBOM say of them. */
const LIBRARIES = [
  { name: 'libheif', version: '1.15.1', licence: LGPL3, website: 'https://github.com/strukturag/libheif', debian: { package: 'libheif1', version: '1.15.1-1+deb12u1' }, lib: 'libheif.so.1' },
  { name: 'libde265', version: '1.0.11', licence: LGPL3, website: 'https://github.com/strukturag/libde265', debian: { package: 'libde265-0', version: '1.0.11-1+deb12u3' }, lib: 'libde265.so.0' },
  { name: 'dav1d', version: '1.0.0', licence: BSD2, website: 'https://code.videolan.org/videolan/dav1d', debian: { package: 'libdav1d6', version: '1.0.0-2+deb12u1' }, lib: 'libdav1d.so.6' },
];
const ARCHES = {
  x64: {
    debs: {
      libheif1: { pool: 'pool/main/libh/libheif/libheif1_1.15.1-1+deb12u1_amd64.deb', sha256: '13a0a3a6e22ddf5eb891b7c7873ace79f13f2c96473576e5f7da2ae3228a2113' },
      'libde265-0': { archive: 'debian-security', pool: 'pool/updates/main/libd/libde265/libde265-0_1.0.11-1+deb12u3_amd64.deb', sha256: '72c3edb400c3494974181e9ca75a11d859c715c9685c38fb251783c7c8841afe' },
      libdav1d6: { pool: 'pool/main/d/dav1d/libdav1d6_1.0.0-2+deb12u1_amd64.deb', sha256: '197f08108242177aeae4c04aac11825c39b7d18598191ab769f910687ccb387f' },
      'libheif-dev': { pool: 'pool/main/libh/libheif/libheif-dev_1.15.1-1+deb12u1_amd64.deb', sha256: '0718605184afb1573b06861f5e517fa4ecb9d2c42bdf9dd1ea857b95476ee8c9' },
    },
  },
  arm64: {
    debs: {
      libheif1: { pool: 'pool/main/libh/libheif/libheif1_1.15.1-1+deb12u1_arm64.deb', sha256: '92dddfa77e4281997af385cb2bc9e8ffa13b0876f889a3d6d6ad177ac968a2bc' },
      'libde265-0': { archive: 'debian-security', pool: 'pool/updates/main/libd/libde265/libde265-0_1.0.11-1+deb12u3_arm64.deb', sha256: '8b49a68b62db516ed18f5990e192e603706f51d994ceb7bfe30080a6871e0cab' },
      libdav1d6: { pool: 'pool/main/d/dav1d/libdav1d6_1.0.0-2+deb12u1_arm64.deb', sha256: '579c820b80ce3491143c411a342b3a222ce3a381c7c052e8c8501de5bace954f' },
      'libheif-dev': { pool: 'pool/main/libh/libheif/libheif-dev_1.15.1-1+deb12u1_arm64.deb', sha256: '643ceb4823c3b0efef3641d020f90f47e53b3ce2cd67afcb95f78f3f860ac9b5' },
    },
  },
};

export const HEIF_DECODER = {
  name: 'heif',
  title: 'the HEIF decoder',
  program: 'compressd-heif-decode',
  libraries: LIBRARIES,
  link: 'libheif.so.1',
  // libheif links x265 and libaom, which this decoder never calls (it decodes, and AV1 through dav1d).
  stubbed: ['libx265.so.199', 'libaom.so.3'],
  arches: ARCHES,
};

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildFromCommandLine(HEIF_DECODER);
