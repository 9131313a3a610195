// The release's CycloneDX SBOM: the npm part from @cyclonedx/cyclonedx-npm (read from
// package-lock.json, so the arm64 platform packages, which are not installed here, are in it),
// kept to the packages the executables contain; then the embedded Node with the libraries it is
// built from, the native libraries inside the npm packages, the jemalloc each executable preloads,
// Debian's libraries its native decoders run on (libheif, libde265, dav1d; LibRaw and what it links), and
// what its jpegli encoder is compiled from (jpegli and Highway from Debian's source tarballs, libjpeg-turbo's
// headers from a .deb).
// Without a serial number or timestamp (`--output-reproducible`): scripts/release.mjs gives it the release's.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

export class SbomError extends Error {}

const SPEC_VERSION = '1.6';

/** Licences of the libraries Node.js is built from (process.versions keys), as Node's LICENSE states them. */
const NODE_PARTS = {
  v8: { name: 'v8', licence: { id: 'BSD-3-Clause' } },
  uv: { name: 'libuv', licence: { id: 'MIT' } },
  openssl: { name: 'openssl', licence: { id: 'Apache-2.0' } },
  icu: { name: 'icu', licence: { id: 'Unicode-3.0' } },
  zlib: { name: 'zlib', licence: { id: 'Zlib' } },
  brotli: { name: 'brotli', licence: { id: 'MIT' } },
  zstd: { name: 'zstd', licence: { id: 'BSD-3-Clause' } },
  ares: { name: 'c-ares', licence: { id: 'MIT' } },
  nghttp2: { name: 'nghttp2', licence: { id: 'MIT' } },
  llhttp: { name: 'llhttp', licence: { id: 'MIT' } },
  sqlite: { name: 'sqlite', licence: { id: 'blessing' } },
  simdjson: { name: 'simdjson', licence: { expression: 'Apache-2.0 OR MIT' } },
  simdutf: { name: 'simdutf', licence: { expression: 'Apache-2.0 OR MIT' } },
  ada: { name: 'ada', licence: { expression: 'Apache-2.0 OR MIT' } },
  undici: { name: 'undici', licence: { id: 'MIT' } },
  acorn: { name: 'acorn', licence: { id: 'MIT' } },
  uvwasi: { name: 'uvwasi', licence: { id: 'MIT' } },
};

const licences = (l) => (!l ? undefined : l.expression ? [{ expression: l.expression }] : [{ license: l.id ? { id: l.id } : { name: l.name, ...(l.url ? { url: l.url } : {}) } }]);
const keyOf = (c) => `${c.group ? `${c.group}/` : ''}${c.name}@${c.version}`;

function flatten(components, into = []) {
  for (const c of components ?? []) {
    into.push(c);
    flatten(c.components, into);
    delete c.components;
  }
  return into;
}

/**
 * @param root the repository
 * @param builds contents.json of each executable
 * @param libraries per build, nativeLibraries() of it
 * @param nodeVersions process.versions of the embedded Node
 */
export function sbom({ root, builds, libraries, nodeVersions }) {
  // The package exports only its API; its command line is the `bin` npm links into node_modules/.bin.
  const cli = join(root, 'node_modules', '.bin', 'cyclonedx-npm');
  const made = spawnSync(
    cli,
    ['--package-lock-only', '--output-reproducible', '--omit', 'dev', '--flatten-components', '--no-workspaces', '--spec-version', SPEC_VERSION, '--output-format', 'JSON', '--output-file', '-'],
    { cwd: root, encoding: 'utf8', maxBuffer: 256 << 20 },
  );
  if (made.status !== 0) throw new SbomError(`cyclonedx-npm failed: ${made.stderr.trim()}`);
  const bom = JSON.parse(made.stdout);

  const wanted = new Map();
  for (const b of builds) for (const p of b.packages) if (p.how !== 'node') wanted.set(`${p.name}@${p.version}`, p);
  const all = flatten(bom.components);
  const kept = all.filter((c) => wanted.has(keyOf(c)));
  const absent = [...wanted.keys()].filter((k) => !kept.some((c) => keyOf(c) === k));
  if (absent.length) throw new SbomError(`cyclonedx-npm did not list ${absent.join(', ')}`);
  const keptRefs = new Set(kept.map((c) => c['bom-ref']));
  bom.components = kept;

  const nodeVersion = builds[0].node.slice(1);
  const nodeRef = `node@${nodeVersion}`;
  const nodeParts = Object.entries(nodeVersions)
    .filter(([k, v]) => NODE_PARTS[k] && v)
    .map(([k, v]) => ({ type: 'library', 'bom-ref': `${nodeRef}/${NODE_PARTS[k].name}@${v}`, name: NODE_PARTS[k].name, version: v, licenses: licences(NODE_PARTS[k].licence), purl: `pkg:generic/${NODE_PARTS[k].name}@${encodeURIComponent(v)}` }));
  bom.components.push({
    type: 'platform',
    'bom-ref': nodeRef,
    name: 'node',
    version: nodeVersion,
    description: `Node.js runtime embedded in each executable (npm packages ${builds.map((b) => b.packages.find((p) => p.how === 'node').name).join(', ')})`,
    licenses: licences({ id: 'MIT' }),
    purl: `pkg:github/nodejs/node@v${nodeVersion}`,
    externalReferences: [{ type: 'website', url: 'https://nodejs.org/' }],
    components: nodeParts,
  });

  const npmRef = new Map(kept.map((c) => [keyOf(c), c['bom-ref']]));
  const byRef = new Map();
  for (const lib of libraries.flat()) {
    const ref = `${lib.carriedBy}/${lib.name}${lib.version ? `@${lib.version}` : ''}`;
    if (byRef.has(ref)) continue;
    byRef.set(ref, lib);
    bom.components.push({
      type: 'library',
      'bom-ref': ref,
      name: lib.name,
      ...(lib.version ? { version: lib.version } : {}),
      ...(lib.note ? { description: lib.note } : {}),
      ...(lib.licence ? { licenses: licences(lib.licence) } : {}),
      purl: lib.purl,
    });
  }

  // Debian's libraries: one component per distinct .deb the executables carry.
  const debianRefs = [];
  const fromDebian = (b) => [
    { ...b.allocator, role: 'memory allocator preloaded by the executable' },
    ...b.decoders.flatMap((d) => d.libraries.map((l) => ({ ...l, role: `run by the executable's ${d.title.replace(/^the /, '')} (${d.path})` }))),
  ];
  for (const lib of builds.flatMap(fromDebian)) {
    const ref = `${lib.name}@${lib.version}/${lib.deb.name}`;
    if (debianRefs.includes(ref)) continue;
    debianRefs.push(ref);
    bom.components.push({
      type: 'library',
      'bom-ref': ref,
      name: lib.name,
      version: lib.version,
      description: `${lib.role}; Debian's ${lib.debian.package} ${lib.debian.version} (${lib.deb.name})`,
      licenses: licences(lib.licence),
      purl: `pkg:deb/debian/${lib.debian.package}@${encodeURIComponent(lib.debian.version)}?arch=${lib.deb.name.match(/_([a-z0-9]+)\.deb$/)[1]}&distro=debian-12`,
      hashes: [{ alg: 'SHA-256', content: lib.deb.sha256 }],
      externalReferences: [
        { type: 'website', url: lib.website },
        { type: 'distribution', url: lib.deb.url },
      ],
    });
  }

  // What the encoders are compiled from: one component per distinct pinned file (a source tarball is
  // the same for both CPUs, the headers' .deb is not).
  const compiledFrom = (b) => b.encoders.flatMap((e) => e.sources.map((s) => ({ ...s, role: `${s.role} (the executable's ${e.title.replace(/^the /, '')}, ${e.path}/${e.program})` })));
  for (const source of builds.flatMap(compiledFrom)) {
    const ref = `${source.name}@${source.version}/${source.file.name}`;
    if (debianRefs.includes(ref)) continue;
    debianRefs.push(ref);
    bom.components.push({
      type: 'library',
      'bom-ref': ref,
      name: source.name,
      version: source.version,
      description: `${source.role}; Debian's ${source.file.name}`,
      licenses: licences(source.licence),
      purl: source.purl,
      hashes: [{ alg: 'SHA-256', content: source.file.sha256 }],
      externalReferences: [
        { type: 'website', url: source.website },
        { type: 'distribution', url: source.file.url },
      ],
    });
  }

  bom.dependencies = (bom.dependencies ?? [])
    .filter((d) => keptRefs.has(d.ref))
    .map((d) => ({ ...d, dependsOn: (d.dependsOn ?? []).filter((r) => keptRefs.has(r)) }));
  const carriers = new Map();
  for (const [ref, lib] of byRef) carriers.set(lib.carriedBy, [...(carriers.get(lib.carriedBy) ?? []), ref]);
  for (const [carrier, refs] of carriers) {
    const entry = bom.dependencies.find((d) => d.ref === npmRef.get(carrier));
    if (entry) entry.dependsOn = [...(entry.dependsOn ?? []), ...refs];
    else bom.dependencies.push({ ref: npmRef.get(carrier), dependsOn: refs });
  }
  for (const ref of byRef.keys()) bom.dependencies.push({ ref, dependsOn: [] });
  const rootRef = bom.metadata?.component?.['bom-ref'];
  if (rootRef) {
    const entry = bom.dependencies.find((d) => d.ref === rootRef) ?? bom.dependencies[bom.dependencies.push({ ref: rootRef, dependsOn: [] }) - 1];
    entry.dependsOn = [...new Set([...(entry.dependsOn ?? []).filter((r) => keptRefs.has(r)), nodeRef, ...debianRefs])];
  }
  for (const ref of debianRefs) bom.dependencies.push({ ref, dependsOn: [] });
  bom.dependencies.push({ ref: nodeRef, dependsOn: nodeParts.map((p) => p['bom-ref']) });
  for (const p of nodeParts) bom.dependencies.push({ ref: p['bom-ref'], dependsOn: [] });
  return bom;
}
