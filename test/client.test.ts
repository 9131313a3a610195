import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, createReadStream, existsSync, mkdirSync, mkdtempSync, openAsBlob, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { CompressdClient, CompressdError, JobFailedError, verifyWebhook } from '../clients/typescript/src/index.ts';
import { TYPES_FILE, typesOf } from '../clients/typescript/scripts/generate.ts';
import { sign } from '../src/webhooks/sign.ts';
import { CORPUS, fileForm, startTestServer, type TestServer } from './helpers/server.ts';

/** The TypeScript client (clients/typescript) against a real server on loopback. */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLIENT_DIR = join(ROOT, 'clients/typescript');
const JPG = join(CORPUS, 'jpg/jpeg420exif.jpg');
const PNG = join(CORPUS, 'png/density_plot.png');
const PHOTO = join(CORPUS, 'jpg/jpeg420exif.jpg');
const PDF = join(CORPUS, 'pdf/ocrmypdf-multipage.pdf');

let s: TestServer;
let client: CompressdClient;
const work = mkdtempSync(join(tmpdir(), 'compressd-client-'));

before(async () => {
  s = await startTestServer({ workers: '1' });
  client = new CompressdClient({ baseUrl: s.url, apiKey: s.key, retry: { baseDelayMs: 200 } });
});
after(async () => {
  await s.stop();
  rmSync(work, { recursive: true, force: true });
});

async function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<void> {
  await promisify(execFile)(command, args, { cwd, env: { ...process.env, ...env } }).catch((err: Error & { stdout?: string; stderr?: string }) => {
    throw new Error(`${command} ${args.join(' ')}: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  });
}

async function rejection(p: Promise<unknown>): Promise<CompressdError> {
  const err = await p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof CompressdError, `not a CompressdError: ${String(err)}`);
  return err;
}

describe('generated types', () => {
  test('src/openapi.ts is what openapi-typescript makes of the served /openapi.json (npm run client:types regenerates it)', async () => {
    const document = (await (await s.api('/openapi.json', { key: null })).json()) as object;
    assert.equal(readFileSync(TYPES_FILE, 'utf8'), await typesOf(document), 'the committed client types are stale: run npm run client:types');
  });

  test('the answers the client reads match the document\'s response schemas', async () => {
    const document = (await (await s.api('/openapi.json', { key: null })).json()) as object;
    const ajv = new Ajv2020({ strict: false, validateFormats: false }).addSchema(document, 'doc');
    const check = (name: string, value: unknown) => assert.ok(ajv.validate({ $ref: `doc#/components/schemas/${name}` }, value), `${name}: ${ajv.errorsText()}`);
    const job = await client.compress(JPG);
    check('JobAccepted', job.accepted);
    const done = await job.wait();
    check('JobStatus', done);
    check('CostEstimate', await client.estimate('jpg', { fileSizeMb: 2.5 }));
    check('Entitlements', await client.entitlements());
    check('Compressors', await client.compressors());
    check('JobDeleted', await (await s.api(`/compress/job/${job.id}`, { method: 'DELETE' })).json());
  });
});

describe('compress, wait, download', () => {
  test('a file path: waits for Succeeded, downloads to a file, the entitlements show the charge', async () => {
    const before = await client.entitlements();
    const job = await client.compress(JPG);
    assert.equal(job.accepted?.status, 'Queued');
    assert.equal(job.accepted?.format, 'jpg');
    const seen: string[] = [];
    const done = await job.wait({ onProgress: (st) => seen.push(st.status) });
    assert.equal(done.status, 'Succeeded');
    assert.equal(seen.at(-1), 'Succeeded');
    const out = join(work, 'out.jpg');
    assert.equal(await job.download(out), out);
    assert.equal(statSync(out).size, done.metrics.outputBytes);
    assert.ok(done.metrics.outputBytes < statSync(JPG).size);
    const afterwards = await client.entitlements();
    assert.equal(afterwards.balance, before.balance - done.metrics.creditCost);
  });

  test('a Blob, bytes, a Node stream and a web stream are uploaded; options reach the compressor', async () => {
    const png = readFileSync(PNG);
    const inputs = [
      client.compress(await openAsBlob(PNG), { fileName: 'blob.png' }),
      client.compress(new Uint8Array(png), { fileName: 'bytes.png' }),
      client.compress(createReadStream(PNG), { fileName: 'node-stream.png' }),
      client.compress(Readable.toWeb(createReadStream(PNG)) as ReadableStream<Uint8Array>, { fileName: 'web-stream.png' }),
    ];
    const jobs = await Promise.all(inputs);
    const done = await Promise.all(jobs.map((j) => j.wait()));
    assert.deepEqual(done.map((d) => d.output.fileName), ['blob.png', 'bytes.png', 'node-stream.png', 'web-stream.png']);
    for (const d of done) assert.equal(d.metrics.inputBytes, png.length);
    for (const d of done) assert.equal(d.metrics.outputBytes, done[0].metrics.outputBytes, `${d.output.fileName} compresses as the same file from a Blob`);
    const [plain, resized] = await Promise.all([client.compress(PHOTO), client.compress(PHOTO, { options: { resize: { enabled: true, mode: 'pixels', value: 400 } } })]);
    const [plainDone, resizedDone] = await Promise.all([plain.wait(), resized.wait()]);
    assert.ok(resizedDone.metrics.outputBytes < plainDone.metrics.outputBytes / 2, 'the resize option reached the compressor');

    const chunks: Buffer[] = [];
    await jobs[0].download(new Writable({ write: (c, _e, cb) => (chunks.push(c), cb()) }));
    assert.equal(Buffer.concat(chunks).length, done[0].metrics.outputBytes);
    const web = await jobs[1].download();
    assert.equal((await new Response(web).arrayBuffer()).byteLength, done[1].metrics.outputBytes);
  });

  test('cancel() a queued job: wait() rejects with client.job_canceled; delete() removes it', async () => {
    const slow = await client.compress(PDF);
    const queued = await client.compress(PDF);
    const canceled = await queued.cancel();
    assert.equal(canceled.status, 'Canceled');
    assert.equal((await rejection(queued.wait())).code, 'client.job_canceled');
    assert.equal((await rejection(queued.cancel())).code, 'jobs.not_cancellable');
    await queued.delete();
    const gone = await rejection(queued.status());
    assert.equal(gone.code, 'jobs.not_found');
    assert.equal(gone.status, 404);
    await slow.cancel().catch(() => undefined);
  });

  test('a job that fails: wait() rejects with JobFailedError carrying the job\'s error code', async () => {
    const job = await client.compress(join(CORPUS, 'bad/huge-dimensions.png'));
    const err = await rejection(job.wait());
    assert.ok(err instanceof JobFailedError);
    assert.match(err.code, /^[a-z_]+(\.[a-z_{}]+)+$/);
    assert.equal(err.job.status, 'Failed');
    assert.equal(err.job.error?.code, err.code);
  });
});

describe('discovery', () => {
  test('estimate() and its typed error', async () => {
    const estimate = await client.estimate('pdf', { fileSizeBytes: 3 * 1024 * 1024 });
    assert.equal(estimate.job, 'document.pdf-compress');
    assert.equal(estimate.inputs.fileSizeBytes, 3 * 1024 * 1024);
    assert.ok(estimate.estimatedCredits >= estimate.costing.baseCost);
    const err = await rejection(client.estimate('xyz'));
    assert.equal(err.code, 'estimate.unsupported_format');
    assert.ok(Array.isArray(err.body.supportedFormats));
  });

  test('compressors() lists the catalog for this key', async () => {
    const listing = await client.compressors();
    assert.ok(listing.compressors.some((c) => c.job === 'image.jpg-compress' && c.inputFormats.includes('jpg')));
  });
});

describe('errors are values with the spec\'s code', () => {
  const cases: [string, () => Promise<unknown>, string, number | null][] = [
    ['a bad key', () => new CompressdClient({ baseUrl: s.url, apiKey: 'nope' }).entitlements(), 'api_key.invalid_or_ip_not_allowed', 401],
    ['an unknown job', () => client.job('j_unknown').status(), 'jobs.not_found', 404],
    ['an unsupported extension', () => client.compress(new Uint8Array([1, 2, 3]), { fileName: 'notes.txt' }), 'compress.unsupported_format', 400],
    ['URL input to a private address (JSON body)', () => client.compress('https://127.0.0.1/photo.jpg', { sourceFormat: 'jpg' }), 'url_fetch.private_ip', 400],
    ['bytes without a file name', () => client.compress(new Uint8Array([1])), 'client.invalid_input', null],
    ['an unreachable server', () => new CompressdClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', retry: { retries: 1, baseDelayMs: 10 } }).entitlements(), 'client.network', null],
    ['a local file that does not exist', () => client.compress(join(work, 'no-such-photo.jpg')), 'client.invalid_input', null],
    ['a directory given as a file', () => client.compress(work), 'client.invalid_input', null],
    ['no API key at all', async () => new CompressdClient({ baseUrl: s.url, apiKey: '' }), 'client.invalid_input', null],
  ];
  for (const [name, call, code, status] of cases) {
    test(name, async () => {
      const err = await rejection(call());
      assert.equal(err.code, code);
      assert.equal(err.status, status);
    });
  }
});

describe('what an error tells', () => {
  test('a missing local file: the error names the path', async () => {
    const path = join(work, 'no-such-photo.jpg');
    const err = await rejection(client.compress(path));
    assert.ok(err.detail?.includes(path), err.message);
  });

  test('an error answer carries the server\'s X-Request-Id', async () => {
    const ids: (string | null)[] = [];
    const c = new CompressdClient({ baseUrl: s.url, apiKey: s.key, fetch: async (input, init) => {
      const res = await fetch(input, init);
      ids.push(res.headers.get('x-request-id'));
      return res;
    } });
    const err = await rejection(c.job('j_unknown').status());
    assert.equal(err.code, 'jobs.not_found');
    assert.ok(err.requestId, 'the error has a request id');
    assert.deepEqual(ids, [err.requestId]);
  });
});

describe('timeouts', () => {
  test('a server down (a closed loopback port) fails fast: one retry of the refused connection, not the whole back-off', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    let attempts = 0;
    const c = new CompressdClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k', fetch: (input, init) => (attempts++, fetch(input, init)) });
    const started = Date.now();
    const err = await rejection(c.compress(JPG));
    assert.equal(err.code, 'client.network');
    assert.match(err.detail ?? '', /ECONNREFUSED/);
    assert.equal(attempts, 2);
    assert.ok(Date.now() - started < 10_000, `failed after ${Date.now() - started} ms, not after the minute of back-off`);
  });

  test('a server that accepts and never answers: client.timeout after the per-request timeout, not retried', async () => {
    const sockets: Socket[] = [];
    let requests = 0;
    const silent = createServer((socket) => {
      sockets.push(socket);
      socket.once('data', (head) => void (/^[A-Z]+ \//.test(head.toString('latin1')) && requests++));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const c = new CompressdClient({ baseUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, apiKey: 'k', timeoutMs: 300 });
      for (const call of [() => c.entitlements(), () => c.compress(JPG)]) {
        const before = requests;
        const err = await rejection(call());
        assert.equal(err.code, 'client.timeout');
        assert.match(err.detail ?? '', /no progress for 300 ms/);
        assert.equal(requests - before, 1, 'a timed-out attempt is not repeated');
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  test('wait({ timeoutMs }) waits the whole timeout before giving up (the last poll is at the deadline)', async () => {
    const busy = await client.compress(PDF);
    const queued = await client.compress(PDF);
    try {
      for (const timeoutMs of [200, 1000]) {
        const started = performance.now();
        const err = await rejection(queued.wait({ timeoutMs }));
        const elapsed = performance.now() - started;
        assert.equal(err.code, 'client.timeout');
        assert.match(err.detail ?? '', new RegExp(`after ${timeoutMs} ms`));
        assert.ok(elapsed >= timeoutMs, `gave up after ${elapsed.toFixed(0)} ms of ${timeoutMs}`);
      }
    } finally {
      await queued.cancel().catch(() => undefined);
      await busy.cancel().catch(() => undefined);
    }
  });

  test('wait() gives up after the client\'s waitTimeoutMs when the call sets none', async () => {
    const c = new CompressdClient({ baseUrl: s.url, apiKey: s.key, waitTimeoutMs: 300 });
    const busy = await c.compress(PDF);
    const queued = await c.compress(PDF);
    try {
      const err = await rejection(queued.wait({ intervalMs: 100 }));
      assert.equal(err.code, 'client.timeout');
      assert.match(err.detail ?? '', /after 300 ms/);
    } finally {
      await queued.cancel().catch(() => undefined);
      await busy.cancel().catch(() => undefined);
    }
  });
});

describe('retries', () => {
  test('every submission sends an Idempotency-Key: a fresh UUID per compress(), the same on each of its retries', async () => {
    const full = await startTestServer({ minFreeDiskBytes: String(Number.MAX_SAFE_INTEGER) });
    try {
      const keys: (string | null)[] = [];
      const c = new CompressdClient({ baseUrl: full.url, apiKey: full.key, retry: { retries: 2, baseDelayMs: 50 }, fetch: (input, init) => {
        keys.push(new Headers(init?.headers).get('idempotency-key'));
        return fetch(input, init);
      } });
      await rejection(c.compress(JPG));
      await rejection(c.compress('https://example.com/a.jpg', { sourceFormat: 'jpg' }));
      await rejection(c.compress(JPG, { idempotencyKey: 'order-42-photo-1' }));
      assert.equal(keys.length, 9);
      const [first, second, own] = [keys.slice(0, 3), keys.slice(3, 6), keys.slice(6)];
      for (const attempts of [first, second]) {
        assert.match(attempts[0] ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        assert.deepEqual(attempts, [attempts[0], attempts[0], attempts[0]]);
      }
      assert.notEqual(first[0], second[0]);
      assert.deepEqual(own, ['order-42-photo-1', 'order-42-photo-1', 'order-42-photo-1']);
    } finally {
      await full.stop();
    }
  });

  test('a lost 202: the retry with the same Idempotency-Key gets the first job back, charged once', async () => {
    const before = await client.entitlements();
    const lost: string[] = [];
    const c = new CompressdClient({ baseUrl: s.url, apiKey: s.key, retry: { baseDelayMs: 100 }, fetch: async (input, init) => {
      const res = await fetch(input, init);
      if (init?.method === 'POST' && lost.length === 0) {
        lost.push(((await res.json()) as { id: string }).id);
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
      }
      return res;
    } });
    const job = await c.compress(JPG);
    assert.equal(lost.length, 1, 'the first answer was lost');
    assert.equal(job.id, lost[0], 'the retry answered with the first job');
    const done = await job.wait();
    assert.equal((await client.entitlements()).balance, before.balance - done.metrics.creditCost, 'one charge');
  });

  test('5xx: backs off 1, 2 … s per the spec, then gives up with the server\'s code', async () => {
    const full = await startTestServer({ minFreeDiskBytes: String(Number.MAX_SAFE_INTEGER) });
    try {
      const statuses: number[] = [];
      const recording: typeof fetch = async (input, init) => {
        const res = await fetch(input, init);
        statuses.push(res.status);
        return res;
      };
      const c = new CompressdClient({ baseUrl: full.url, apiKey: full.key, retry: { retries: 2 }, fetch: recording });
      const started = Date.now();
      const err = await rejection(c.compress(JPG));
      const elapsed = Date.now() - started;
      assert.equal(err.code, 'server.insufficient_storage');
      assert.equal(err.status, 503);
      assert.deepEqual(statuses, [503, 503, 503]);
      assert.ok(elapsed >= 3000 && elapsed < 10_000, `waited ${elapsed} ms, expected 1 s + 2 s`);
    } finally {
      await full.stop();
    }
  });

  test('429: a full queue is waited out for Retry-After, then the job is accepted', async () => {
    const q = await startTestServer({ workers: '1' });
    try {
      const ids: string[] = [];
      // The queue filled with small GIFs (a third of a second each): it drains soon after the first Retry-After.
      for (let i = 0; i < 18; i++) {
        const res = await q.api('/compress', { method: 'POST', body: await fileForm(join(CORPUS, 'gif/file-type-fixture.gif')) });
        assert.equal(res.status, 202);
        ids.push(((await res.json()) as { id: string }).id);
      }
      const statuses: number[] = [];
      const c = new CompressdClient({
        baseUrl: q.url,
        apiKey: q.key,
        fetch: async (input, init) => {
          const res = await fetch(input, init);
          statuses.push(res.status);
          return res;
        },
      });
      const started = Date.now();
      const job = await c.compress(JPG);
      assert.equal(statuses[0], 429);
      assert.equal(statuses.at(-1), 202);
      assert.ok(Date.now() - started >= 5000, 'the Retry-After of 5 s was honoured');
      assert.equal((await job.wait()).status, 'Succeeded');
    } finally {
      await q.stop();
    }
  });
});

describe('verifyWebhook', () => {
  const secret = 'whsec-0123456789abcdef';
  const body = JSON.stringify({ event: 'job.succeeded', eventId: 'evt_1', jobId: 'j1', jobType: 'compress', site: 'compressd', status: 'Succeeded', deliveryAttempt: 1, metrics: { inputBytes: 10, outputBytes: 5, creditCost: 1, processingTimeMs: 3 }, completedAt: new Date().toISOString() });
  const cases: [string, () => unknown, string | null][] = [
    ['the server\'s signature is accepted and the event parsed', () => verifyWebhook(body, sign(secret, body), secret, 300), null],
    ['bytes work as the raw body', () => verifyWebhook(new TextEncoder().encode(body), sign(secret, body), secret), null],
    ['a changed body', () => verifyWebhook(body.replace('"Succeeded"', '"Failed"'), sign(secret, body), secret), 'webhook.invalid_signature'],
    ['another secret', () => verifyWebhook(body, sign('another-secret-123', body), secret), 'webhook.invalid_signature'],
    ['an old timestamp', () => verifyWebhook(body, sign(secret, body, Math.floor(Date.now() / 1000) - 600), secret, 300), 'webhook.timestamp_out_of_tolerance'],
    ['no header', () => verifyWebhook(body, undefined, secret), 'webhook.invalid_signature'],
    ['a malformed header', () => verifyWebhook(body, 't=abc,v1=zz', secret), 'webhook.invalid_signature'],
    ['the header as Node gives a repeated one (an array)', () => verifyWebhook(body, [sign(secret, body), sign(secret, body)], secret), null],
    ['an array whose copies disagree on t', () => verifyWebhook(body, [sign(secret, body), sign(secret, body, Math.floor(Date.now() / 1000) - 5)], secret), 'webhook.invalid_signature'],
  ];
  for (const [name, call, code] of cases) {
    test(name, () => {
      if (code === null) {
        assert.equal((call() as { eventId: string }).eventId, 'evt_1');
        return;
      }
      assert.throws(call, (err: unknown) => err instanceof CompressdError && err.code === code);
    });
  }
});

describe('the packed package in a strict project', () => {
  test('npm pack builds the package (prepack); installed into a strict NodeNext project, the README example and a webhook handler compile, and the example runs', async () => {
    const block = /## TypeScript client[\s\S]*?```ts\n([\s\S]*?)```/.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'))?.[1];
    assert.ok(block, 'README.md has a "TypeScript client" section with a ts example');
    assert.equal(block.trim().split('\n').length, 5);
    assert.ok(readFileSync(join(CLIENT_DIR, 'README.md'), 'utf8').includes(block), 'the client README shows the same example');

    rmSync(join(CLIENT_DIR, 'dist'), { recursive: true, force: true });
    const packs = join(work, 'packs');
    mkdirSync(packs);
    await run('npm', ['pack', '--pack-destination', packs], CLIENT_DIR);
    const [tarball] = readdirSync(packs);
    assert.ok(tarball?.endsWith('.tgz'), 'npm pack made a tarball');

    const app = join(work, 'strict-app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'strict-app', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(packs, tarball)], app);
    const installed = join(app, 'node_modules/compressd-client');
    for (const file of ['dist/index.js', 'dist/index.d.ts', 'README.md', 'LICENSE']) assert.ok(existsSync(join(installed, file)), `the package ships ${file}`);
    assert.equal(readFileSync(join(installed, 'LICENSE'), 'utf8'), readFileSync(join(ROOT, 'LICENSE'), 'utf8'));
    // A README read on the registry has no repository around it: no link may point into one.
    const links = [...readFileSync(join(installed, 'README.md'), 'utf8').matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]!);
    assert.deepEqual(links.filter((l) => !/^(https?:|#)/.test(l)), [], 'relative links in the packed README');
    mkdirSync(join(app, 'node_modules/@types'));
    symlinkSync(join(ROOT, 'node_modules/@types/node'), join(app, 'node_modules/@types/node'));

    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noUncheckedIndexedAccess: true, types: ['node'], outDir: 'out' }, include: ['*.ts'] }));
    writeFileSync(join(app, 'example.ts'), block);
    writeFileSync(
      join(app, 'webhook.ts'),
      [
        "import { createServer } from 'node:http';",
        "import { CompressdError, JobFailedError, verifyWebhook } from 'compressd-client';",
        'createServer(async (req, res) => {',
        '  let body = "";',
        '  for await (const chunk of req) body += chunk;',
        "  const event = verifyWebhook(body, req.headers['x-service-signature'], 'whsec-0123456789abcdef');",
        '  res.end(event.eventId);',
        '});',
        'export function describe(err: unknown): string {',
        '  if (err instanceof JobFailedError) return `${err.job.status} ${err.job.id}: ${err.code}`;',
        '  return err instanceof CompressdError ? `${err.code} (request ${err.requestId ?? "none"})` : String(err);',
        '}',
      ].join('\n'),
    );
    await run(process.execPath, [join(CLIENT_DIR, 'node_modules/typescript/bin/tsc'), '-p', app], app);

    copyFileSync(PHOTO, join(app, 'photo.jpg'));
    await run(process.execPath, ['out/example.js'], app, { COMPRESSD_URL: s.url, COMPRESSD_API_KEY: s.key });
    const out = statSync(join(app, 'photo.min.jpg'));
    assert.ok(out.size > 0 && out.size < statSync(join(app, 'photo.jpg')).size);
  });

  test('the public types hold no private members and no internal functions', () => {
    const dist = join(CLIENT_DIR, 'dist');
    rmSync(dist, { recursive: true, force: true });
    execFileSync(process.execPath, [join(CLIENT_DIR, 'node_modules/typescript/bin/tsc'), '-p', CLIENT_DIR]);
    const declarations = readdirSync(dist).filter((f) => f.endsWith('.d.ts') && f !== 'openapi.d.ts');
    assert.ok(declarations.includes('index.d.ts'));
    for (const file of declarations) {
      const text = readFileSync(join(dist, file), 'utf8');
      for (const leak of [/\bprivate \w/, /@internal/, /\b(request|sleep|send|json|submission|transportOf|blobForm|streamForm)\(/, /\bTransport\b/, /DEFAULT_(RETRY|TIMEOUT)/]) {
        assert.doesNotMatch(text, leak, `${file} exposes ${leak}`);
      }
    }
  });
});
