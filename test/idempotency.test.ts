// Idempotency-Key on submissions (issue 29, finding 8): replays, mismatches, requests in flight, invalid keys, restarts.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CORPUS, fileForm, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';

const JPG = join(CORPUS, 'jpg/jpeg420exif.jpg');
const PNG = join(CORPUS, 'png/baiona_alpha.png');

let s: TestServer;
before(async () => {
  s = await startTestServer({ workers: '1' });
});
after(() => s.stop());

let keys = 0;
const freshKey = () => `key-${process.pid}-${++keys}`;

function submit(server: TestServer, key: string | null, form: FormData | (() => Promise<FormData>), opts: { path?: string; apiKey?: string } = {}) {
  return (async () => {
    const body = typeof form === 'function' ? await form() : form;
    return server.api(opts.path ?? '/compress', { method: 'POST', body, key: opts.apiKey, headers: key === null ? {} : { 'idempotency-key': key } });
  })();
}

const credits = async (server: TestServer, apiKey: string) => (await json(await server.api('/compress/entitlements/me', { key: apiKey }))).credits;

describe('Idempotency-Key', () => {
  it('a retry with the same key gets the first job (202, same body) and is charged once, even with no credits left and after the job ended', async () => {
    const apiKey = s.newKey('once', { credits: 1 });
    const key = freshKey();
    const first = await submit(s, key, () => fileForm(JPG), { apiKey });
    assert.equal(first.status, 202);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const accepted = await json(first);
    // The first job holds the account's only credit: a new job would get 402.
    const again = await submit(s, key, () => fileForm(JPG), { apiKey });
    assert.equal(again.status, 202);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await json(again), accepted);
    assert.equal((await waitForJob(s, accepted.id, undefined, 60_000, apiKey)).status, 'Succeeded');
    const late = await submit(s, key, () => fileForm(JPG), { apiKey });
    assert.equal(late.status, 202);
    assert.deepEqual(await json(late), accepted, 'the accepted answer, as it was');
    assert.deepEqual(await credits(s, apiKey), { granted: 1, spent: 1, reserved: 0, available: 0 });
    const other = await submit(s, freshKey(), () => fileForm(JPG), { apiKey });
    assert.equal(other.status, 402, 'a new key is a new job');
  });

  it('without the header every submission is a new job', async () => {
    const [a, b] = await Promise.all([submit(s, null, () => fileForm(JPG)), submit(s, null, () => fileForm(JPG))]);
    assert.equal(a.status, 202);
    assert.equal(b.status, 202);
    assert.notEqual((await json(a)).id, (await json(b)).id);
  });

  it('keys belong to an account: another account’s same key is another key', async () => {
    const key = freshKey();
    const mine = await json(await submit(s, key, () => fileForm(JPG)));
    const theirs = await submit(s, key, () => fileForm(JPG), { apiKey: s.newKey('neighbour', { credits: 10 }) });
    assert.equal(theirs.status, 202);
    assert.notEqual((await json(theirs)).id, mine.id);
  });

  const jpgBytes = () => readFile(JPG);
  const form = (fields: Record<string, string>, bytes: Promise<Buffer>, name = 'photo.jpg') => async () => {
    const f = new FormData();
    for (const [k, v] of Object.entries(fields)) f.set(k, v);
    f.set('file', new Blob([new Uint8Array(await bytes)]), name);
    return f;
  };
  const webhook = { webhookUrl: 'https://hooks.example.com/in', webhookSecret: 'whsec_0123456789abcdef' };
  const changed: [string, { form: () => Promise<FormData>; path?: string } | { json: unknown }][] = [
    ['other file bytes', { form: form({}, jpgBytes().then((b) => Buffer.concat([b, Buffer.from([0])]))) }],
    ['another file name', { form: form({}, jpgBytes(), 'other.jpg') }],
    ['another file', { form: () => fileForm(PNG) }],
    ['options', { form: form({ options: '{"compression":{"mode":"lossless"}}' }, jpgBytes()) }],
    ['webhook fields', { form: form(webhook, jpgBytes()) }],
    ['another webhook secret', { form: form({ ...webhook, webhookSecret: 'whsec_fedcba9876543210' }, jpgBytes()) }],
    ['a dedicated path', { form: form({}, jpgBytes()), path: '/compress/jpg' }],
    ['URL input', { json: { inputUrl: 'https://example.com/photo.jpg', sourceFormat: 'jpg' } }],
  ];
  for (const [what, request] of changed) {
    it(`the same key with ${what} gets 422 request.idempotency_mismatch and no job`, async () => {
      const key = freshKey();
      const original = await submit(s, key, form(what === 'another webhook secret' ? webhook : {}, jpgBytes()));
      assert.equal(original.status, 202);
      const before = await credits(s, s.key);
      const res =
        'json' in request
          ? await s.api('/compress', { method: 'POST', headers: { 'idempotency-key': key, 'content-type': 'application/json' }, body: JSON.stringify(request.json) })
          : await submit(s, key, request.form, { path: request.path });
      assert.equal(res.status, 422);
      assert.equal((await json(res)).error, 'request.idempotency_mismatch');
      const now = await credits(s, s.key);
      assert.equal(now.reserved + now.spent, before.reserved + before.spent, 'nothing more held or charged');
    });
  }

  it('the same request with its fields in another order is the same request', async () => {
    const key = freshKey();
    const a = await json(await submit(s, key, form({ webhookUrl: webhook.webhookUrl, webhookSecret: webhook.webhookSecret }, jpgBytes())));
    const b = await submit(s, key, form({ webhookSecret: webhook.webhookSecret, webhookUrl: webhook.webhookUrl }, jpgBytes()));
    assert.equal(b.status, 202);
    assert.equal((await json(b)).id, a.id);
  });

  const invalid: [string, string][] = [
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a control character', 'a\tb'],
    ['a non-ASCII character', 'caf\u00e9'],
  ];
  for (const [what, key] of invalid) {
    it(`a key that is ${what} gets 400 request.invalid_idempotency_key`, async () => {
      const res = await submit(s, key, () => fileForm(JPG));
      assert.equal(res.status, 400);
      assert.equal((await json(res)).error, 'request.invalid_idempotency_key');
    });
  }

  it('a JSON body 5,000 levels deep with a key is answered as without one (400, not 500), and again the same way', async () => {
    const body = `{"inputUrl":"https://files.example.com/a.jpg","options":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    const send = (key: string | null) => s.api('/compress', { method: 'POST', body, headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) } });
    const key = freshKey();
    for (const res of [await send(null), await send(key), await send(key)]) {
      assert.equal(res.status, 400);
      assert.equal((await json(res)).error, 'url_fetch.missing_source_format');
    }
  });

  it('a key of 255 printable characters is valid', async () => {
    assert.equal((await submit(s, '~'.repeat(255), () => fileForm(JPG))).status, 202);
  });

  it('a second request while the first is still uploading gets 409; concurrent requests make one job', async () => {
    const apiKey = s.newKey('racer', { credits: 100 });
    const key = freshKey();
    const bytes = await readFile(JPG);
    const boundary = 'idempotency-test-boundary';
    const head = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="jpeg420exif.jpg"\r\ncontent-type: image/jpeg\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const slow = request(`${s.url}/compress`, {
      method: 'POST',
      headers: { 'x-service-api-key': apiKey, 'idempotency-key': key, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': head.length + bytes.length + tail.length },
    });
    const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
      slow.on('response', (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      slow.on('error', reject);
    });
    slow.write(head);
    slow.write(bytes.subarray(0, 1000));
    // The first request holds its key once a probe with the key is refused as in progress. The probe
    // is one the server refuses after taking a free key (a wrong content type), so a probe that
    // arrives first never makes a job of its own.
    for (let i = 0; ; i++) {
      const probe = await s.api('/compress', { method: 'POST', key: apiKey, headers: { 'idempotency-key': key, 'content-type': 'text/plain' }, body: 'x' });
      if (probe.status === 409 || i === 100) break;
      assert.equal(probe.status, 400);
      await new Promise((r) => setTimeout(r, 50));
    }
    const meanwhile = await submit(s, key, () => fileForm(JPG), { apiKey });
    assert.equal(meanwhile.status, 409);
    assert.equal((await json(meanwhile)).error, 'request.idempotency_in_progress');
    slow.end(Buffer.concat([bytes.subarray(1000), tail]));
    const first = await answered;
    assert.equal(first.status, 202);
    const id = JSON.parse(first.body).id;
    const replay = await json(await submit(s, key, () => fileForm(JPG), { apiKey }));
    assert.equal(replay.id, id, JSON.stringify(replay));

    const burstKey = freshKey();
    const burst = await Promise.all(Array.from({ length: 6 }, () => submit(s, burstKey, () => fileForm(JPG), { apiKey })));
    assert.ok(burst.every((r) => r.status === 202 || r.status === 409), burst.map((r) => r.status).join());
    const ids = new Set(await Promise.all(burst.filter((r) => r.status === 202).map(async (r) => (await json(r)).id)));
    assert.equal(ids.size, 1, 'every 202 names the same job');
    const held = await credits(s, apiKey);
    assert.equal(held.reserved + held.spent, 2, 'two jobs in all, each charged once');
  });

  it('a refused request leaves its key free for the retry', async () => {
    const key = freshKey();
    const refused = await submit(s, key, form({ options: '{nope' }, jpgBytes()));
    assert.equal(refused.status, 400);
    assert.equal((await submit(s, key, form({}, jpgBytes()))).status, 202);
  });

  it('a deleted job’s key is still remembered: the replay answers its 202, no new job', async () => {
    // Its own account: the fair queue runs its job next, not behind the jobs earlier tests left queued.
    const apiKey = s.newKey('deleted-key', { credits: 5 });
    const key = freshKey();
    const accepted = await json(await submit(s, key, () => fileForm(JPG), { apiKey }));
    await waitForJob(s, accepted.id, undefined, undefined, apiKey);
    assert.equal((await s.api(`/compress/job/${accepted.id}`, { method: 'DELETE', key: apiKey })).status, 200);
    const replay = await submit(s, key, () => fileForm(JPG), { apiKey });
    assert.equal(replay.status, 202);
    assert.deepEqual(await json(replay), accepted);
    assert.equal((await s.api(`/compress/job/${accepted.id}`, { key: apiKey })).status, 404);
  });
});

describe('Idempotency-Key across a restart', () => {
  it('a key bound before a restart answers the same job after it', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'compressd-idem-'));
    try {
      const first = await startTestServer({ workers: '1', dataDir });
      const apiKey = first.newKey('restart', { credits: 5 });
      const accepted = await json(await submit(first, 'survives', () => fileForm(JPG), { apiKey }));
      await first.stop();
      const second = await startTestServer({ workers: '1', dataDir });
      try {
        const replay = await submit(second, 'survives', () => fileForm(JPG), { apiKey });
        assert.equal(replay.status, 202);
        assert.deepEqual(await json(replay), accepted);
        const mismatch = await submit(second, 'survives', () => fileForm(PNG), { apiKey });
        assert.equal(mismatch.status, 422);
        const c = await credits(second, apiKey);
        assert.equal(c.reserved + c.spent, 1);
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
