// A memory and time budget per job (issue 41, item 3): a job's peak memory is estimated from its
// header facts before it decodes, it runs only when the node's budget has room, one that can never
// fit fails at once (jobs.memory_budget), and documents are bounded by picture count and decoded
// pixels. The server runs with the budget of a 2 GiB box.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { deflateSync } from 'node:zlib';
import { MemoryBudget } from '../src/jobs/memory-budget.ts';
import { png } from './helpers/bombs.ts';
import { reportDocx } from './helpers/made-files.ts';
import { CORPUS, fileForm, json, startTestServer, type TestServer, waitForJob } from './helpers/server.ts';
import { compress as jpg } from '../workers/jpg.ts';
import { unzip } from './helpers/zip.ts';

describe('the memory budget', () => {
  it('grants holds first come first served, tells a hold that could never fit at once, and gives back what a task held or still waited for', async () => {
    const budget = new MemoryBudget(1000);
    const a = budget.hold();
    const b = budget.hold();
    const c = budget.hold();
    assert.equal(await a.grow(600), true);
    const order: string[] = [];
    const bGrown = b.grow(500).then((ok) => order.push(`b ${ok}`));
    // c would fit beside a, but b came first.
    const cGrown = c.grow(300).then((ok) => order.push(`c ${ok}`));
    assert.equal(await budget.hold().grow(1001), false, 'more than the whole budget: never');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, []);
    a.release();
    await Promise.all([bGrown, cGrown]);
    assert.deepEqual(order, ['b true', 'c true']);
    assert.equal(budget.held, 800);
    const d = budget.hold();
    const waiting = d.grow(900);
    d.release();
    assert.equal(await waiting, true);
    b.release();
    c.release();
    assert.equal(budget.held, 0, 'a hold released while it waited takes nothing');
  });

  it('grows a hold for work ahead of need only where the budget has room now and no hold waits first, never queueing it', async () => {
    const budget = new MemoryBudget(1000);
    const a = budget.hold();
    const b = budget.hold();
    const c = budget.hold();
    assert.equal(await a.grow(600), true);
    assert.equal(a.growNow(700), true);
    assert.equal(a.growNow(650), true, 'a smaller ask changes nothing');
    assert.equal(budget.held, 700);
    assert.equal(b.growNow(400), false, 'no room now: refused, not queued');
    const cGrown = c.grow(400);
    assert.equal(b.growNow(100), false, 'room, but a hold waits first');
    assert.equal(budget.held, 700);
    a.release();
    assert.equal(await cGrown, true);
    assert.equal(a.growNow(100), false, 'a released hold takes nothing');
    assert.equal(b.growNow(600), true);
    assert.equal(budget.held, 1000);
    b.release();
    c.release();
    assert.equal(budget.held, 0);
  });
});

describe('jobs within the memory budget of a 2 GiB box', () => {
  let s: TestServer;
  let dir: string;
  let declared100: Buffer;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'compressd-memory-'));
    // What a 2 GiB box gets by default: its memory less the server's reserve. The time limit is half
    // what the 9,990-picture DOCX held a worker for before (195 s), and 5 times what it takes now.
    s = await startTestServer({ memoryBudgetMb: String(2048 - 512), jobTimeoutSeconds: '150' });
    // 97 KB declaring 10,000 × 10,000 grey pixels, exactly the 100 MP limit, all of them there.
    declared100 = png(10_000, 10_000, deflateSync(Buffer.alloc(10_001 * 10_000), { level: 9 }));
  });
  after(async () => {
    await s?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function run(name: string, bytes: Buffer, timeoutMs = 120_000): Promise<Record<string, any>> {
    const path = join(dir, name);
    await writeFile(path, bytes);
    const res = await s.api('/compress', { method: 'POST', body: await fileForm(path) });
    assert.equal(res.status, 202, await res.clone().text());
    return waitForJob(s, (await json(res)).id, undefined, timeoutMs);
  }

  it('fails a 100 MP PNG whose peak could never fit the budget at once with jobs.memory_budget, before decoding it', async () => {
    const job = await run('declared-100mp.png', declared100);
    assert.equal(job.status, 'Failed');
    assert.equal(job.error.code, 'jobs.memory_budget');
    assert.match(job.error.detail, /10000×10000 picture needs about 1,9\d\d MB .* budget for running jobs \(1,536 MB/);
  });

  it('a JPEG whose final encode may begin ahead of its answer (its memory asked of the pool at once) gets the file of an encode made after it', async () => {
    const input = await readFile(join(CORPUS, 'jpg/jpeg420exif.jpg'));
    const job = await run('jpeg420exif.jpg', input);
    assert.equal(job.status, 'Succeeded');
    const served = Buffer.from(await (await s.api(`/compress/job/${job.id}/download`)).arrayBuffer());
    const out = await mkdtemp(join(tmpdir(), 'compressd-ahead-'));
    try {
      const inProcess = await jpg({ inputPath: join(CORPUS, 'jpg/jpeg420exif.jpg'), format: 'jpg', options: {} }, { dir: out }, { signal: new AbortController().signal, progress: () => {} });
      assert.ok(served.equals(await readFile(inProcess.path)));
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it('runs a 25 MP PNG that fits', { timeout: 300_000 }, async () => {
    const job = await run('declared-25mp.png', png(5_000, 5_000, deflateSync(Buffer.alloc(5_001 * 5_000), { level: 9 })), 240_000);
    assert.equal(job.status, 'Succeeded', JSON.stringify(job.error));
  });

  it('carries over the pictures of a DOCX of 20 × 100 MP pictures that could never fit, and finishes it', { timeout: 300_000 }, async () => {
    const docx = await reportDocx(join(dir, 'twenty.docx'), Array.from({ length: 20 }, () => declared100));
    const job = await run('twenty.docx', await readFile(docx));
    assert.equal(job.status, 'Succeeded', JSON.stringify(job.error));
    const out = await unzip(Buffer.from(await (await s.api(`/compress/job/${job.id}/download`)).arrayBuffer()));
    const media = [...out].filter(([name]) => name.startsWith('word/media/'));
    assert.equal(media.length, 20);
    for (const [name, bytes] of media) assert.ok(bytes.equals(declared100), `${name} carried over byte for byte`);
  });

  it('carries over the 32 × 32 pictures of a DOCX of 9,983 (10,000 parts) without decoding them, in seconds rather than minutes', { timeout: 300_000 }, async () => {
    // Noise, so no two rows are alike; one picture repeated (the hostile file had 9,990).
    const noise = Buffer.alloc(33 * 32);
    for (let i = 0; i < noise.length; i++) noise[i] = i % 33 === 0 ? 0 : (i * 2654435761) >>> 24;
    const tiny = png(32, 32, deflateSync(noise));
    const docx = await reportDocx(join(dir, 'tiny.docx'), Array.from({ length: 9_983 }, () => tiny));
    const job = await run('tiny.docx', await readFile(docx), 200_000);
    assert.equal(job.status, 'Succeeded', JSON.stringify(job.error));
  });
});
