// Spec: "Compare response", "Job endpoints" (compare errors) — before/after previews on real corpus files.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import yauzl from 'yauzl';
import * as bombs from './helpers/bombs.ts';
import { CompressorPool } from '../src/jobs/pool.ts';
import { ApiError } from '../src/errors.ts';
import { Comparer } from '../src/server/routes/compare.ts';
import { PreviewLimiter } from '../src/server/preview-limit.ts';
import { CORPUS, fileForm, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';

const PREVIEW_EDGE = 1200;
const FULL_EDGE = 7000;
const FULL_PAGE_EDGE = 3000;

let s: TestServer;
before(async () => {
  s = await startTestServer({ workers: '2' });
});
after(() => s.stop());

async function finishedJob(server: TestServer, file: string, options?: object): Promise<Record<string, any>> {
  const fields: Record<string, string> = options ? { options: JSON.stringify(options) } : {};
  const accepted = await json(await server.api('/compress', { method: 'POST', body: await fileForm(join(CORPUS, file), fields) }));
  assert.ok(accepted.id, JSON.stringify(accepted));
  return waitForJob(server, accepted.id);
}

/** Decodes a preview and checks it is what the response says it is. */
async function checkPreview(base64: string, mimeType: string, width: number, height: number, edge = PREVIEW_EDGE): Promise<void> {
  assert.match(mimeType, /^image\/(jpeg|webp)$/);
  const meta = await sharp(Buffer.from(base64, 'base64')).metadata();
  assert.equal(meta.format, mimeType === 'image/jpeg' ? 'jpeg' : 'webp');
  assert.equal(meta.width, width);
  assert.equal(meta.height, height);
  assert.ok(Math.max(width, height) <= edge);
}

/** A preview of `w`×`h` keeps the aspect ratio of `fw`×`fh` (to the pixel rounding of its edges). */
function assertAspect(w: number, h: number, fw: number, fh: number): void {
  assert.ok(Math.abs(w - (h * fw) / fh) <= 1 || Math.abs(h - (w * fh) / fw) <= 1, `${w}×${h} is not the shape of ${fw}×${fh}`);
}

/** The compare response (checked against the spec's shape) and its headers; `query` e.g. `?size=full&page=2`. */
async function compareWithHeaders(job: Record<string, any>, query = ''): Promise<{ body: Record<string, any>; headers: Headers }> {
  const res = await s.api(`/compress/job/${job.id}/compare${query}`);
  const body = await json(res);
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(res.headers.get('cache-control'), 'private, no-store');
  for (const f of ['beforeImage', 'afterImage', 'beforeMimeType', 'afterMimeType']) assert.equal(typeof body[f], 'string', f);
  for (const f of ['originalBytes', 'compressedBytes', 'previewWidth', 'previewHeight', 'afterPreviewWidth', 'afterPreviewHeight', 'inputWidth', 'inputHeight', 'outputWidth', 'outputHeight']) {
    assert.ok(Number.isInteger(body[f]) && body[f] > 0, `${f}: ${body[f]}`);
  }
  assert.equal(body.originalBytes, job.metrics.inputBytes);
  assert.equal(body.compressedBytes, job.metrics.outputBytes);
  assert.equal(body.wasResized, body.inputWidth !== body.outputWidth || body.inputHeight !== body.outputHeight);
  const edge = query.includes('size=full') ? Math.max(FULL_EDGE, FULL_PAGE_EDGE) : PREVIEW_EDGE;
  await checkPreview(body.beforeImage, body.beforeMimeType, body.previewWidth, body.previewHeight, edge);
  await checkPreview(body.afterImage, body.afterMimeType, body.afterPreviewWidth, body.afterPreviewHeight, edge);
  assertAspect(body.previewWidth, body.previewHeight, body.inputWidth, body.inputHeight);
  assertAspect(body.afterPreviewWidth, body.afterPreviewHeight, body.outputWidth, body.outputHeight);
  assert.deepEqual(Object.keys(body).sort(), SPEC_FIELDS, 'the body keeps the spec\'s fields, no more');
  return { body, headers: res.headers };
}

const SPEC_FIELDS = [
  'afterImage', 'afterMimeType', 'afterPreviewHeight', 'afterPreviewWidth', 'beforeImage', 'beforeMimeType', 'compressedBytes', 'inputHeight',
  'inputWidth', 'originalBytes', 'outputHeight', 'outputWidth', 'previewHeight', 'previewWidth', 'wasResized',
];

async function compare(job: Record<string, any>, query = ''): Promise<Record<string, any>> {
  return (await compareWithHeaders(job, query)).body;
}

/** Displayed size of an image file or download (EXIF orientation applied). */
async function displayed(input: string | Buffer): Promise<[number, number]> {
  const m = await sharp(input).metadata();
  return [m.autoOrient.width, m.autoOrient.height];
}

async function downloaded(job: Record<string, any>): Promise<Buffer> {
  return Buffer.from(await (await s.api(`/compress/job/${job.id}/download`)).arrayBuffer());
}

/** The jobs of the kind tests, submitted together so the pool runs them side by side. */
const KINDS = {
  jpg: ['jpg/jpeg420exif.jpg', { resize: { enabled: true, mode: 'pixels', value: 1000 } }],
  png: ['png/exifr-logo-black-highres.png'],
  gif: ['gif/exifr-readme-animated.gif'],
  universal: ['bmp/derived-prairie_falcon-24bit.bmp'],
  pdf: ['pdf/ocrmypdf-cardinal-scan.pdf'],
  docx: ['docx/python-docx-inline-shapes.docx'],
} as const satisfies Record<string, readonly [string, object?]>;
const jobs = new Map<keyof typeof KINDS, Promise<Record<string, any>>>();
const jobOf = async (kind: keyof typeof KINDS): Promise<Record<string, any>> => {
  const job = await jobs.get(kind)!;
  assert.equal(job.status, 'Succeeded', JSON.stringify(job.error));
  return job;
};

/** Size of the largest picture (by stored bytes) in an Office package, read independently of the service. */
async function largestPicture(path: string): Promise<{ name: string; size: [number, number] }> {
  const zip = await yauzl.openPromise(path, { lazyEntries: true, autoClose: false });
  try {
    let largest: yauzl.Entry | null = null;
    for await (const entry of zip.eachEntry()) {
      if (/\/media\/[^/]+\.(jpe?g|png)$/i.test(entry.fileName) && (!largest || entry.uncompressedSize > largest.uncompressedSize)) largest = entry;
    }
    assert.ok(largest, 'the package has a picture');
    const chunks: Buffer[] = [];
    for await (const chunk of await zip.openReadStreamPromise(largest)) chunks.push(chunk as Buffer);
    return { name: largest.fileName, size: await displayed(Buffer.concat(chunks)) };
  } finally {
    zip.close();
  }
}

describe('previews for every kind', () => {
  before(() => {
    for (const [kind, [file, options]] of Object.entries(KINDS) as [keyof typeof KINDS, readonly [string, object?]][]) {
      const job = finishedJob(s, file, options);
      job.catch(() => {});
      jobs.set(kind, job);
    }
  });

  it('JPG resized to 1000 px: input and output sizes, wasResized, previews fit 1200 px', async () => {
    const job = await jobOf('jpg');
    const body = await compare(job);
    assert.deepEqual([body.inputWidth, body.inputHeight], await displayed(join(CORPUS, 'jpg/jpeg420exif.jpg')));
    assert.deepEqual([body.outputWidth, body.outputHeight], await displayed(await downloaded(job)));
    assert.equal(Math.max(body.outputWidth, body.outputHeight), 1000);
    assert.equal(body.wasResized, true);
    assert.equal(Math.max(body.previewWidth, body.previewHeight), PREVIEW_EDGE);
    assert.deepEqual([body.afterPreviewWidth, body.afterPreviewHeight], [body.outputWidth, body.outputHeight]);
    assert.equal(body.beforeMimeType, 'image/jpeg');

    const again = await json(await s.api(`/compress/job/${job.id}/compare`));
    assert.deepEqual(again, body, 'a second request is answered from the cache with the same previews');
  });

  it('size=full: the picture at its own pixels for zooming in, made only when asked', async () => {
    const job = await jobOf('jpg');
    const { body, headers } = await compareWithHeaders(job, '?size=full');
    assert.deepEqual([body.previewWidth, body.previewHeight], [body.inputWidth, body.inputHeight]);
    assert.deepEqual([body.afterPreviewWidth, body.afterPreviewHeight], [body.outputWidth, body.outputHeight]);
    assert.equal(headers.get('x-compare-page'), null, 'page headers are for PDFs only');
    const fit = await compare(job, '?size=fit');
    assert.equal(Math.max(fit.previewWidth, fit.previewHeight), PREVIEW_EDGE);
  });

  it('PNG with transparency previews as WebP that keeps its alpha', async () => {
    const job = await jobOf('png');
    const body = await compare(job);
    assert.deepEqual([body.inputWidth, body.inputHeight], [1616, 855]);
    assert.deepEqual([body.outputWidth, body.outputHeight], await displayed(await downloaded(job)));
    assert.equal(body.wasResized, false);
    assert.equal(body.beforeMimeType, 'image/webp');
    assert.equal(body.afterMimeType, 'image/webp');
    assert.equal((await sharp(Buffer.from(body.afterImage, 'base64')).metadata()).hasAlpha, true);
  });

  it('animated GIF: the first frame, never enlarged', async () => {
    const job = await jobOf('gif');
    const body = await compare(job);
    assert.deepEqual([body.inputWidth, body.inputHeight, body.previewWidth, body.previewHeight], [560, 888, 560, 888]);
    assert.deepEqual([body.outputWidth, body.outputHeight], [560, 888]);
    assert.equal(body.wasResized, false);
  });

  it('universal image (BMP in, JPG out): the decoded input beside the output', async () => {
    const job = await jobOf('universal');
    const body = await compare(job);
    assert.equal(job.output.contentType, 'image/jpeg');
    assert.deepEqual([body.inputWidth, body.inputHeight], [800, 533]);
    assert.deepEqual([body.outputWidth, body.outputHeight], await displayed(await downloaded(job)));
    assert.equal(body.beforeMimeType, 'image/jpeg');
  });

  it('PDF: page 1 rendered before and after, the page size in points', async () => {
    const job = await jobOf('pdf');
    const body = await compare(job);
    assert.deepEqual([body.inputWidth, body.inputHeight, body.outputWidth, body.outputHeight], [612, 792, 612, 792]);
    assert.equal(body.wasResized, false);
    assert.equal(Math.max(body.previewWidth, body.previewHeight), PREVIEW_EDGE);
    assert.deepEqual([body.afterPreviewWidth, body.afterPreviewHeight], [body.previewWidth, body.previewHeight]);
    // A scanned page renders to something other than a blank sheet.
    const stats = await sharp(Buffer.from(body.beforeImage, 'base64')).stats();
    assert.ok(stats.channels[0].stdev > 10, `stdev ${stats.channels[0].stdev}`);
  });

  it('PDF pages: X-Compare-Page and X-Compare-Page-Count, ?page=N, a full-size page for small print', async () => {
    const job = await jobOf('pdf');
    const first = await compareWithHeaders(job);
    assert.equal(first.headers.get('x-compare-page'), '1');
    assert.equal(first.headers.get('x-compare-page-count'), '4');
    const third = await compareWithHeaders(job, '?page=3&size=full');
    assert.equal(third.headers.get('x-compare-page'), '3');
    assert.equal(third.headers.get('x-compare-page-count'), '4');
    assert.equal(Math.max(third.body.previewWidth, third.body.previewHeight), FULL_PAGE_EDGE);
    assert.notEqual(third.body.beforeImage, first.body.beforeImage);
  });

  it('bad compare queries: 400 compare.invalid_query (page past the end, page 0, unknown size)', async () => {
    const job = await jobOf('pdf');
    for (const query of ['?page=5', '?page=0', '?page=x', '?size=huge']) {
      const res = await s.api(`/compress/job/${job.id}/compare${query}`);
      const body = await json(res);
      assert.equal(res.status, 400, query);
      assert.equal(body.error, 'compare.invalid_query', query);
      assert.match(body.detail, query === '?page=5' ? /between 1 and 4/ : query === '?size=huge' ? /size/ : /page/);
    }
  });

  it('DOCX: the largest embedded picture before and after', async () => {
    const job = await jobOf('docx');
    const { body, headers } = await compareWithHeaders(job);
    const largest = await largestPicture(join(CORPUS, KINDS.docx[0]));
    assert.deepEqual([body.inputWidth, body.inputHeight], largest.size);
    assert.equal(headers.get('x-compare-picture'), largest.name, 'the picture shown is named');
    assert.ok(body.outputWidth <= body.inputWidth && body.outputHeight <= body.inputHeight);
    assertAspect(body.outputWidth, body.outputHeight, body.inputWidth, body.inputHeight);
  });
});

describe('compare errors', () => {
  it('404 jobs.not_found and 403 jobs.forbidden', async () => {
    const missing = await s.api('/compress/job/does-not-exist/compare');
    assert.equal(missing.status, 404);
    assert.deepEqual(await json(missing), { error: 'jobs.not_found', detail: null });

    const job = await finishedJob(s, 'gif/file-type-fixture.gif');
    const other = await s.api(`/compress/job/${job.id}/compare`, { key: s.newKey('compare-someone-else') });
    assert.equal(other.status, 403);
    assert.equal((await json(other)).error, 'jobs.forbidden');
  });

  it('409 compare.not_ready for a job that did not succeed', async () => {
    const job = await finishedJob(s, 'bad/truncated.jpg');
    assert.equal(job.status, 'Failed');
    const res = await s.api(`/compress/job/${job.id}/compare`);
    assert.equal(res.status, 409);
    assert.equal((await json(res)).error, 'compare.not_ready');
  });

  it('410 compare.expired once the service clock passes the retention period', async () => {
    const short = await startTestServer({ workers: '1', retentionSeconds: '60' });
    try {
      const job = await finishedJob(short, 'gif/file-type-fixture.gif');
      assert.equal(job.status, 'Succeeded');
      short.clock.reach(Date.parse(job.expiresAt));
      const res = await short.api(`/compress/job/${job.id}/compare`);
      assert.equal(res.status, 410);
      assert.equal((await json(res)).error, 'compare.expired');
    } finally {
      await short.stop();
    }
  });

  it('504 compare.timeout when the previews take longer than the limit', async () => {
    const pool = new CompressorPool(1);
    try {
      const comparer = new Comparer(pool, { timeoutMs: 1, cacheBytes: 1024 * 1024 });
      const pdf = join(CORPUS, 'pdf/derived-photo-heavy-img2pdf.pdf');
      await assert.rejects(comparer.comparison('slow', { inputPath: pdf, inputFormat: 'pdf', outputPath: pdf, outputFormat: 'pdf', size: 'fit', page: 1 }), (err) => {
        assert.ok(err instanceof ApiError);
        assert.equal(err.code, 'compare.timeout');
        assert.equal(err.status, 504);
        return true;
      });
    } finally {
      await pool.close();
    }
  });
});

describe('hostile PDFs', () => {
  /** Submits `data` as `name` for `key`'s account and waits for the job to end. */
  async function finishedUpload(data: Buffer, name: string, key?: string): Promise<Record<string, any>> {
    const form = new FormData();
    form.set('file', new Blob([data]), name);
    const accepted = await json(await s.api('/compress', { method: 'POST', body: form, key }));
    assert.ok(accepted.id, JSON.stringify(accepted));
    return waitForJob(s, accepted.id, undefined, 120_000, key);
  }

  async function failedCompare(job: Record<string, any>, status: number, code: string): Promise<number> {
    const started = Date.now();
    const res = await s.api(`/compress/job/${job.id}/compare`);
    const body = await json(res);
    assert.equal(res.status, status, JSON.stringify(body));
    assert.equal(body.error, code, JSON.stringify(body));
    return Date.now() - started;
  }

  it('a page inflating to 1 GiB is refused before PDFium draws it, a fault inside PDFium drops its instance, failures are cached, and another account\'s PDF compares', { timeout: 300_000 }, async () => {
    const zeros = await bombs.gigabyteOfZeros();
    // One preview thread (2 workers): every render below shares one PDFium instance unless it is dropped.
    const pageBomb = await finishedUpload(bombs.pdfPageStreamBomb(zeros), 'page-bomb.pdf');
    assert.equal(pageBomb.status, 'Succeeded', JSON.stringify(pageBomb.error));
    await failedCompare(pageBomb, 422, 'compare.too_large');
    await failedCompare(pageBomb, 422, 'compare.too_large');

    // An embedded font inflating to 1 GiB passes the page cap and aborts PDFium (out of its 2 GiB heap), twice:
    // a kept instance then read past its bounds for every later document.
    const fontBomb = await finishedUpload(bombs.pdfFontBomb(zeros), 'font-bomb.pdf');
    assert.equal(fontBomb.status, 'Succeeded', JSON.stringify(fontBomb.error));
    await failedCompare(fontBomb, 422, 'compare.unavailable');
    const again = await failedCompare(fontBomb, 422, 'compare.unavailable');
    const fontBomb2 = await finishedUpload(bombs.pdfFontBomb(zeros), 'font-bomb-2.pdf');
    await failedCompare(fontBomb2, 422, 'compare.unavailable');
    console.log(`# font bomb: a cached failure answered in ${again} ms`);

    const neighbourKey = s.newKey('compare-pdf-neighbour');
    const theirs = await finishedUpload(await readFile(join(CORPUS, 'pdf/ocrmypdf-multipage.pdf')), 'theirs.pdf', neighbourKey);
    assert.equal(theirs.status, 'Succeeded');
    const res = await s.api(`/compress/job/${theirs.id}/compare`, { key: neighbourKey });
    const body = await json(res);
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(res.headers.get('x-compare-page-count'), '6');
  });
});

describe('compare under load', () => {
  it('gives each account two places and all accounts a bounded number, past which the answer is 429 compare.busy', () => {
    const limiter = new PreviewLimiter({ perAccount: 2, total: 3 });
    const busy = (account: string, why: RegExp) =>
      assert.throws(() => limiter.enter(account), (err) => err instanceof ApiError && err.code === 'compare.busy' && err.status === 429 && err.headers['Retry-After'] === '5' && why.test(err.detail ?? ''));
    const a1 = limiter.enter('a');
    limiter.enter('a');
    busy('a', /This account already has 2/);
    const b1 = limiter.enter('b');
    busy('c', /as many comparisons as it can/);
    b1();
    b1();
    const c1 = limiter.enter('c');
    busy('b', /as many comparisons as it can/);
    a1();
    c1();
    limiter.enter('a');
    limiter.enter('b');
  });

  it('never lets two accounts take every place: a further place is granted only while one stays free for an account that holds none, and a share shrinks as accounts come', () => {
    const limiter = new PreviewLimiter({ perAccount: 2, total: 4 });
    const busy = (account: string, why: RegExp) => assert.throws(() => limiter.enter(account), (err) => err instanceof ApiError && err.code === 'compare.busy' && why.test(err.detail ?? ''));
    limiter.enter('a');
    limiter.enter('a');
    limiter.enter('b');
    busy('b', /already has 1 comparison being made, its share/);
    limiter.enter('c');
    busy('d', /as many comparisons as it can/);
    const wide = new PreviewLimiter({ perAccount: 2, total: 8 });
    for (const account of ['a', 'a', 'b', 'c', 'd']) wide.enter(account);
    // Four accounts share seven places: one each, so a's second was its share only while fewer came.
    assert.throws(() => wide.enter('b'), (err) => err instanceof ApiError && /share/.test(err.detail ?? ''));
    wide.enter('e');
  });

  it('answers one account\'s flood of comparisons with 429 compare.busy, and another account\'s with its previews', { timeout: 180_000 }, async () => {
    const big = join(CORPUS, 'jpg/phone-IMG_20180725_163423.jpg');
    const neighbourKey = s.newKey('compare-neighbour');
    const [mine, theirs] = await Promise.all([
      finishedJob(s, 'jpg/phone-IMG_20180725_163423.jpg'),
      (async () => {
        const accepted = await json(await s.api('/compress', { method: 'POST', body: await fileForm(big), key: neighbourKey }));
        return waitForJob(s, accepted.id, undefined, 60_000, neighbourKey);
      })(),
    ]);
    assert.equal(mine.status, 'Succeeded');
    assert.equal(theirs.status, 'Succeeded');
    const flood = Array.from({ length: 6 }, () => s.api(`/compress/job/${mine.id}/compare`));
    const neighbour = await s.api(`/compress/job/${theirs.id}/compare`, { key: neighbourKey });
    const answers = await Promise.all(flood);
    const statuses = answers.map((r) => r.status);
    assert.ok(statuses.every((st) => st === 200 || st === 429), String(statuses));
    assert.ok(statuses.includes(200) && statuses.includes(429), String(statuses));
    for (const res of answers) {
      const body = await json(res);
      if (res.status === 429) {
        assert.equal(body.error, 'compare.busy');
        assert.equal(res.headers.get('retry-after'), '5');
      }
    }
    assert.equal(neighbour.status, 200);
    await neighbour.arrayBuffer();
  });
});
