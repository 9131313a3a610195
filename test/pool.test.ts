import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Piscina } from 'piscina';
import { CompressorPool } from '../src/jobs/pool.ts';
import { progressThroughPool, valuesWithin } from './helpers/pool-progress.ts';

const CORPUS = new URL('../../shared/corpus/', import.meta.url).pathname;

describe('the compressor pool', () => {
  it('stops a job at its next check on abort: jobs.aborted, the thread kept, and the next job runs on it', async () => {
    const pool = new CompressorPool(1);
    // The pool's piscina is private; its thread events are what this test is about.
    const threads = (pool as unknown as { piscina: Piscina }).piscina;
    let created = 0;
    let destroyed = 0;
    threads.on('workerCreate', () => created++);
    threads.on('workerDestroy', () => destroyed++);
    const out = mkdtempSync(join(tmpdir(), 'compressd-pool-'));
    try {
      const request = (name: string) => (mkdirSync(join(out, name)), { jobId: name, jobType: 'image.jpg-compress', format: 'jpg', options: {}, inputPath: join(CORPUS, 'jpg/phone-IMG_20180725_163423.jpg'), outDir: join(out, name) });
      const controller = new AbortController();
      const stopped = await pool.run(request('stopped'), controller.signal, () => controller.abort('jobs.canceled'));
      assert.deepEqual(stopped, { ok: false, failure: { code: 'jobs.aborted', detail: 'The job was stopped.' } });
      const next = await pool.run(request('next'), new AbortController().signal, () => {});
      assert.equal(next.ok, true, JSON.stringify(next));
      assert.equal(destroyed, 0, 'no thread was terminated');
      assert.equal(created, 1, 'both jobs ran on one thread');
    } finally {
      await pool.close();
      rmSync(out, { recursive: true, force: true });
    }
  });
  it("moves a job's progress on while its thread is inside a synchronous call it announced (a RAW's LibRaw in WebAssembly)", async () => {
    // Before, the job sat at 1 % for the 2-3 s of the decode: its thread can send nothing meanwhile.
    const seen = await progressThroughPool('image.universal-compress', join(CORPUS, 'raw/derived-pixel-IMG_20180725_163423.dng'));
    assert.ok(valuesWithin(seen, 1, 30, 'decoding') >= 2, JSON.stringify(seen));
  });
});
