// The allocator the server runs on (docs/operating.md, "Memory that comes back", "Large buffers" and
// "Huge pages"): jemalloc, with libcompressd-arena.so preloaded after it so that a freed buffer of 8 MiB
// or more waits for the decay instead of going back to the kernel at once, and a buffer of 4 MiB or more
// takes huge pages while it lives.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { jemallocEnv } from '../src/runtime/allocator.ts';
import { sourceArenaTune, systemJemalloc } from '../src/runtime/source-start.ts';

const run = promisify(execFile);

/** Page faults of each of six rounds writing a fresh 64 MiB buffer, the last one freed before each. */
const ROUNDS = `
const { readFileSync } = require('node:fs');
const faults = () => Number(readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')[7]);
const counted = [];
for (let round = 1; round <= 6; round++) {
  const before = faults();
  let buffer = Buffer.allocUnsafeSlow(64 << 20);
  buffer.fill(round);
  counted.push(faults() - before);
  buffer = undefined;
  gc();
}
console.log(JSON.stringify(counted));
`;

async function faultsPerRound(env: NodeJS.ProcessEnv): Promise<number[]> {
  const { stdout } = await run(process.execPath, ['--expose-gc', '-e', ROUNDS], { env });
  return JSON.parse(stdout) as number[];
}

/**
 * Mappings advised to take huge pages (`hg` in their VmFlags) and the bytes of huge pages the process
 * holds: after 200 buffers of 1 MiB are written, after a 64 MiB one is, after a WebAssembly memory grows
 * by 64 MiB and is written, and once all are freed.
 */
const HUGE = `
const { readFileSync } = require('node:fs');
const advised = () => readFileSync('/proc/self/smaps', 'utf8').split('\\n').filter((l) => l.startsWith('VmFlags:') && / hg( |$)/.test(l)).length;
const huge = () => Number(/AnonHugePages:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'))[1]) * 1024;
const at = () => ({ advised: advised(), huge: huge() });
(async () => {
  let small = Array.from({ length: 200 }, (_, i) => Buffer.allocUnsafeSlow(1 << 20).fill(i));
  const afterSmall = at();
  let big = Buffer.allocUnsafeSlow(64 << 20).fill(1);
  const afterBig = at();
  let memory = new WebAssembly.Memory({ initial: 1 });
  memory.grow(1024);
  new Uint8Array(memory.buffer).fill(1);
  const afterWasm = at();
  small = big = memory = undefined;
  // V8 frees a collected buffer's memory on a thread of its own, soon after the collection.
  for (let i = 0; i < 100 && advised() > 0; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 20));
  }
  console.log(JSON.stringify({ afterSmall, afterBig, afterWasm, freed: at() }));
})();
`;

type Pages = { advised: number; huge: number };

type Stages = { afterSmall: Pages; afterBig: Pages; afterWasm: Pages; freed: Pages };

async function hugePages(env: NodeJS.ProcessEnv): Promise<Stages> {
  const { stdout } = await run(process.execPath, ['--expose-gc', '-e', HUGE], { env });
  return JSON.parse(stdout) as Stages;
}

/** Whether the kernel gives huge pages where they are asked for (`madvise` or `always`; not `never`). */
const kernelHugePages = (): boolean => {
  try {
    return !readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').includes('[never]');
  } catch {
    return false;
  }
};

describe('the allocator', () => {
  const jemalloc = systemJemalloc();
  const arena = sourceArenaTune();
  const skip = !jemalloc ? "no libjemalloc.so.2 here (scripts/setup.mjs installs Debian's libjemalloc2)" : !arena ? 'libcompressd-arena.so not built (scripts/setup.mjs builds it)' : false;

  test('a freed 64 MiB buffer is reused by the next, not given back and faulted in again', { skip }, async () => {
    const env = jemallocEnv(jemalloc!, { PATH: process.env.PATH }, arena);
    assert.equal(env.LD_PRELOAD, `${jemalloc} ${arena}`);
    assert.equal(env.MALLOC_CONF, 'background_thread:true,narenas:1,oversize_threshold:0');
    // Counted in 4 KiB pages: huge pages would take nearly every fault away, reused or not.
    env.MALLOC_CONF += ',thp:never';
    const [first, ...later] = await faultsPerRound(env);
    assert.ok(first >= 16_000, `the first buffer is fresh pages: ${first} faults`);
    // jemalloc's background thread may still decay a freed buffer between two rounds (its 10 s decay
    // purges a share at each step): most rounds, not every one, reuse the pages.
    const reused = later.filter((f) => f < first / 10).length;
    assert.ok(reused >= 3, `later buffers reuse its pages (${reused} of ${later.length}): ${[first, ...later].join(', ')}`);
    // The same options without the library: jemalloc's arena 0 purges the freed buffer at once.
    const [bareFirst, ...bareLater] = await faultsPerRound({ ...env, LD_PRELOAD: jemalloc });
    for (const f of bareLater) assert.ok(f > bareFirst / 2, `without it every buffer faults: ${[bareFirst, ...bareLater].join(', ')}`);
  });

  test('a buffer or a WebAssembly growth of 4 MiB or more takes huge pages while it lives; smaller ones and freed memory do not', { skip }, async () => {
    const env = jemallocEnv(jemalloc!, { PATH: process.env.PATH }, arena);
    const { afterSmall, afterBig, afterWasm, freed } = await hugePages(env);
    assert.deepEqual(afterSmall, { advised: 0, huge: 0 }, '200 buffers of 1 MiB: 4 KiB pages, as ever');
    assert.equal(afterBig.advised, 1, 'the 64 MiB buffer is advised');
    if (kernelHugePages()) assert.ok(afterBig.huge >= 48 << 20, `and its pages are huge: ${afterBig.huge} bytes`);
    assert.equal(afterWasm.advised, 2, "the WebAssembly memory's growth is advised too");
    if (kernelHugePages()) assert.ok(afterWasm.huge - afterBig.huge >= 48 << 20, `and its pages are huge: ${afterWasm.huge - afterBig.huge} bytes`);
    assert.equal(freed.advised, 0, 'freed, their pages go back to the advice of the memory around them');
    // An operator's thp:never (or thp:always: jemalloc's own, for every mapping) leaves the hooks out.
    const never = await hugePages({ ...env, MALLOC_CONF: `${env.MALLOC_CONF},thp:never` });
    assert.deepEqual(never.afterWasm, { advised: 0, huge: 0 });
    // Without the library the same buffer and memory are 4 KiB pages.
    const bare = await hugePages({ ...env, LD_PRELOAD: jemalloc });
    assert.deepEqual(bare.afterWasm, { advised: 0, huge: 0 });
  });

  test("an operator's MALLOC_CONF is kept, and the library does nothing without jemalloc", { skip }, async () => {
    assert.equal(jemallocEnv(jemalloc!, { MALLOC_CONF: 'thp:always' }, arena).MALLOC_CONF, 'thp:always');
    assert.equal(jemallocEnv(jemalloc!, {}).MALLOC_CONF, 'background_thread:true', 'without the library arena 0 would purge: the arenas stay as they were');
    assert.ok(existsSync(arena!));
    const counted = await faultsPerRound({ PATH: process.env.PATH, LD_PRELOAD: arena });
    assert.equal(counted.length, 6, 'glibc malloc under it runs as ever');
  });
});
