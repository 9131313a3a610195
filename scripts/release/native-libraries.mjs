// The native and WebAssembly libraries inside the npm packages an executable carries: what the
// SBOM lists beside the npm packages and what THIRD_PARTY_NOTICES.txt names with its licence.
// Versions come from the packages themselves (sharp-libvips' versions.json, the crate paths
// compiled into @napi-rs/image); where a package records none, a fact here is checked against
// the package's files, so a dependency update that changes it fails the release until this is updated.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export class NativeLibraryError extends Error {}

const LGPL3 = { id: 'LGPL-3.0-or-later' };

/**
 * sharp-libvips' versions.json keys → library and licence, as its README's licensing table states
 * them (the LGPL ones "used under the terms of the LGPLv3 via the any-later-version clause").
 */
const LIBVIPS_PARTS = {
  aom: { name: 'aom', licence: { id: 'BSD-2-Clause' }, note: 'plus the Alliance for Open Media Patent License 1.0' },
  archive: { name: 'libarchive', licence: { id: 'BSD-2-Clause' } },
  cairo: { name: 'cairo', licence: { id: 'MPL-1.1' } },
  cgif: { name: 'cgif', licence: { id: 'MIT' } },
  exif: { name: 'libexif', licence: LGPL3 },
  expat: { name: 'expat', licence: { id: 'MIT' } },
  ffi: { name: 'libffi', licence: { id: 'MIT' } },
  fontconfig: { name: 'fontconfig', licence: { name: 'fontconfig License (BSD-like)', url: 'https://gitlab.freedesktop.org/fontconfig/fontconfig/blob/main/COPYING' } },
  freetype: { name: 'freetype', licence: { id: 'FTL' } },
  fribidi: { name: 'fribidi', licence: LGPL3 },
  glib: { name: 'glib', licence: LGPL3 },
  harfbuzz: { name: 'harfbuzz', licence: { id: 'MIT' } },
  heif: { name: 'libheif', licence: LGPL3 },
  highway: { name: 'highway', licence: { id: 'BSD-3-Clause' } },
  imagequant: { name: 'libimagequant', licence: { id: 'BSD-2-Clause' }, note: "lovell/libimagequant, the BSD-licensed 2.x line" },
  lcms: { name: 'lcms2', licence: { id: 'MIT' } },
  mozjpeg: { name: 'mozjpeg', licence: { expression: 'IJG AND BSD-3-Clause AND Zlib' } },
  pango: { name: 'pango', licence: LGPL3 },
  pixman: { name: 'pixman', licence: { id: 'MIT' } },
  png: { name: 'libpng', licence: { id: 'libpng-2.0' } },
  'proxy-libintl': { name: 'proxy-libintl', licence: LGPL3 },
  rsvg: { name: 'librsvg', licence: LGPL3 },
  tiff: { name: 'libtiff', licence: { id: 'libtiff' } },
  uhdr: { name: 'libultrahdr', licence: { id: 'MIT' } },
  vips: { name: 'libvips', licence: LGPL3 },
  webp: { name: 'libwebp', licence: { id: 'BSD-3-Clause' } },
  xml2: { name: 'libxml2', licence: { id: 'MIT' } },
  'zlib-ng': { name: 'zlib-ng', licence: { id: 'Zlib' } },
};

/** WebAssembly builds whose packages record no library version: checked against the .wasm's strings. */
const WASM_LIBRARIES = {
  'libheif-js': {
    file: 'libheif-wasm/libheif.wasm',
    libraries: [
      { name: 'libheif', version: '1.23.2', licence: LGPL3 },
      { name: 'libde265', version: '1.0.15', licence: LGPL3, note: 'HEVC decoder, compiled into the libheif WebAssembly module' },
    ],
  },
  'libraw-wasm': {
    file: 'dist/libraw.wasm',
    libraries: [{ name: 'LibRaw', licence: { expression: 'LGPL-2.1-only OR CDDL-1.0' }, note: 'the package records no LibRaw version' }],
  },
  '@hyzyla/pdfium': {
    file: 'dist/pdfium.wasm',
    libraries: [{ name: 'PDFium', licence: { expression: 'BSD-3-Clause AND Apache-2.0' }, note: 'the package records no PDFium revision' }],
  },
};

/** Licences of the Rust crates compiled into @napi-rs/image that matter to a reader of the notices. */
const CRATE_LICENCES = {
  oxipng: { id: 'MIT' },
  image: { expression: 'MIT OR Apache-2.0' },
  png: { expression: 'MIT OR Apache-2.0' },
  gif: { expression: 'MIT OR Apache-2.0' },
  libdeflater: { id: 'Apache-2.0' },
  'zlib-rs': { id: 'Zlib' },
  resvg: { expression: 'Apache-2.0 OR MIT' },
  usvg: { expression: 'Apache-2.0 OR MIT' },
  'tiny-skia': { id: 'BSD-3-Clause' },
  rayon: { expression: 'MIT OR Apache-2.0' },
  napi: { id: 'MIT' },
};

const purlOf = (name, version) => `pkg:generic/${encodeURIComponent(name)}${version ? `@${encodeURIComponent(version)}` : ''}`;

/**
 * Native libraries of one executable, from its contents.json packages (`source` is the package
 * directory on this machine). Each: name, version (when known), licence, purl, carriedBy.
 */
export function nativeLibraries(root, packages) {
  const found = [];
  for (const pkg of packages) {
    const dir = join(root, pkg.source);
    const carriedBy = `${pkg.name}@${pkg.version}`;
    if (/^@img\/sharp-libvips-linux-/.test(pkg.name)) {
      const versions = JSON.parse(readFileSync(join(dir, 'versions.json'), 'utf8'));
      for (const [key, version] of Object.entries(versions)) {
        const part = LIBVIPS_PARTS[key];
        if (!part) throw new NativeLibraryError(`${carriedBy} names a library "${key}" that scripts/release/native-libraries.mjs does not know: add its name and licence`);
        found.push({ ...part, version, purl: purlOf(part.name, version), carriedBy });
      }
    }
    const wasm = WASM_LIBRARIES[pkg.name];
    if (wasm) {
      const text = readFileSync(join(dir, wasm.file)).toString('latin1');
      for (const lib of wasm.libraries) {
        if (lib.version && !text.includes(lib.version)) throw new NativeLibraryError(`${join(pkg.source, wasm.file)} no longer contains ${lib.name} ${lib.version}: update scripts/release/native-libraries.mjs`);
        found.push({ ...lib, purl: purlOf(lib.name, lib.version), carriedBy });
      }
    }
    if (/^@napi-rs\/image-linux-/.test(pkg.name)) {
      const addon = readdirSync(dir).find((f) => f.endsWith('.node'));
      const text = readFileSync(join(dir, addon)).toString('latin1');
      const crates = new Set([...text.matchAll(/index\.crates\.io-[0-9a-f]+\/([A-Za-z0-9_-]+?)-(\d+\.\d+\.\d+[A-Za-z0-9.+-]*)\//g)].map((m) => `${m[1]}\0${m[2]}`));
      if (![...crates].some((c) => c.startsWith('oxipng\0'))) throw new NativeLibraryError(`${carriedBy} no longer shows oxipng among its crates: check what it bundles`);
      for (const crate of [...crates].sort()) {
        const [name, version] = crate.split('\0');
        found.push({ name, version, licence: CRATE_LICENCES[name], purl: `pkg:cargo/${name}@${version}`, carriedBy, note: 'Rust crate compiled into the addon' });
      }
    }
  }
  return found;
}

export const isLgpl = (lib) => /LGPL/.test(lib.licence?.id ?? lib.licence?.expression ?? '');
