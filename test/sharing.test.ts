// One account never blocks another (issue 41, item 6): while one account's long jobs hold every
// worker slot, another account's small job starts on the fairness lane instead of waiting for them.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { cameraPhotos, reportDocx } from './helpers/made-files.ts';
import { fileForm, json, startTestServer, type TestServer, waitForJob } from './helpers/server.ts';

let s: TestServer;
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'compressd-sharing-'));
  s = await startTestServer({ workers: '1' });
});
after(async () => {
  await s?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function submit(path: string, key: string): Promise<string> {
  const res = await s.api('/compress', { method: 'POST', body: await fileForm(path), key });
  assert.equal(res.status, 202, await res.clone().text());
  return (await json(res)).id as string;
}

describe('sharing the workers between accounts', () => {
  it("starts another account's 1 MP JPEG while one account's long jobs hold every slot, and finishes it before the first long job", { timeout: 600_000 }, async () => {
    // A report of camera photos: each is searched for its quality, tens of seconds of work in all.
    const long = await reportDocx(join(dir, 'long.docx'), await cameraPhotos(10, 3000, 2000));
    const small = join(dir, 'small.jpg');
    await sharp((await cameraPhotos(1, 1200, 800))[0]).toFile(small);
    const heavy = s.newKey('heavy');
    const light = s.newKey('light');
    const longJobs = [await submit(long, heavy), await submit(long, heavy)];
    await waitForJob(s, longJobs[0]!, ['Running', 'Succeeded', 'Failed'], 60_000, heavy);
    const smallJob = await submit(small, light);
    const done = await waitForJob(s, smallJob, undefined, 120_000, light);
    assert.equal(done.status, 'Succeeded', JSON.stringify(done));
    const first = await json(await s.api(`/compress/job/${longJobs[0]}`, { key: heavy }));
    assert.equal(first.status, 'Running', 'the small job did not wait for the long one to end');
    const second = await json(await s.api(`/compress/job/${longJobs[1]}`, { key: heavy }));
    assert.equal(second.status, 'Queued', 'the lane is only for accounts with nothing running');
    for (const id of longJobs) await s.api(`/compress/job/${id}/cancel`, { method: 'POST', key: heavy });
  });
});
