// Issue 28 item 2: the data every release left behind (test/fixtures/<release>/, written by
// scripts/golden-data.ts from that release's own code) opens under the current code with nothing lost.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, readFile } from 'node:fs/promises';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { resolveConfig } from '../src/config.ts';
import { DATA_FORMAT } from '../src/durable/data-format.ts';
import { startService } from '../src/service.ts';
import type { GoldenManifest, ModeManifest } from '../scripts/golden-data.ts';
import { scratchDir } from './helpers/daemons.ts';
import { pgBin, startPostgres, type TestPostgres } from './helpers/pg.ts';
import { waitForJobStatus, waitUntil } from './helpers/poll.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const FIXTURES = new URL('./fixtures/', import.meta.url).pathname;
const RELEASES = readdirSync(FIXTURES).filter((d) => existsSync(join(FIXTURES, d, 'manifest.json')));
const sha256 = (b: ArrayBuffer) => createHash('sha256').update(Buffer.from(b)).digest('hex');

/** The machine may be loaded: a generous deadline. */
const LOADED = { timeoutMs: 120_000 };

for (const release of RELEASES) {
  describe(`golden data of ${release}`, () => {
    const manifest = JSON.parse(readFileSync(join(FIXTURES, release, 'manifest.json'), 'utf8')) as GoldenManifest;
    const received: { eventId: string; jobId: string; attempt: string }[] = [];
    let hooks: TestHttpsServer;
    let db: TestPostgres;
    let work: { path: string; remove(): Promise<void> };

    before(async () => {
      hooks = await startTestHttpsServer(
        (req, res) => {
          let body = '';
          req.on('data', (d) => (body += d));
          req.on('end', () => {
            received.push({ eventId: String(req.headers['x-service-event-id']), jobId: JSON.parse(body).jobId, attempt: String(req.headers['x-service-delivery-attempt']) });
            res.writeHead(200).end();
          });
        },
        { port: manifest.receiverPort },
      );
      db = await startPostgres();
      work = await scratchDir('compressd-golden-');
    });
    after(async () => {
      await hooks?.close();
      await db?.stop();
      await work?.remove();
    });

    /** Starts the current code on the release's data (files mode, or cluster mode with `cluster`). */
    async function start(dataDir: string, cluster?: { databaseUrl: string; storage: string }) {
      const config = resolveConfig(
        {
          port: '0', host: '127.0.0.1', workers: '1', 'data-dir': dataDir, 'public-url': manifest.publicUrl, 'retention-seconds': manifest.retentionSeconds,
          'url-allow': 'hooks.test', 'dns-overrides': 'hooks.test=127.0.0.1', 'webhook-retry-delays': '0,0.2,0.2,0.2,0.2',
          ...(cluster ? { 'database-url': cluster.databaseUrl, storage: cluster.storage, 'lease-seconds': '1' } : {}),
        },
        {},
      );
      return startService({ config, log: pino({ level: 'silent' }), fetch: { ca: hooks.ca.caPem } });
    }

    async function check(url: string, m: ModeManifest): Promise<void> {
      const api = (path: string, key: string | null, init: RequestInit = {}) => fetch(url + path, { ...init, headers: key ? { 'x-service-api-key': key } : {} });
      const keyOf = (account: string) => m.keys.find((k) => k.account === account && k.state === 'active')!.key;
      const balance = async (account: string) => ((await (await api('/compress/entitlements/me', keyOf(account))).json()) as { balance: number }).balance;

      for (const k of m.keys) {
        const res = await api('/compress/entitlements/me', k.key);
        if (k.state === 'revoked') {
          assert.equal(res.status, 401, `revoked key of ${k.account}`);
          continue;
        }
        assert.equal(res.status, 200, `key of ${k.account}`);
        const body = (await res.json()) as { account: string; balance: number };
        assert.equal(body.account, k.account);
        assert.equal(body.balance, m.balances[k.account], `balance of ${k.account}`);
      }
      for (const job of m.jobs) {
        const status = (await (await api(`/compress/job/${job.id}`, keyOf(job.account))).json()) as { status: string; metrics: { perceivedQuality: number | null } };
        assert.equal(status.status, job.status, `job ${job.fileName}`);
        // Outputs written before the field existed have none: they read as null, not as unreadable records.
        assert.equal(status.metrics.perceivedQuality, null, `perceived quality of ${job.fileName}`);
        if (!job.output) continue;
        const res = await api(`/compress/job/${job.id}/download`, keyOf(job.account));
        assert.equal(res.status, 200);
        assert.equal(sha256(await res.arrayBuffer()), job.output, `output of ${job.fileName}`);
      }
      const link = await api(m.presigned.path, null);
      assert.equal(link.status, 200, 'a presigned link issued before the upgrade');
      assert.equal(sha256(await link.arrayBuffer()), m.jobs.find((j) => j.id === m.presigned.jobId)!.output);

      for (const pending of m.webhooks.pending) {
        const hit = await waitUntil(`webhook ${pending.eventId}`, () => received.find((r) => r.eventId === pending.eventId), LOADED);
        assert.equal(hit.jobId, pending.jobId);
      }
      for (const job of m.inFlight) {
        const read = async () => (await (await api(`/compress/job/${job.id}`, keyOf(job.account))).json()) as { status: string };
        const ended = (await waitForJobStatus(job.id, read, ['Succeeded', 'Failed', 'Canceled'], LOADED)).status;
        assert.equal(ended, 'Succeeded', 'a job in flight at the upgrade finishes');
        assert.equal((await api(`/compress/job/${job.id}/download`, keyOf(job.account))).status, 200);
      }
      // The holds of the jobs in flight were taken before the stop: finishing charges them, nothing more.
      for (const account of Object.keys(m.balances)) assert.equal(await balance(account), m.balances[account], `balance of ${account} after the jobs in flight`);
      for (const done of m.webhooks.delivered) assert.equal(received.filter((r) => r.eventId === done.eventId).length, 0, 'a delivered webhook is not sent again');
      for (const pending of m.webhooks.pending) assert.equal(received.filter((r) => r.eventId === pending.eventId).length, 1, 'a pending webhook is delivered once');
    }

    it('files mode: keys, balances, outputs, links, the jobs in flight and the pending webhook survive the upgrade', async () => {
      const dataDir = join(work.path, 'files');
      await cp(join(FIXTURES, release, 'files'), dataDir, { recursive: true });
      const service = await start(dataDir);
      try {
        assert.equal(service.firstKey, null);
        await check(`http://127.0.0.1:${service.port}`, manifest.files);
      } finally {
        await service.close();
      }
      assert.equal(await readFile(join(dataDir, 'FORMAT'), 'utf8'), `${DATA_FORMAT}\n`);
    });

    it('cluster mode: the same from the database dump and the bucket', async () => {
      const databaseUrl = await db.createDatabase(`golden_${release.replace(/\W/g, '_')}`);
      execFileSync(join(pgBin(), 'psql'), ['--quiet', '--set', 'ON_ERROR_STOP=1', '--file', join(FIXTURES, release, 'cluster', 'dump.sql'), databaseUrl], { stdio: ['ignore', 'ignore', 'pipe'] });
      const blobs = join(work.path, 'blobs');
      await cp(join(FIXTURES, release, 'cluster', 'blobs'), blobs, { recursive: true });
      const service = await start(join(work.path, 'node'), { databaseUrl, storage: pathToFileURL(blobs).href });
      try {
        assert.equal(service.firstKey, null);
        await check(`http://127.0.0.1:${service.port}`, manifest.cluster);
      } finally {
        await service.close();
      }
    });
  });
}
