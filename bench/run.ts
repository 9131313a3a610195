// `npm run bench [section…]`: runs every module in bench/sections (or the named ones)
// and writes their Markdown reports to bench/results/. Each section measures our
// compressors side by side with peer tools in the same run (medians of several runs).
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { allocatorChoice, jemallocEnv, mapsJemalloc } from '../src/runtime/allocator.ts';
import { sourceArenaTune, systemJemalloc } from '../src/runtime/source-start.ts';
import type { BenchContext } from './lib.ts';

// Our compressors are measured in this process on the allocator the server runs them on (jemalloc
// with its settings, src/runtime/allocator.ts; COMPRESSD_ALLOCATOR=system: glibc's malloc). The
// peers, run as processes, keep their own: the preload is not handed on.
// LD_PRELOAD's entries are separated by spaces or colons (as src/runtime/source-start.ts reads them).
const jemalloc = allocatorChoice(process.env) === 'jemalloc' ? systemJemalloc() : undefined;
const arena = jemalloc ? sourceArenaTune() : undefined;
const preloads = (process.env.LD_PRELOAD ?? '').split(/[\s:]+/).filter(Boolean);
if (jemalloc && !mapsJemalloc() && !preloads.includes(jemalloc)) {
  const run = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env: jemallocEnv(jemalloc, process.env, arena) });
  process.exit(run.status ?? 1);
}
if (jemalloc) {
  const others = preloads.filter((lib) => lib !== jemalloc && lib !== arena);
  if (others.length) process.env.LD_PRELOAD = others.join(' ');
  else delete process.env.LD_PRELOAD;
}

const sectionsDir = new URL('./sections/', import.meta.url);
const resultsDir = new URL('./results/', import.meta.url).pathname;
const wanted = process.argv.slice(2);
const runs = Number(process.env.BENCH_RUNS ?? 3);

await mkdir(resultsDir, { recursive: true });
const names = (await readdir(sectionsDir)).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort();
const ctx: BenchContext = { runs, resultsDir, corpus: new URL('../../shared/corpus/', import.meta.url).pathname };
const reports: string[] = [];
for (const name of names.filter((n) => wanted.length === 0 || wanted.includes(n))) {
  const started = Date.now();
  console.log(`bench: ${name}…`);
  const mod = (await import(new URL(`${name}.ts`, sectionsDir).href)) as { default: (c: BenchContext) => Promise<string> };
  const markdown = await mod.default(ctx);
  await writeFile(join(resultsDir, `${name}.md`), markdown);
  reports.push(markdown);
  console.log(markdown);
  console.log(`bench: ${name} took ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
await writeFile(join(resultsDir, 'README.md'), `# compressd benchmark (${new Date().toISOString()}, ${runs} runs)\n\n${reports.join('\n\n')}\n`);
