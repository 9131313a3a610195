// Writes the golden data of one release: a files-mode data dir and a cluster database dump with its
// blobs, each holding accounts, keys (one revoked), credits, finished, failed and canceled jobs with
// their files, jobs in flight, a delivered and a pending webhook, and the download-token key; and a
// manifest of what a later release must find in them (keys, balances, output hashes, event ids).
//
//   node --import tsx scripts/golden-data.ts VERSION
//
// runs the release's own code (its tree from scripts/release-tree.mjs) and writes test/fixtures/VERSION/.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import sharp from 'sharp';
import { RELEASES, releaseTree } from './release-tree.ts';
import { scratchDir } from '../test/helpers/daemons.ts';
import { pgBin, startPostgres } from '../test/helpers/pg.ts';
import { startTestHttpsServer } from '../test/helpers/tls.ts';

/** The receiver's fixed port (webhook URLs stored in the fixture name it): below Linux's ephemeral range. */
export const RECEIVER_PORT = 29443;
export const WEBHOOK_SECRET = 'whsec_golden_0123456789';
export const PUBLIC_URL = 'https://compress.example.org';
/** A retention no fixture outlives: stored outputs and the presigned links to them stay valid. */
export const RETENTION_SECONDS = String(100 * 365 * 24 * 3600);
const HOOK = (path: string) => `https://hooks.test:${RECEIVER_PORT}${path}`;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Small pictures made here, so the fixture stays tiny and needs no corpus. */
async function picture(width: number, height: number, format: 'jpeg' | 'png', seed: number, noise = 15): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  let x = seed;
  for (let i = 0; i < raw.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    const p = Math.floor(i / 3);
    raw[i] = ((p % width) * 255 / width + ((p / width) * 128) / height + ((x >>> 24) & noise)) & 255;
  }
  const img = sharp(raw, { raw: { width, height, channels: 3 } });
  return format === 'jpeg' ? img.jpeg({ quality: 95 }).toBuffer() : img.png().toBuffer();
}

interface KeyRecord {
  account: string;
  key: string;
  state: 'active' | 'revoked';
}
interface JobRecord {
  id: string;
  account: string;
  status: string;
  fileName: string;
  /** sha256 of the output, for succeeded jobs. */
  output?: string;
}
export interface ModeManifest {
  keys: KeyRecord[];
  /** `balance` of GET /compress/entitlements/me per account at shutdown (holds of jobs in flight taken). */
  balances: Record<string, number>;
  jobs: JobRecord[];
  /** Jobs still Queued or Running when the release stopped; each must succeed under a later one. */
  inFlight: { id: string; account: string }[];
  webhooks: { delivered: { eventId: string; jobId: string }[]; pending: { eventId: string; jobId: string }[] };
  /** Path and query of a presigned download link from the delivered webhook, and its job. */
  presigned: { path: string; jobId: string };
}
export interface GoldenManifest {
  release: string;
  commit: string;
  receiverPort: number;
  webhookSecret: string;
  publicUrl: string;
  retentionSeconds: string;
  files: ModeManifest;
  cluster: ModeManifest;
}

type Registry = {
  ensureAccount(name: string, credits: number): unknown;
  createKey(account: string, opts?: { guest?: boolean; allowIps?: string }): { key: string } | Promise<{ key: string }>;
  revokeKey(key: string): unknown;
  addCredits(account: string, amount: number): unknown;
};

interface Receiver {
  delivered: { eventId: string; jobId: string; downloadUrl?: string }[];
  hanging: { eventId: string; jobId: string }[];
}

/** Runs the scenario against a started service of the release and returns what it left behind. */
async function scenario(url: string, firstKey: string, accounts: Registry, receiver: Receiver, stop: () => Promise<void>): Promise<ModeManifest> {
  const api = (path: string, key: string, init: RequestInit = {}) => fetch(url + path, { ...init, headers: { ...(init.headers as Record<string, string>), 'x-service-api-key': key } });
  const submit = async (key: string, body: Buffer, name: string, fields: Record<string, string> = {}) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    form.set('file', new Blob([body]), name);
    const res = await api('/compress', key, { method: 'POST', body: form });
    if (res.status !== 202) throw new Error(`submit ${name}: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { id: string }).id;
  };
  const status = async (key: string, id: string) => (await (await api(`/compress/job/${id}`, key)).json()) as { status: string };
  const until = async <T>(what: string, probe: () => Promise<T | undefined>) => {
    for (let i = 0; i < 600; i++) {
      const got = await probe();
      if (got !== undefined) return got;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`timed out waiting for ${what}`);
  };
  const ended = (key: string, id: string) => until(`job ${id}`, async () => {
    const s = await status(key, id);
    return ['Succeeded', 'Failed', 'Canceled'].includes(s.status) ? s.status : undefined;
  });

  await accounts.ensureAccount('alice', 100);
  const alice = (await accounts.createKey('alice')).key;
  const aliceGuest = (await accounts.createKey('alice', { guest: true })).key;
  const aliceOld = (await accounts.createKey('alice')).key;
  await accounts.revokeKey(aliceOld);
  await accounts.ensureAccount('bob', 30);
  await accounts.addCredits('bob', 12);
  const bob = (await accounts.createKey('bob', { allowIps: '127.0.0.1/32' })).key;
  const keys: KeyRecord[] = [
    { account: 'default', key: firstKey, state: 'active' },
    { account: 'alice', key: alice, state: 'active' },
    { account: 'alice', key: aliceGuest, state: 'active' },
    { account: 'alice', key: aliceOld, state: 'revoked' },
    { account: 'bob', key: bob, state: 'active' },
  ];

  const jobs: JobRecord[] = [];
  const keyOf: Record<string, string> = { default: firstKey, alice, bob };
  const record = async (account: string, id: string, fileName: string) => {
    const s = await ended(keyOf[account]!, id);
    const job: JobRecord = { id, account, status: s, fileName };
    if (s === 'Succeeded') job.output = sha256(Buffer.from(await (await api(`/compress/job/${id}/download`, keyOf[account]!)).arrayBuffer()));
    jobs.push(job);
  };

  const hook = { webhookUrl: HOOK('/ok'), webhookSecret: WEBHOOK_SECRET };
  const delivered = await submit(alice, await picture(96, 64, 'jpeg', 1), 'photo.jpg', hook);
  await record('alice', delivered, 'photo.jpg');
  const deliveredHook = await until('the delivered webhook', async () => receiver.delivered.find((d) => d.jobId === delivered));
  await record('alice', await submit(alice, Buffer.from('%PDF-1.4\n% not a picture\n'), 'scan.jpg'), 'scan.jpg');
  await record('bob', await submit(bob, await picture(80, 80, 'png', 2), 'chart.png'), 'chart.png');
  await record('default', await submit(firstKey, await picture(64, 96, 'jpeg', 3), 'portrait.jpg'), 'portrait.jpg');

  // A job held behind a slower one (one worker) is canceled while queued.
  const slow = await submit(alice, await picture(1600, 1200, 'jpeg', 4, 0), 'wide.jpg');
  const canceled = await submit(alice, await picture(64, 64, 'png', 5), 'icon.png');
  const cancel = await api(`/compress/job/${canceled}/cancel`, alice, { method: 'POST' });
  if (!cancel.ok) throw new Error(`cancel: ${cancel.status} ${await cancel.text()}`);
  await record('alice', canceled, 'icon.png');
  await record('alice', slow, 'wide.jpg');

  // Its webhook's first attempt is held open by the receiver and cut short by the stop: pending.
  const pendingJob = await submit(bob, await picture(72, 72, 'jpeg', 6), 'badge.jpg', { webhookUrl: HOOK('/hang'), webhookSecret: WEBHOOK_SECRET });
  await record('bob', pendingJob, 'badge.jpg');
  const pendingHook = await until('the pending webhook attempt', async () => receiver.hanging.find((d) => d.jobId === pendingJob));

  const balances: Record<string, number> = {};
  // In flight at the stop: one behind the other on the one worker.
  const inFlight = [
    { id: await submit(alice, await picture(1600, 1200, 'jpeg', 7, 0), 'banner.jpg'), account: 'alice' },
    { id: await submit(alice, await picture(96, 96, 'jpeg', 8), 'thumb.jpg'), account: 'alice' },
  ];
  for (const account of ['default', 'alice', 'bob']) balances[account] = ((await (await api('/compress/entitlements/me', keyOf[account]!)).json()) as { balance: number }).balance;
  await stop();
  return {
    keys,
    balances,
    jobs,
    inFlight,
    webhooks: { delivered: [{ eventId: deliveredHook.eventId, jobId: delivered }], pending: [{ eventId: pendingHook.eventId, jobId: pendingJob }] },
    presigned: { path: new URL(deliveredHook.downloadUrl!).pathname + new URL(deliveredHook.downloadUrl!).search, jobId: delivered },
  };
}

async function main(version: string): Promise<void> {
  const tree = releaseTree(version);
  const src = (path: string) => import(pathToFileURL(join(tree, 'src', path)).href);
  const { resolveConfig } = await src('config.ts');
  const { startService: start } = await src('service.ts');
  // Releases up to 0.1.0 take (config, log, fetch settings); later ones one options object.
  const startService = (config: unknown, log: unknown, fetch: object) => (start.length === 1 ? start({ config, log, fetch }) : start(config, log, fetch));
  const { AccountRegistry } = await src('accounts/registry.ts');
  const { PgAccountRegistry } = await src('accounts/pg-registry.ts');
  const { openPool } = await src('jobs/cluster/database.ts');

  const out = join(process.cwd(), 'test', 'fixtures', version);
  await rm(out, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  const work = await scratchDir('compressd-golden-');
  const receiver: Receiver = { delivered: [], hanging: [] };
  const hooks = await startTestHttpsServer(
    (req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const event = JSON.parse(body) as { jobId: string; output?: { downloadUrl?: string } };
        const seen = { eventId: String(req.headers['x-service-event-id']), jobId: event.jobId, downloadUrl: event.output?.downloadUrl };
        if (req.url === '/hang') receiver.hanging.push(seen);
        else {
          receiver.delivered.push(seen);
          res.writeHead(200).end();
        }
      });
    },
    { port: RECEIVER_PORT },
  );
  const db = await startPostgres();
  try {
    const settings = (dataDir: string, extra: Record<string, string> = {}) =>
      resolveConfig(
        {
          port: '0', host: '127.0.0.1', workers: '1', 'data-dir': dataDir, 'public-url': PUBLIC_URL, 'retention-seconds': RETENTION_SECONDS,
          'url-allow': 'hooks.test', 'dns-overrides': 'hooks.test=127.0.0.1', 'webhook-retry-delays': '0,1,1,1,1', ...extra,
        },
        {},
      );
    const log = pino({ level: 'silent' });
    const tls = { ca: hooks.ca.caPem };

    const dataDir = join(work.path, 'files');
    const filesService = await startService(settings(dataDir), log, tls);
    const files = await scenario(`http://127.0.0.1:${filesService.port}`, filesService.firstKey, new AccountRegistry(dataDir), receiver, () => filesService.close(0));
    await cp(dataDir, join(out, 'files'), { recursive: true, filter: (p: string) => !p.endsWith('server.lock') });

    const databaseUrl = await db.createDatabase('golden');
    const blobs = join(work.path, 'blobs');
    await mkdir(blobs);
    const clusterService = await startService(settings(join(work.path, 'node'), { 'database-url': databaseUrl, storage: pathToFileURL(blobs).href, 'node-id': `golden-${version}` }), log, tls);
    const pool = openPool(databaseUrl);
    let cluster: ModeManifest;
    try {
      cluster = await scenario(`http://127.0.0.1:${clusterService.port}`, clusterService.firstKey, new PgAccountRegistry(pool), receiver, () => clusterService.close(0));
    } finally {
      await pool.end();
    }
    await mkdir(join(out, 'cluster'));
    const dump = execFileSync(join(pgBin(), 'pg_dump'), ['--no-owner', '--no-privileges', '--format=plain', databaseUrl], { maxBuffer: 1 << 28 });
    await writeFile(join(out, 'cluster', 'dump.sql'), dump);
    await cp(blobs, join(out, 'cluster', 'blobs'), { recursive: true });

    const manifest: GoldenManifest = {
      release: version, commit: RELEASES[version]!, receiverPort: RECEIVER_PORT, webhookSecret: WEBHOOK_SECRET,
      publicUrl: PUBLIC_URL, retentionSeconds: RETENTION_SECONDS, files, cluster,
    };
    await writeFile(join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    const count = async (dir: string): Promise<number> => (await readdir(dir, { recursive: true })).length;
    console.log(`golden data of ${version}: ${out} (${await count(out)} entries)`);
  } finally {
    await db.stop();
    await hooks.close();
    await work.remove();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const version = process.argv[2];
  if (!version) {
    console.error('usage: node --import tsx scripts/golden-data.ts VERSION');
    process.exit(2);
  }
  await main(version);
}
