// THIRD_PARTY_NOTICES.txt of one executable: Node's licence, the LGPL libraries and how to replace
// them, jemalloc and the native decoders' libraries (libheif, libde265, dav1d; LibRaw and what it links)
// with Debian's copyright files, the jpegli encoder's sources (jpegli, Highway, libjpeg-turbo's headers)
// with their licence files, the native
// libraries with their licences, and every npm package with its licence text.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { isLgpl } from './native-libraries.mjs';

const LICENCE_FILE = /^(licen[cs]e|copying|notice)([.-].*)?$/i;
/** Full texts the LGPL requires to travel with the work (Debian's base-files has them). */
const COMMON_LICENCES = ['/usr/share/common-licenses/LGPL-3', '/usr/share/common-licenses/GPL-3', '/usr/share/common-licenses/LGPL-2.1'];

export class NoticesError extends Error {}

const rule = (title) => `\n${'='.repeat(100)}\n${title}\n${'='.repeat(100)}\n`;
/** a, b and c */
const inWords = (items) => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);
const licenceText = (l) => (l ? (l.id ?? l.expression ?? l.name) : 'not recorded');

function declaredLicence(pkg) {
  const l = pkg.license ?? pkg.licenses;
  if (typeof l === 'string') return l;
  if (Array.isArray(l)) return l.map((x) => x.type ?? x).join(' OR ');
  return l?.type ?? 'not declared';
}

/**
 * @param root the repository
 * @param contents build.mjs's contents.json of the executable
 * @param libraries nativeLibraries() of it
 * @param cacheHint where the runtime tree is extracted (for the replacement instructions)
 */
export function notices({ root, version, contents, libraries }) {
  const missing = COMMON_LICENCES.filter((f) => !existsSync(f));
  if (missing.length) throw new NoticesError(`the full licence texts ${missing.join(', ')} are missing (Debian's base-files package installs them)`);
  const arch = contents.arch;
  const allocator = contents.allocator;
  const node = contents.packages.find((p) => p.how === 'node');
  const npm = contents.packages.filter((p) => p.how !== 'node');
  const libvips = npm.find((p) => p.name.startsWith('@img/sharp-libvips-linux-'));
  const sharpAddon = npm.find((p) => /^@img\/sharp-linux-/.test(p.name));
  const vips = libraries.find((l) => l.name === 'libvips');
  const decoders = contents.decoders;
  const encoders = contents.encoders;
  const lgpl = [...decoders.flatMap((d) => d.libraries.filter(isLgpl).map((l) => ({ ...l, carriedBy: `${d.title} (${d.path})` }))), ...libraries.filter(isLgpl)];
  const names = (list) => inWords(list.map((l) => l.path.split('/').pop()));
  const soname = readdirSync(join(root, libvips.source, 'lib')).find((f) => f.startsWith('libvips-cpp.so'));
  const out = [];

  out.push(
    `THIRD-PARTY NOTICES — compressd ${version} for linux-${arch}`,
    '',
    'compressd itself is MIT-licensed (see LICENSE). The executable `compressd` is a Node.js single executable',
    `application: it contains Node.js ${contents.node}, ${npm.length} npm packages (${npm.filter((p) => p.how === 'bundled').length} bundled into its`,
    `JavaScript, ${npm.filter((p) => p.how === 'carried').length} carried as files because they hold native or WebAssembly code), the native libraries those`,
    `packages contain, and the allocator it runs on (${allocator.name} ${allocator.version}). Each is listed below with its licence. The machine-readable list is the CycloneDX SBOM`,
    `compressd-${version}.cdx.json published beside this bundle.`,
  );

  out.push(rule('1. Libraries under the GNU LGPL, and how to replace them'));
  out.push(
    'These libraries are used under the GNU Lesser General Public License (the texts of the LGPL 3.0, the GPL 3.0',
    'it builds on, and the LGPL 2.1 are at the end of this file):',
    '',
    ...lgpl.map((l) => `  - ${l.name}${l.version ? ` ${l.version}` : ''} (${licenceText(l.licence)}), inside ${l.carriedBy}`),
    '',
    'How to use a modified version:',
    '',
    `  * libvips and the libraries linked into it (glib, libexif, libheif, librsvg, pango, fribidi, proxy-libintl)`,
    `    form one shared library, ${soname}, loaded by sharp's addon (${sharpAddon.name}).`,
    `    On first start compressd extracts it with the other native files into its cache directory:`,
    `      <cache>/${version}-<hash>/node_modules/${libvips.name}/lib/${soname}`,
    '    where <cache> is COMPRESSD_CACHE_DIR, else $XDG_CACHE_HOME/compressd, else ~/.cache/compressd, else',
    '    $TMPDIR/compressd-<uid>. Build your libvips with the same soname and interface (libvips',
    `    ${vips?.version ?? ''}, as https://github.com/lovell/sharp-libvips builds it) and have it loaded instead by`,
    '    starting compressd with',
    `      LD_PRELOAD=/path/to/your/${soname} compressd serve`,
    '    (the dynamic loader then satisfies sharp\'s dependency on that soname with your library). Replacing the',
    '    extracted file in place does not last: every start checks the extracted files\' sizes and extracts a',
    '    changed tree again.',
    ...decoders.flatMap((d) => {
      const ours = d.libraries.filter(isLgpl);
      if (!ours.length) return [];
      return [
        `  * The native ${inWords(ours.map((l) => l.name))} (Debian's ${names(ours)}) lie in ${d.path} of the`,
        `    same extracted tree, beside the program ${d.program} that compressd runs for each such picture. That`,
        '    program looks in the directories of LD_LIBRARY_PATH before its own, so',
        '      LD_LIBRARY_PATH=/path/to/your/libs compressd serve',
        '    has it load your build of such a library (same soname and interface).',
      ];
    }),
    '  * The WebAssembly fallbacks libheif, libde265 and LibRaw are modules inside the npm packages libheif-js and libraw-wasm.',
    '    compressd\'s complete source code is public (MIT): put a modified build of such a package in',
    '    node_modules and run `npm run release` (or `node build.mjs`) to build an executable that carries it.',
    '    The same rebuild works for libvips through the package ' + libvips.name + '.',
  );

  out.push(rule(`2. Node.js ${contents.node} (embedded runtime, from the npm package ${node.name}@${node.version})`));
  out.push(readFileSync(join(root, node.source, 'LICENSE'), 'utf8').trim());

  out.push(rule(`3. ${allocator.name} ${allocator.version} (the memory allocator, from Debian's ${allocator.debian.package} ${allocator.debian.version}) — ${licenceText(allocator.licence)}`));
  out.push(
    `The runtime tree holds ${allocator.path}, taken unchanged from ${allocator.deb.name}; compressd preloads it`,
    'at start (COMPRESSD_ALLOCATOR=system runs without it). Debian\'s copyright file for it, verbatim:',
    '',
    readFileSync(join(root, allocator.copyright), 'utf8').trim(),
  );

  decoders.forEach((d, i) => {
    const title = `${d.title[0].toUpperCase()}${d.title.slice(1)}`;
    out.push(rule(`3${'abcdefgh'[i]}. ${title}: ${inWords(d.libraries.map((l) => `${l.name} ${l.version}`))} (from Debian's ${d.libraries.map((l) => `${l.debian.package} ${l.debian.version}`).join(', ')})`));
    out.push(
      `The runtime tree's ${d.path} holds ${names(d.libraries)}, taken unchanged from ${inWords(d.libraries.map((l) => l.deb.name))},`,
      `and the program ${d.program} (compressd's own, MIT) built against them. ${d.libraries.filter((l) => !isLgpl(l)).map((l) => `${l.name} is under ${licenceText(l.licence)}. `).join('')}`,
      ...(d.stubbed?.length
        ? [`Its library's links to ${inWords(d.stubbed)} are met by a stub of compressd's own (MIT) under those names: none of them is carried.`]
        : []),
      "Debian's copyright files, verbatim:",
    );
    for (const l of d.libraries) out.push('', `----- ${l.debian.package}`, '', readFileSync(join(root, l.copyright), 'utf8').trim());
  });

  encoders.forEach((e, i) => {
    const title = `${e.title[0].toUpperCase()}${e.title.slice(1)}`;
    out.push(rule(`3${'abcdefgh'[decoders.length + i]}. ${title}: ${inWords(e.sources.map((s) => `${s.name} ${s.version}`))} (from Debian's ${e.sources.map((s) => s.file.name).join(', ')})`));
    out.push(
      `The runtime tree's ${e.path} holds the program ${e.program} (compressd's own, MIT), built from:`,
      ...e.sources.map((s) => `  - ${s.name} ${s.version}, ${s.role} — ${licenceText(s.licence)} (${s.website})`),
      'No library of theirs is carried beside it. Their licence files, verbatim:',
    );
    for (const s of e.sources) for (const f of s.licenceFiles) out.push('', `----- ${s.file.name}: ${f.name}`, '', readFileSync(join(root, f.path), 'utf8').trim());
  });

  out.push(rule(`4. Native and WebAssembly libraries inside the npm packages`));
  for (const l of libraries) {
    out.push(`${l.name}${l.version ? ` ${l.version}` : ''} — ${licenceText(l.licence)}${l.licence?.url ? ` (${l.licence.url})` : ''}; in ${l.carriedBy}${l.note ? `; ${l.note}` : ''}`);
  }
  const readme = readFileSync(join(root, libvips.source, 'README.md'), 'utf8');
  const licensing = readme.slice(readme.indexOf('## Licensing'));
  out.push('', `The licensing statement of ${libvips.name}@${libvips.version} (its README), verbatim:`, '', licensing.trim());

  out.push(rule(`5. npm packages (${npm.length})`));
  for (const p of npm) {
    const dir = join(root, p.source);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    out.push(`\n----- ${p.name}@${p.version} — ${declaredLicence(pkg)} (${p.how})${pkg.repository ? ` — ${typeof pkg.repository === 'string' ? pkg.repository : pkg.repository.url}` : ''}`);
    const files = readdirSync(dir).filter((f) => LICENCE_FILE.test(f)).sort();
    if (files.length === 0) out.push(`(The package ships no licence file; package.json declares ${declaredLicence(pkg)}.)`);
    for (const f of files) out.push('', readFileSync(join(dir, f), 'utf8').trim());
  }

  out.push(rule('6. Full licence texts'));
  for (const f of COMMON_LICENCES) out.push(`----- ${f.split('/').pop()}`, '', readFileSync(f, 'utf8').trim(), '');
  return `${out.join('\n')}\n`;
}
