// Issue "cluster mode": two compressd nodes on one PostgreSQL and one S3 bucket (real servers on loopback).
import { CreateBucketCommand, ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { openAsBlob } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { PgAccountRegistry } from '../src/accounts/pg-registry.ts';
import { firstKeyIn } from '../src/accounts/first-key.ts';
import { openPool } from '../src/jobs/cluster/database.ts';
import { s3ClientFromEnv } from '../src/storage/s3.ts';
import { Daemon, freePort, scratchDir } from './helpers/daemons.ts';
import { startPostgres, type TestPostgres } from './helpers/pg.ts';
import { waitForJobStatus, waitUntil } from './helpers/poll.ts';
import { CORPUS } from './helpers/server.ts';
import { startSwift, type TestSwift } from './helpers/swift.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const run = promisify(execFile);
const PHONE = join(CORPUS, 'jpg/phone-IMG_20180725_163423.jpg');
const SMALL = join(CORPUS, 'jpg/jpeg420exif.jpg');
const LEASE_SECONDS = 2;
const ENDED = ['Succeeded', 'Failed', 'Canceled'];
const sha256 = (b: Buffer | ArrayBuffer) => createHash('sha256').update(Buffer.from(b as ArrayBuffer)).digest('hex');

interface Node {
  id: string;
  url: string;
  daemon: Daemon;
  /** The API key printed when this node created the `default` account. */
  firstKey: string | null;
}

describe('cluster mode: two nodes, one database, one bucket', () => {
  let db: TestPostgres;
  let swift: TestSwift;
  let hooks: TestHttpsServer;
  let work: { path: string; remove(): Promise<void> };
  let databaseUrl: string;
  let env: NodeJS.ProcessEnv;
  const received: { eventId: string; attempt: string; body: Record<string, any> }[] = [];
  const nodes: Node[] = [];

  async function startNode(id: string, extraArgs: string[] = []): Promise<Node> {
    const port = await freePort();
    const daemon = new Daemon(`node ${id}`, process.execPath, [
      '--import', 'tsx', 'src/main.ts', 'serve',
      '--database-url', databaseUrl, '--storage', 's3://jobs/cluster', '--node-id', id,
      '--port', String(port), '--host', '127.0.0.1', '--data-dir', join(work.path, id), '--workers', '1', ...extraArgs,
    ], { env });
    let out = '';
    daemon.child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const url = `http://127.0.0.1:${port}`;
    await daemon.ready(async () => (await fetch(`${url}/healthz`)).ok, 60_000);
    const node = { id, url, daemon, firstKey: firstKeyIn(join(work.path, id)) };
    nodes.push(node);
    return node;
  }

  before(async () => {
    [db, swift, hooks] = await Promise.all([
      startPostgres(),
      startSwift(),
      startTestHttpsServer((req, res) => {
        let body = '';
        req.on('data', (d) => (body += d));
        req.on('end', () => {
          received.push({ eventId: String(req.headers['x-service-event-id']), attempt: String(req.headers['x-service-delivery-attempt']), body: JSON.parse(body) });
          res.writeHead(200).end();
        });
      }),
    ]);
    work = await scratchDir('compressd-cluster-');
    await writeFile(join(work.path, 'ca.pem'), hooks.ca.caPem);
    databaseUrl = await db.createDatabase('compressd');
    Object.assign(process.env, swift.env);
    await s3ClientFromEnv().send(new CreateBucketCommand({ Bucket: 'jobs' }));
    env = {
      ...process.env,
      ...swift.env,
      NODE_EXTRA_CA_CERTS: join(work.path, 'ca.pem'),
      COMPRESSD_URL_ALLOW: 'hooks.test',
      COMPRESSD_DNS_OVERRIDES: 'hooks.test=127.0.0.1',
      COMPRESSD_WEBHOOK_RETRY_DELAYS: '0,0.2,0.2,0.2,0.2',
      COMPRESSD_LEASE_SECONDS: String(LEASE_SECONDS),
      COMPRESSD_PUBLIC_URL: 'http://public.example',
    };
  });
  after(async () => {
    await Promise.all(nodes.map((n) => n.daemon.stop('SIGKILL')));
    await Promise.all([db?.stop(), swift?.stop(), hooks?.close()]);
    await work?.remove();
  });

  /** A key made as the CLI makes it, straight in the database (the CLI itself is the first test's). */
  async function newKey(account: string, credits: number): Promise<string> {
    const pool = openPool(databaseUrl);
    try {
      const accounts = new PgAccountRegistry(pool);
      await accounts.ensureAccount(account, credits);
      return (await accounts.createKey(account)).key;
    } finally {
      await pool.end();
    }
  }

  const api = (node: Node, key: string, path: string, init: RequestInit = {}) =>
    fetch(node.url + path, { ...init, headers: { ...(init.headers as Record<string, string>), 'x-service-api-key': key } });
  async function submit(node: Node, key: string, file: string, fields: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<Response> {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    form.set('file', await openAsBlob(file), 'photo.jpg');
    return api(node, key, '/compress', { method: 'POST', body: form, headers });
  }
  const status = async (node: Node, key: string, id: string) => (await (await api(node, key, `/compress/job/${id}`)).json()) as Record<string, any>;
  const waitFor = (node: Node, key: string, id: string, until: string[], timeoutMs = 120_000) => waitForJobStatus(id, () => status(node, key, id), until, { timeoutMs, intervalMs: 50 });

  test('any node answers for any job; a key made by the CLI on one machine works on both at once', async () => {
    const a = await startNode('A');
    const b = await startNode('B');
    assert.ok(a.firstKey, 'the first node on an empty database creates the default account and prints its key');
    assert.equal(b.firstKey, null, 'the second does not');
    const made = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'keys', 'create', '--account', 'team', '--credits', '100', '--database-url', databaseUrl]);
    const key = made.stdout.trim().split('\n').at(-1)!;

    const accepted = await submit(b, key, SMALL);
    assert.equal(accepted.status, 202);
    const { id } = (await accepted.json()) as { id: string };
    const done = await waitFor(a, key, id, ENDED);
    assert.equal(done.status, 'Succeeded');
    const viaA = await api(a, key, `/compress/job/${id}/download`);
    const viaB = await api(b, key, `/compress/job/${id}/download`);
    assert.equal(viaA.status, 200);
    assert.equal(sha256(await viaA.arrayBuffer()), sha256(await viaB.arrayBuffer()));
    const compared = await api(b, key, `/compress/job/${id}/compare`);
    assert.equal(compared.status, 200, 'previews come from the shared storage on any node');
    await compared.body?.cancel();
    assert.equal((await api(b, key, `/compress/job/${id}`, { method: 'DELETE' })).status, 200);
    assert.equal((await api(a, key, `/compress/job/${id}`)).status, 404);
    for (const node of [a, b]) assert.deepEqual(await readdir(join(work.path, node.id, 'spool')).catch(() => []), [], `nothing of the job stays on node ${node.id}'s disk`);
  });

  /** The sum over both nodes of a counter's samples whose labels include `labels`. */
  async function counted(name: string, labels: Record<string, string>): Promise<number> {
    let sum = 0;
    for (const node of nodes) {
      const text = await (await fetch(`${node.url}/metrics`)).text();
      for (const m of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
        if (Object.entries(labels).every(([k, v]) => m[1]!.includes(`${k}="${v}"`))) sum += Number(m[2]);
      }
    }
    return sum;
  }

  test('/metrics counts the database queries and S3 requests of admission and of the run: one PutObject admits a small input', async () => {
    const key = await newKey('counted', 100);
    const kinds = [
      ['compressd_db_queries_total', { path: 'admission' }],
      ['compressd_db_queries_total', { path: 'run' }],
      ['compressd_s3_requests_total', { path: 'admission' }],
      ['compressd_s3_requests_total', { path: 'admission', command: 'PutObject' }],
      ['compressd_s3_requests_total', { path: 'run', command: 'GetObject' }],
      ['compressd_s3_requests_total', { path: 'run', command: 'PutObject' }],
    ] as const;
    const before = await Promise.all(kinds.map(([name, labels]) => counted(name, labels)));
    // The file's bytes follow the headers after a pause, so the parser meets the file part in a
    // socket event (outside the request's scope) rather than in bytes already buffered.
    const boundary = 'counted-boundary';
    const head = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="photo.jpg"\r\ncontent-type: image/jpeg\r\n\r\n`);
    const body = Buffer.concat([head, await readFile(SMALL), Buffer.from(`\r\n--${boundary}--\r\n`)]);
    const accepted = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(`${nodes[0]!.url}/compress`, { method: 'POST', headers: { 'x-service-api-key': key, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': body.length } }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      });
      req.on('error', reject);
      req.flushHeaders();
      setTimeout(() => req.end(body), 300);
    });
    assert.equal(accepted.status, 202, accepted.text);
    const { id } = JSON.parse(accepted.text) as { id: string };
    assert.equal((await waitFor(nodes[0]!, key, id, ENDED)).status, 'Succeeded');
    const after = await Promise.all(kinds.map(([name, labels]) => counted(name, labels)));
    const [admitDb, runDb, admitS3, admitPut, runGet, runPut] = after.map((n, i) => n - before[i]!);
    assert.ok(admitDb! > 0 && runDb! > 0, `database queries: admission ${admitDb}, run ${runDb}`);
    assert.equal(admitS3, 1, 'a small input is stored in one request');
    assert.equal(admitPut, 1);
    assert.equal(runGet, 1, 'the run reads the input once');
    assert.equal(runPut, 1, 'and stores the output once');
  });

  test('uploads cut off halfway (streamed to S3, spooled first) leave no object and no open multipart upload in the bucket, and no job', async () => {
    const key = await newKey('cutoff', 100);
    const url = new URL(`${nodes[0]!.url}/compress`);
    const boundary = 'cutoff-boundary';
    const head = `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.tif"\r\ncontent-type: image/tiff\r\n\r\n`;
    // 6 MB declared: streamed into storage as it arrives; 20 MB: spooled, then stored.
    for (const [declaredMb, sentMb] of [[6, 3], [20, 12]] as const) {
      const length = head.length + declaredMb * 1024 * 1024 + boundary.length + 8;
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'x-service-api-key': key, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(length) } });
      req.on('error', () => {});
      req.write(head);
      for (let i = 0; i < sentMb; i++) await new Promise((r) => req.write(Buffer.alloc(1024 * 1024, i), r));
      await new Promise((r) => setTimeout(r, 500));
      req.destroy();
    }
    const s3 = s3ClientFromEnv();
    const pool = openPool(databaseUrl);
    try {
      let seen = '';
      await waitUntil(() => seen, async () => {
        const objects = (await s3.send(new ListObjectsV2Command({ Bucket: 'jobs', Prefix: 'cluster/' }))).Contents ?? [];
        const ids = [...new Set(objects.map((o) => o.Key!.split('/')[1]!))];
        const { rows } = await pool.query<{ id: string }>('SELECT id FROM jobs WHERE id = ANY($1)', [ids]);
        const uploads = (await s3.send(new ListMultipartUploadsCommand({ Bucket: 'jobs', Prefix: 'cluster/' }))).Uploads ?? [];
        seen = `objects of no job: ${ids.filter((id) => !rows.some((r) => r.id === id))}; multipart uploads open: ${uploads.length}`;
        return rows.length === ids.length && uploads.length === 0;
      }, { timeoutMs: 30_000, intervalMs: 200 });
      const { rows } = await pool.query("SELECT 1 FROM jobs WHERE account = 'cutoff'");
      assert.equal(rows.length, 0);
    } finally {
      s3.destroy();
      await pool.end();
    }
  });

  test('credits are never overspent under concurrent submits to both nodes', async () => {
    const [a, b] = nodes as [Node, Node];
    const key = await newKey('tight', 5);
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => submit(i % 2 ? a : b, key, SMALL)));
    const codes = answers.map((r) => r.status).sort();
    assert.deepEqual(codes, [...Array(5).fill(202), ...Array(7).fill(402)]);
    // Ended before the next test, so no later test finds a node's only worker busy with one of these.
    for (const r of answers) {
      if (r.status === 202) await waitFor(a, key, ((await r.json()) as { id: string }).id, ENDED);
      else await r.body?.cancel();
    }
  });

  test('one Idempotency-Key sent to both nodes at once: one job, one charge; either node replays it; another request with it gets 422', async () => {
    const [a, b] = nodes as [Node, Node];
    const key = await newKey('retrying', 1);
    const withKey = (node: Node, file = SMALL) => submit(node, key, file, {}, { 'idempotency-key': 'order-17' });
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => withKey(i % 2 ? a : b)));
    assert.ok(answers.every((r) => r.status === 202 || r.status === 409), answers.map((r) => r.status).join());
    const ids = new Set(await Promise.all(answers.filter((r) => r.status === 202).map(async (r) => ((await r.json()) as { id: string }).id)));
    for (const r of answers) if (r.status !== 202) await r.body?.cancel();
    assert.equal(ids.size, 1, 'every 202 names one job');
    const [id] = [...ids];
    for (const node of [a, b]) {
      const replay = await withKey(node);
      assert.equal(replay.status, 202);
      assert.equal(((await replay.json()) as { id: string }).id, id);
    }
    const other = await withKey(b, join(CORPUS, 'png/baiona_alpha.png'));
    assert.equal(other.status, 422);
    assert.equal(((await other.json()) as { error: string }).error, 'request.idempotency_mismatch');
    await waitFor(a, key, id!, ENDED);
    const me = (await (await api(b, key, '/compress/entitlements/me')).json()) as { credits: Record<string, number> };
    assert.deepEqual(me.credits, { granted: 1, spent: 1, reserved: 0, available: 0 });
  });

  test('a node SIGKILLed mid-job: another takes the job over when its lease expires (not at its next look for work), charges once, sends one webhook', async () => {
    const a = nodes[0]!;
    let b = nodes[1]!;
    const key = await newKey('crash', 100);
    // B is stopped while A takes the job, so the job surely runs on A; B comes back before A dies.
    await b.daemon.stop('SIGTERM');
    const accepted = await submit(a, key, PHONE, { webhookUrl: hooks.url('hooks.test', '/hook'), webhookSecret: 'whsec_cluster_test_0123456789' });
    assert.equal(accepted.status, 202);
    const { id } = (await accepted.json()) as { id: string };
    await waitFor(a, key, id, ['Running', ...ENDED]);
    nodes.splice(nodes.indexOf(b), 1);
    // B looks for queued work once a minute: taking the job over sooner is the lease watch's doing.
    const POLL_SECONDS = 60;
    b = await startNode('B', ['--poll-seconds', String(POLL_SECONDS)]);
    const running = await status(b, key, id);
    assert.equal(running.status, 'Running', 'the job is still running when its node is killed');
    a.daemon.child.kill('SIGKILL');
    await a.daemon.exited;
    const killedAt = Date.now();
    const pool = openPool(databaseUrl);
    const leaseEnd = await pool
      .query<{ at: Date }>('SELECT lease_expires_at AS at FROM jobs WHERE id = $1', [id])
      .then((r) => r.rows[0]!.at.getTime())
      .finally(() => pool.end());
    // Running again, on B, once A's lease has expired: a new start time.
    const again = await waitUntil(`job ${id} to run again on B`, async () => {
      const j = await status(b, key, id);
      return (ENDED.includes(j.status) || (j.status === 'Running' && j.startedAt !== running.startedAt)) && j;
    }, { timeoutMs: 120_000, intervalMs: 50 });
    const restartedMs = Date.now() - killedAt;
    const done = await waitFor(b, key, id, ENDED);
    assert.equal(done.status, 'Succeeded');
    const takeoverMs = Date.parse(again.startedAt) - leaseEnd;
    console.log(`# takeover: B started the job ${takeoverMs} ms after A's lease ended, ${Date.parse(again.startedAt) - killedAt} ms after A was killed (seen by the test after ${restartedMs} ms; lease ${LEASE_SECONDS} s, B looks for work every ${POLL_SECONDS} s), finished after ${Date.now() - killedAt} ms`);
    // Within 1 s of the lease on an idle machine; the margin is for a loaded one, far below B's next look.
    assert.ok(takeoverMs >= 0 && takeoverMs < 10_000, `B started the job ${takeoverMs} ms after the lease ended\n${b.daemon.log()}`);

    const me = (await (await api(b, key, '/compress/entitlements/me')).json()) as Record<string, any>;
    assert.deepEqual(me.credits, { granted: 100, spent: done.metrics.creditCost, reserved: 0, available: 100 - done.metrics.creditCost });

    await waitUntil(`a webhook for ${id}`, () => received.some((r) => r.body.jobId === id), { timeoutMs: 10_000 }).catch(() => undefined);
    const events = received.filter((r) => r.body.jobId === id);
    assert.equal(new Set(events.map((e) => e.eventId)).size, 1, 'one event id');
    assert.equal(events[0]!.body.event, 'job.succeeded');
    const link = new URL(events[0]!.body.output.downloadUrl);
    const viaLink = await fetch(b.url + link.pathname + link.search);
    assert.equal(viaLink.status, 200, 'the presigned link works through the surviving node');
    const viaApi = await api(b, key, `/compress/job/${id}/download`);
    const bytes = Buffer.from(await viaLink.arrayBuffer());
    assert.equal(sha256(bytes), sha256(await viaApi.arrayBuffer()));
    assert.ok(bytes.length > 0 && bytes.length < (await readFile(PHONE)).length);
  });
});
