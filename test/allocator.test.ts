// The allocator the server runs on (docs/operating.md, "Memory that comes back" and "Large buffers"):
// jemalloc, with libcompressd-arena.so preloaded after it so that a freed buffer of 8 MiB or more waits
// for the decay instead of going back to the kernel at once.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
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

describe('the allocator', () => {
  const jemalloc = systemJemalloc();
  const arena = sourceArenaTune();
  const skip = !jemalloc ? "no libjemalloc.so.2 here (scripts/setup.mjs installs Debian's libjemalloc2)" : !arena ? 'libcompressd-arena.so not built (scripts/setup.mjs builds it)' : false;

  test('a freed 64 MiB buffer is reused by the next, not given back and faulted in again', { skip }, async () => {
    const env = jemallocEnv(jemalloc!, { PATH: process.env.PATH }, arena);
    assert.equal(env.LD_PRELOAD, `${jemalloc} ${arena}`);
    assert.equal(env.MALLOC_CONF, 'background_thread:true,narenas:1,oversize_threshold:0');
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

  test("an operator's MALLOC_CONF is kept, and the library does nothing without jemalloc", { skip }, async () => {
    assert.equal(jemallocEnv(jemalloc!, { MALLOC_CONF: 'thp:always' }, arena).MALLOC_CONF, 'thp:always');
    assert.equal(jemallocEnv(jemalloc!, {}).MALLOC_CONF, 'background_thread:true', 'without the library arena 0 would purge: the arenas stay as they were');
    assert.ok(existsSync(arena!));
    const counted = await faultsPerRound({ PATH: process.env.PATH, LD_PRELOAD: arena });
    assert.equal(counted.length, 6, 'glibc malloc under it runs as ever');
  });
});
