// Spec: "Submit a job" — every error of a submission, credits, and that refused uploads leave nothing behind.
import assert from 'node:assert/strict';
import { readdir, readFile, statfs, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { waitUntil } from './helpers/poll.ts';
import { CORPUS, fileForm, json, startTestServer, waitForJob, type TestServer } from './helpers/server.ts';

let s: TestServer;
const JPG = join(CORPUS, 'jpg/jpeg420exif.jpg');
const PNG = join(CORPUS, 'png/baiona_alpha.png');

before(async () => {
  s = await startTestServer({ workers: '1' });
});
after(() => s.stop());

async function spoolIsEmpty() {
  const ids = await readdir(join(s.dataDir, 'spool')).catch(() => []);
  const jobs = new Set<string>();
  for (const id of ids) if ((await s.api(`/compress/job/${id}`)).status === 200) jobs.add(id);
  assert.deepEqual(ids.filter((id) => !jobs.has(id)), [], 'a refused submission left files in the spool');
}

type Case = [name: string, build: () => Promise<RequestInit & { path?: string }>, status: number, code: string, check?: (body: any) => void];

const empty = join(tmpdir(), 'compressd-empty.jpg');
const multipart = (fields: Record<string, string>, files: [string, Blob, string][] = []) => {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  for (const [field, blob, name] of files) form.append(field, blob, name);
  return { method: 'POST', body: form };
};
const jsonBody = (body: unknown) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const cases: Case[] = [
  ['a text/plain body', async () => ({ method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' }), 400, 'request.invalid_content_type'],
  ['no content type', async () => ({ method: 'POST' }), 400, 'request.invalid_content_type'],
  ['a form without a file', async () => multipart({ options: '{}' }), 400, 'request.no_files'],
  ['an empty file', async () => ({ method: 'POST', body: await fileForm(empty) }), 400, 'request.empty_file'],
  [
    'two files',
    async () => multipart({}, [['file', new Blob([new Uint8Array(10)]), 'a.jpg'], ['file', new Blob([new Uint8Array(10)]), 'b.jpg']]),
    400,
    'request.multiple_files',
  ],
  // The part's name says what it is, not its filename attribute: `curl -F options=@o.json` sends options as a file part.
  ['a file under another field name than "file"', async () => multipart({}, [['image', new Blob([await readFile(JPG)]), 'photo.jpg']]), 400, 'request.no_files'],
  ['options sent as a file part that are not JSON', async () => multipart({}, [['file', new Blob([await readFile(JPG)]), 'photo.jpg'], ['options', new Blob(['{nope']), 'options.json']]), 400, 'compress.invalid_options'],
  ['options sent as a file part before the file, over 64 KB', async () => multipart({}, [['options', new Blob(['{' + ' '.repeat(70 * 1024) + '}']), 'options.json'], ['file', new Blob([await readFile(JPG)]), 'photo.jpg']]), 400, 'request.invalid_body'],
  [
    'an unsupported extension',
    async () => multipart({}, [['file', new Blob(['MZ']), 'setup.exe']]),
    400,
    'compress.unsupported_format',
    (b) => {
      assert.ok(b.supportedFormats.includes('.jpg') && b.supportedFormats.includes('.cr2'));
      assert.ok(b.supportedFormats.every((f: string) => f.startsWith('.')));
    },
  ],
  ['a file name without extension', async () => multipart({}, [['file', new Blob(['x']), 'README']]), 400, 'request.invalid_extension'],
  ['options that are not JSON', async () => ({ method: 'POST', body: await fileForm(JPG, { options: '{nope' }) }), 400, 'compress.invalid_options'],
  ['an unknown option', async () => ({ method: 'POST', body: await fileForm(JPG, { options: '{"quality":80}' }) }), 400, 'compress.invalid_options'],
  [
    'a PNG-only option on a JPG',
    async () => ({ method: 'POST', body: await fileForm(JPG, { options: '{"compression":{"mode":"lossy"}}' }) }),
    400,
    'compress.invalid_options',
  ],
  [
    'a percentage over 99',
    async () => ({ method: 'POST', body: await fileForm(JPG, { options: '{"resize":{"enabled":true,"mode":"percentage","value":150}}' }) }),
    400,
    'compress.invalid_options',
    (b) => assert.equal(b.path, 'resize.value'),
  ],
  ['a pixel value over 10000', async () => ({ method: 'POST', body: await fileForm(JPG, { options: '{"resize":{"mode":"pixels","value":10001}}' }) }), 400, 'compress.invalid_options'],
  [
    'a resize value without its mode (pixels or percent: never guessed, never ignored)',
    async () => ({ method: 'POST', body: await fileForm(JPG, { options: '{"resize":{"enabled":true,"value":800}}' }) }),
    400,
    'compress.invalid_options',
    (b) => assert.equal(b.path, 'resize.mode'),
  ],
  ['a wrong schema version', async () => ({ method: 'POST', body: await fileForm(JPG, { options: '{"_schemaVersion":2}' }) }), 400, 'compress.invalid_options'],
  [
    'an http webhook',
    async () => ({ method: 'POST', body: await fileForm(JPG, { webhookUrl: 'http://hooks.example.com/x', webhookSecret: 'a'.repeat(20) }) }),
    400,
    'compress.invalid_webhook',
  ],
  [
    'a short webhook secret',
    async () => ({ method: 'POST', body: await fileForm(JPG, { webhookUrl: 'https://hooks.example.com/x', webhookSecret: 'short' }) }),
    400,
    'compress.invalid_webhook',
  ],
  [
    'a webhook without secret',
    async () => ({ method: 'POST', body: await fileForm(JPG, { webhookUrl: 'https://hooks.example.com/x' }) }),
    400,
    'compress.invalid_webhook',
  ],
  [
    'a PNG on the JPG path',
    async () => ({ path: '/compress/jpg', method: 'POST', body: await fileForm(PNG) }),
    400,
    'compress.jpg.validation.unsupported_format',
    (b) => assert.deepEqual(b.supportedFormats, ['.jpg', '.jpeg']),
  ],
  ['a JPG on the PDF path', async () => ({ path: '/compress/pdf', method: 'POST', body: await fileForm(JPG) }), 400, 'compress.pdf.validation.unsupported_format'],
  ['a PDF on the office path', async () => ({ path: '/compress/office', method: 'POST', body: await fileForm(join(CORPUS, 'bad/actually-pdf.jpg'), {}, 'x.pdf') }), 400, 'compress.office.validation.unsupported_format'],
  [
    'both file and inputUrl',
    async () => ({ method: 'POST', body: await fileForm(JPG, { inputUrl: 'https://files.example.com/a.jpg', sourceFormat: 'jpg' }) }),
    400,
    'url_fetch.mutually_exclusive',
  ],
  ['a JSON body with outputUrl', async () => jsonBody({ inputUrl: 'https://a.example/x.jpg', sourceFormat: 'jpg', outputUrl: 'https://b.example/' }), 400, 'url_fetch.output_url_reserved'],
  ['a JSON body without sourceFormat', async () => jsonBody({ inputUrl: 'https://a.example/x.jpg' }), 400, 'url_fetch.missing_source_format'],
  ['a JSON body with an unsupported sourceFormat', async () => jsonBody({ inputUrl: 'https://a.example/x', sourceFormat: 'exe' }), 400, 'compress.unsupported_format'],
  ['a JSON body with an http URL', async () => jsonBody({ inputUrl: 'http://a.example/x.jpg', sourceFormat: 'jpg' }), 400, 'url_fetch.invalid_scheme'],
  ['a JSON body with a malformed URL', async () => jsonBody({ inputUrl: 'not a url', sourceFormat: 'jpg' }), 400, 'url_fetch.invalid_url'],
  ['malformed JSON', async () => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' }), 400, 'request.invalid_body'],
];

describe('POST /compress refusals', () => {
  before(() => writeFile(empty, ''));
  for (const [name, build, status, code, check] of cases) {
    it(`answers ${status} ${code} for ${name}`, async () => {
      const { path = '/compress', ...init } = await build();
      const res = await s.api(path, init);
      const body = await json(res);
      assert.equal(res.status, status, JSON.stringify(body));
      assert.equal(body.error, code);
      assert.equal(typeof body.detail, 'string');
      if (code.startsWith('url_fetch.')) assert.equal(typeof body.isRetryable, 'boolean');
      check?.(body);
    });
  }
  it('leaves no file behind for any refused submission', spoolIsEmpty);

  it('refuses URL input with a guest key (403)', async () => {
    const key = s.newKey('guest-acct', { guest: true });
    const res = await s.api('/compress', { ...jsonBody({ inputUrl: 'https://a.example/x.jpg', sourceFormat: 'jpg' }), key });
    assert.equal(res.status, 403);
    assert.equal((await json(res)).error, 'url_fetch.guest_not_allowed');
  });
});

describe('size limit', () => {
  it('answers 413 request.file_too_large with megabytes, while streaming, and keeps nothing', async () => {
    const small = await startTestServer({ maxFileSizeBytes: String(2 * 1024 * 1024) });
    try {
      const res = await small.api('/compress', { method: 'POST', body: await fileForm(JPG.replace('jpeg420exif', 'phone-IMG_20180725_163423')) });
      assert.equal(res.status, 413);
      const body = await json(res);
      assert.equal(body.error, 'request.file_too_large');
      assert.equal(body.megabytes, 2);
      assert.deepEqual(await readdir(join(small.dataDir, 'spool')), []);
    } finally {
      await small.stop();
    }
  });
});

describe('stalled upload', () => {
  /** Sends the headers and half of a multipart body, then goes quiet without closing; resolves with what the server wrote. */
  const stall = (server: TestServer, body: Buffer) =>
    new Promise<{ reply: string; waitedMs: number }>((resolve, reject) => {
      const started = Date.now();
      const boundary = 'stalled';
      const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="photo.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`);
      const total = head.length + body.length + `\r\n--${boundary}--\r\n`.length;
      const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
      let reply = '';
      socket.on('data', (d) => (reply += d));
      socket.on('error', reject);
      socket.on('close', () => resolve({ reply, waitedMs: Date.now() - started }));
      socket.write(`POST /compress HTTP/1.1\r\nHost: x\r\nX-Service-Api-Key: ${server.key}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${total}\r\n\r\n`);
      socket.write(Buffer.concat([head, body.subarray(0, body.length >> 1)]));
    });

  it('answers 408 request.timeout once the body has been silent for --body-idle-seconds, closes the socket and keeps nothing', { timeout: 30_000 }, async () => {
    const quick = await startTestServer({ bodyIdleSeconds: '0.5' });
    try {
      const { reply, waitedMs } = await stall(quick, await readFile(JPG));
      assert.match(reply, /^HTTP\/1\.1 408 /);
      assert.equal(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)).error, 'request.timeout');
      assert.ok(waitedMs >= 500, `closed after ${waitedMs} ms`);
      assert.equal((await quick.api('/compress/entitlements/me').then(json)).credits.reserved, 0);
      // The app hears of the ended body after the socket closed; its clean-up follows within moments.
      const spool = () => readdir(join(quick.dataDir, 'spool')).catch(() => []);
      await waitUntil('the spool to empty', async () => (await spool()).length === 0, { timeoutMs: 2_000, intervalMs: 50 }).catch(() => undefined);
      assert.deepEqual(await spool(), []);
      const res = await quick.api('/compress', { method: 'POST', body: await fileForm(JPG) });
      assert.equal(res.status, 202, 'the server still takes uploads');
    } finally {
      await quick.stop();
    }
  });
});

describe('credits', () => {
  it('answers 402 with required and available amounts', async () => {
    const key = s.newKey('broke', { credits: 0 });
    const res = await s.api('/compress', { method: 'POST', body: await fileForm(JPG), key });
    assert.equal(res.status, 402);
    const body = await json(res);
    assert.equal(body.error, 'entitlements.insufficient_credits');
    assert.match(body.detail, /needs 1 credits; 0 available/);
    await spoolIsEmpty();
  });

  it('never overspends under concurrent submissions', async () => {
    const key = s.newKey('three-credits', { credits: 3 });
    const responses = await Promise.all(Array.from({ length: 8 }, async () => s.api('/compress', { method: 'POST', body: await fileForm(JPG), key })));
    const statuses = responses.map((r) => r.status);
    assert.ok(statuses.every((r) => r === 202 || r === 402), String(statuses));
    const accepted = await Promise.all(responses.filter((r) => r.status === 202).map((r) => json(r)));
    const ended = await Promise.all(accepted.map((a) => waitForJob(s, a.id, undefined, 60_000, key)));
    const succeeded = ended.filter((j) => j.status === 'Succeeded').length;
    // A failed job releases its credit, which a later submission may then use: never more than 3 held at once.
    assert.ok(accepted.length >= 3 && accepted.length - (ended.length - succeeded) <= 3, `${accepted.length} accepted, ${succeeded} succeeded`);
    const me = await json(await s.api('/compress/entitlements/me', { key }));
    assert.deepEqual(me.credits, { granted: 3, spent: succeeded, reserved: 0, available: 3 - succeeded });
  });
});

describe('accepted submission', () => {
  it('answers 202 with id, Queued, the name without extension and the format', async () => {
    const res = await s.api('/compress', { method: 'POST', body: await fileForm(JPG, { options: JSON.stringify({ _schemaVersion: 1, resize: { enabled: false } }) }, 'holiday photo.JPG') });
    assert.equal(res.status, 202);
    const body = await json(res);
    assert.equal(typeof body.id, 'string');
    assert.equal(body.status, 'Queued');
    assert.equal(body.fileName, 'holiday photo');
    assert.equal(body.format, 'jpg');
  });

  it('reads a text field sent as a file part as that field (curl -F options=@options.json): the options apply', async () => {
    const options = JSON.stringify({ resize: { enabled: true, mode: 'pixels', preset: 'custom', value: 64 } });
    const res = await s.api('/compress', { method: 'POST', body: multipart({}, [['options', new Blob([options]), 'options.json'], ['file', new Blob([await readFile(JPG)]), 'photo.jpg']]).body });
    const body = await json(res);
    assert.equal(res.status, 202, JSON.stringify(body));
    assert.equal(body.fileName, 'photo');
    assert.equal((await waitForJob(s, body.id)).status, 'Succeeded');
    const output = Buffer.from(await (await s.api(`/compress/job/${body.id}/download`)).arrayBuffer());
    const { width, height } = await sharp(output).metadata();
    assert.equal(Math.max(width!, height!), 64);
  });

  it('never uses the client file name as a path', async () => {
    const res = await s.api('/compress', { method: 'POST', body: await fileForm(JPG, {}, '../../../../tmp/evil.jpg') });
    assert.equal(res.status, 202);
    const body = await json(res);
    assert.equal(body.fileName, 'evil');
    assert.deepEqual(await readdir(join(s.dataDir, 'spool', body.id)).then((f) => f.includes('input')), true);
  });
});

describe('UTF-8 file names', () => {
  /** A multipart body written by hand, so the Content-Disposition parameter is exactly `disposition`. */
  const rawForm = async (disposition: string) => {
    const boundary = 'utf8names';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; ${disposition}\r\nContent-Type: image/jpeg\r\n\r\n`, 'utf8'),
      await readFile(JPG),
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    return { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body };
  };
  const cases: [string, () => Promise<RequestInit>][] = [
    ['raw UTF-8 filename (what browsers and fetch send)', async () => ({ method: 'POST', body: await fileForm(JPG, {}, 'ünï café.jpg') })],
    ['RFC 5987 filename*', () => rawForm(`filename*=UTF-8''%C3%BCn%C3%AF%20caf%C3%A9.jpg`)],
  ];
  for (const [name, build] of cases) {
    it(`keeps ${name} in the job and the download's Content-Disposition`, async () => {
      const res = await s.api('/compress', await build());
      assert.equal(res.status, 202);
      const accepted = await json(res);
      assert.equal(accepted.fileName, 'ünï café');
      assert.equal((await waitForJob(s, accepted.id)).status, 'Succeeded');
      const download = await s.api(`/compress/job/${accepted.id}/download`);
      await download.arrayBuffer();
      const disposition = download.headers.get('content-disposition') ?? '';
      assert.match(disposition, /filename\*=UTF-8''%C3%BCn%C3%AF%20caf%C3%A9\.jpg/, disposition);
    });
  }
});

describe('before the body', () => {
  /**
   * Opens an upload declaring `length` bytes (null: chunked, no length) and sends its headers and,
   * with `start`, the file part's head and a first kilobyte, then with `trickleMs` one more byte
   * that often (a client too slow to ever finish); the body is never finished.
   */
  const openUpload = (server: TestServer, key: string, length: number | null, start = false, trickleMs = 0) => {
    const boundary = 'early';
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    socket.on('error', () => {});
    let raw = '';
    socket.on('data', (d) => (raw += d));
    /** The whole answer, once it has arrived. */
    const reply = async () => {
      for (let i = 0; i < 200; i++) {
        const end = raw.indexOf('\r\n\r\n');
        if (end >= 0) {
          const headers = raw.slice(0, end);
          const bodyLength = Number(/content-length: (\d+)/i.exec(headers)?.[1] ?? 0);
          if (raw.length - end - 4 >= bodyLength) return { status: Number(headers.split(' ')[1]), headers, body: JSON.parse(raw.slice(end + 4, end + 4 + bodyLength)) as Record<string, unknown> };
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('no answer within 20 s: the server waits for the body');
    };
    const framing = length === null ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`;
    const send = (text: string) => socket.write(length === null ? `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n` : text);
    socket.write(`POST /compress HTTP/1.1\r\nHost: x\r\nX-Service-Api-Key: ${key}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\n${framing}\r\n\r\n`);
    if (start) send(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jpg"\r\nContent-Type: image/jpeg\r\n\r\n${'x'.repeat(1024)}`);
    const trickle = trickleMs > 0 ? setInterval(() => !socket.destroyed && send('x'), trickleMs) : undefined;
    socket.on('close', () => clearInterval(trickle));
    return {
      reply,
      close: () => {
        clearInterval(trickle);
        socket.destroy();
      },
    };
  };
  const spooled = async (server: TestServer) => (await readdir(join(server.dataDir, 'spool')).catch(() => [])).length;
  const withinAMinute = { timeoutMs: 60_000 };

  it('answers 402 to an account that cannot pay before a byte of the body is sent', async () => {
    const key = s.newKey('penniless', { credits: 0 });
    const before = await spooled(s);
    const upload = openUpload(s, key, 30 * 1024 * 1024);
    try {
      const { status, body } = await upload.reply();
      assert.equal(status, 402);
      assert.equal(body.error, 'entitlements.insufficient_credits');
      assert.deepEqual([body.required, body.available], [1, 0]);
      assert.equal(await spooled(s), before);
    } finally {
      upload.close();
    }
  });

  it('counts uploads in progress as open jobs: the 19th is refused with 429 before its body, and places come back when they are abandoned', { timeout: 120_000 }, async () => {
    const busy = await startTestServer({ workers: '1' });
    const uploads: ReturnType<typeof openUpload>[] = [];
    try {
      const key = busy.newKey('eager', { credits: 100 });
      for (let i = 0; i < 18; i++) uploads.push(openUpload(busy, key, 10 * 1024 * 1024, true));
      await waitUntil('18 uploads streaming to the spool', async () => (await spooled(busy)) === 18, withinAMinute);
      const extra = openUpload(busy, key, 10 * 1024 * 1024);
      const { status, headers, body } = await extra.reply();
      extra.close();
      assert.equal(status, 429);
      assert.equal(body.error, 'queue.limit_exceeded');
      assert.match(headers, /retry-after: \d+/i);
      assert.equal(await spooled(busy), 18);
      assert.equal((await busy.api('/compress', { method: 'POST', body: await fileForm(JPG) })).status, 202, 'another account is not held up');

      for (const upload of uploads) upload.close();
      await waitUntil('abandoned uploads cleaned up', async () => (await spooled(busy)) === 1, withinAMinute);
      assert.equal((await busy.api('/compress', { method: 'POST', body: await fileForm(JPG), key })).status, 202);
    } finally {
      for (const upload of uploads) upload.close();
      await busy.stop();
    }
  });

  /** A server with 4 GiB of room above its free-space threshold, on whatever volume the data dir is. */
  const tightServer = async (settings: Record<string, string> = {}) => {
    const { bavail, bsize } = await statfs(tmpdir());
    return startTestServer({ minFreeDiskBytes: String(bavail * bsize - 4 * GiB), maxFileSizeBytes: String(8 * GiB), ...settings });
  };
  const GiB = 1024 ** 3;

  it('holds free space in steps as bytes arrive: a declared length beyond the room is 503 at once, slow uploads hold a step each, and another account gets in', { timeout: 120_000 }, async () => {
    // One account's uploads may hold 0.5 % of the 4 GiB room (about 20 MB): two steps of 8 MB.
    const tight = await tightServer({ accountDiskShare: '0.005' });
    const uploads: ReturnType<typeof openUpload>[] = [];
    try {
      const hoarder = tight.newKey('hoarder', { credits: 100 });
      // Chunked, so no length is declared: before, each held the whole 8 GiB size limit.
      for (let i = 0; i < 2; i++) uploads.push(openUpload(tight, hoarder, null, true, 500));
      await waitUntil('two slow uploads streaming', async () => (await spooled(tight)) === 2, withinAMinute);
      const third = openUpload(tight, hoarder, null, true);
      uploads.push(third);
      const refused = await third.reply();
      assert.equal(refused.status, 503);
      assert.equal(refused.body.error, 'server.insufficient_storage');
      assert.match(String(refused.body.detail), /share/);
      assert.doesNotMatch(String(refused.body.detail), /\d/, 'no figures to aim at');
      assert.equal((await tight.api('/compress', { method: 'POST', body: await fileForm(JPG) })).status, 202, "another account's small upload gets in");

      const huge = openUpload(tight, tight.key, 5 * GiB);
      uploads.push(huge);
      const { status, headers, body } = await huge.reply();
      assert.equal(status, 503, 'a declared length that does not fit the room is refused before its body');
      assert.equal(body.error, 'server.insufficient_storage');
      assert.match(headers, /retry-after: \d+/i);
      const big = openUpload(tight, tight.key, 3 * GiB, true);
      uploads.push(big);
      await waitUntil('a 3 GiB upload streaming beside them', async () => (await spooled(tight)) === 4, withinAMinute);
    } finally {
      for (const upload of uploads) upload.close();
      await tight.stop();
    }
  });

  it('cuts a body that arrives slower than --body-min-bytes-per-second with 408 and gives its disk space back', { timeout: 120_000 }, async () => {
    const tight = await tightServer({ accountDiskShare: '0.005', bodyIdleSeconds: '1', bodyMinBytesPerSecond: '1000' });
    const uploads: ReturnType<typeof openUpload>[] = [];
    try {
      // A byte every 100 ms never leaves the body silent for a second, but averages 10 bytes a second.
      for (let i = 0; i < 2; i++) uploads.push(openUpload(tight, tight.key, 10 * 1024 * 1024, true, 100));
      for (const upload of uploads) {
        const { status, body } = await upload.reply();
        assert.equal(status, 408);
        assert.equal(body.error, 'request.timeout');
        assert.match(String(body.detail), /slower than 1000 bytes per second/);
      }
      await waitUntil('the cut uploads cleaned up', async () => (await spooled(tight)) === 0, withinAMinute);
      assert.equal((await tight.api('/compress/entitlements/me').then(json)).credits.reserved, 0);
      // Their steps are free again: the account's share has room for two more.
      for (let i = 0; i < 2; i++) uploads.push(openUpload(tight, tight.key, null, true));
      await waitUntil('two new uploads streaming', async () => (await spooled(tight)) === 2, withinAMinute);
    } finally {
      for (const upload of uploads) upload.close();
      await tight.stop();
    }
  });
});
