// Issue 28 item 3: a rolling upgrade in cluster mode. A node of the previous release (its tree from
// git history, scripts/release-tree.ts) and nodes of the current tree share one PostgreSQL and one
// storage while the old node is stopped and replaced; jobs submitted to every node all the while.
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { PgAccountRegistry } from '../src/accounts/pg-registry.ts';
import { openPool } from '../src/jobs/cluster/database.ts';
import { RELEASES, releaseTree } from '../scripts/release-tree.ts';
import { Daemon, freePort, scratchDir } from './helpers/daemons.ts';
import { startPostgres, type TestPostgres } from './helpers/pg.ts';
import { waitForJobStatus, waitUntil } from './helpers/poll.ts';
import { startTestHttpsServer, type TestHttpsServer } from './helpers/tls.ts';

const PREVIOUS = Object.keys(RELEASES).at(-1)!;
const ENDED = ['Succeeded', 'Failed', 'Canceled'];
const run = promisify(execFile);
const CREDITS = 10_000;

interface Node {
  name: string;
  url: string;
  daemon: Daemon;
}

describe(`rolling upgrade from ${PREVIOUS} to the current tree`, () => {
  let db: TestPostgres;
  let hooks: TestHttpsServer;
  let work: { path: string; remove(): Promise<void> };
  let databaseUrl: string;
  let storage: string;
  let env: NodeJS.ProcessEnv;
  const nodes: Node[] = [];
  const received: { eventId: string; jobId: string }[] = [];

  before(async () => {
    releaseTree(PREVIOUS);
    [db, hooks] = await Promise.all([
      startPostgres(),
      startTestHttpsServer((req, res) => {
        let body = '';
        req.on('data', (d) => (body += d));
        req.on('end', () => {
          received.push({ eventId: String(req.headers['x-service-event-id']), jobId: JSON.parse(body).jobId });
          res.writeHead(200).end();
        });
      }),
    ]);
    work = await scratchDir('compressd-rolling-');
    await writeFile(join(work.path, 'ca.pem'), hooks.ca.caPem);
    databaseUrl = await db.createDatabase('rolling');
    storage = pathToFileURL(join(work.path, 'bucket')).href;
    await mkdir(join(work.path, 'bucket'));
    env = {
      ...process.env,
      NODE_EXTRA_CA_CERTS: join(work.path, 'ca.pem'),
      COMPRESSD_URL_ALLOW: 'hooks.test',
      COMPRESSD_DNS_OVERRIDES: 'hooks.test=127.0.0.1',
      COMPRESSD_WEBHOOK_RETRY_DELAYS: '0,0.2,0.2,0.2,0.2',
      COMPRESSD_LEASE_SECONDS: '2',
      COMPRESSD_DATA_DIR: '',
    };
  });
  after(async () => {
    await Promise.all(nodes.map((n) => n.daemon.stop('SIGKILL')));
    await Promise.all([db?.stop(), hooks?.close()]);
    await work?.remove();
  });

  /** A node of `tree` (a release's, or this one) run from that tree with its own dependencies. */
  async function startNode(name: string, tree: string): Promise<Node> {
    const port = await freePort();
    const daemon = new Daemon(name, process.execPath, [
      '--import', 'tsx', join(tree, 'src/main.ts'), 'serve',
      '--database-url', databaseUrl, '--storage', storage, '--node-id', name,
      '--port', String(port), '--host', '127.0.0.1', '--data-dir', join(work.path, name), '--workers', '1',
    ], { env, cwd: tree });
    const url = `http://127.0.0.1:${port}`;
    await daemon.ready(async () => (await fetch(`${url}/healthz`)).ok, 60_000);
    const node = { name, url, daemon };
    nodes.push(node);
    return node;
  }

  it('nothing is lost, each job is charged once and each webhook keeps one event id', async () => {
    const old = await startNode(`old-${PREVIOUS}`, releaseTree(PREVIOUS));
    const pool = openPool(databaseUrl);
    let key: string;
    try {
      const accounts = new PgAccountRegistry(pool);
      await accounts.ensureAccount('rolling', CREDITS);
      key = (await accounts.createKey('rolling')).key;
    } finally {
      await pool.end();
    }
    // Ahead of the rollout, with the old node serving: what the current release would change, and nothing changed.
    const shape = async () => {
      const p = openPool(databaseUrl);
      try {
        const { rows } = await p.query("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2");
        return JSON.stringify(rows);
      } finally {
        await p.end();
      }
    };
    const before = await shape();
    const check = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'migrate', '--check', '--database-url', databaseUrl]).catch((err: { code: number; stdout: string }) => err);
    assert.match(check.stdout, /^schema is version \d+/);
    assert.equal(await shape(), before);
    const current = await startNode('current-1', process.cwd());

    const raw = Buffer.alloc(64 * 64 * 3).map((_, i) => (i * 5 + ((i * 31) % 23)) & 255);
    const picture = new Blob([await sharp(raw, { raw: { width: 64, height: 64, channels: 3 } }).png().toBuffer()]);
    const accepted: { id: string; node: string }[] = [];
    const targets = new Set<Node>([old, current]);
    /** Submissions on their way to each node: a node is stopped only once none is. */
    const sending = new Map<Node, number>();
    let loading = true;
    const submitter = async (n: number) => {
      for (let i = 0; loading; i++) {
        const live = [...targets];
        const node = live[(i + n) % live.length]!;
        const form = new FormData();
        form.set('webhookUrl', hooks.url('hooks.test', '/hook'));
        form.set('webhookSecret', 'whsec_rolling_0123456789');
        form.set('file', picture, `r${n}-${i}.png`);
        sending.set(node, (sending.get(node) ?? 0) + 1);
        let res: Response, body: { id?: string };
        try {
          res = await fetch(`${node.url}/compress`, { method: 'POST', body: form, headers: { 'x-service-api-key': key } });
          body = (await res.json()) as { id?: string };
        } finally {
          sending.set(node, sending.get(node)! - 1);
        }
        if (res.status === 202) accepted.push({ id: body.id!, node: node.name });
        else {
          assert.equal(res.status, 429, JSON.stringify(body));
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    };
    const load = Promise.all([submitter(0), submitter(1)]);
    /** Waits until `n` submissions to the node named `name` (any node: undefined) were accepted. */
    const waitAccepted = (n: number, name?: string) => {
      const count = () => accepted.filter((a) => name === undefined || a.node === name).length;
      return waitUntil(() => `only ${count()} of ${n} submissions accepted${name ? ` by ${name}` : ''}`, () => count() >= n, { timeoutMs: 180_000 });
    };

    await waitAccepted(4, old.name);
    await waitAccepted(4, current.name);
    // The old node leaves (its running jobs get its shutdown grace, the rest their leases) while
    // the current node takes submissions; then a second current node replaces it.
    targets.delete(old);
    while (sending.get(old)) await new Promise((r) => setTimeout(r, 20));
    await old.daemon.stop('SIGTERM', 15_000);
    await waitAccepted(accepted.length + 4);
    const replacement = await startNode('current-2', process.cwd());
    targets.add(replacement);
    await waitAccepted(4, replacement.name);
    loading = false;
    await load;

    const api = (path: string) => fetch(current.url + path, { headers: { 'x-service-api-key': key } });
    let spent = 0;
    for (const { id } of accepted) {
      const read = async () => (await (await api(`/compress/job/${id}`)).json()) as Record<string, any>;
      const job = await waitForJobStatus(id, read, ENDED, { timeoutMs: 180_000, intervalMs: 200 });
      assert.equal(job.status, 'Succeeded', `job ${id}`);
      assert.equal((await api(`/compress/job/${id}/download`)).status, 200);
      spent += job.metrics.creditCost;
    }
    const me = (await (await api('/compress/entitlements/me')).json()) as { balance: number; credits: { reserved: number } };
    assert.equal(me.credits.reserved, 0);
    assert.equal(me.balance, CREDITS - spent, 'each job charged once');

    for (const { id } of accepted) {
      await waitUntil(`a webhook for ${id}`, () => received.some((r) => r.jobId === id), { timeoutMs: 60_000 });
    }
    for (const { id } of accepted) {
      const ids = new Set(received.filter((r) => r.jobId === id).map((r) => r.eventId));
      assert.equal(ids.size, 1, `one event id for the webhook of ${id}`);
    }
  });
});
