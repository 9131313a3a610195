// Issue 28 item 4: `compressd backup` of a running data dir under load, `compressd restore`, and a
// restored server that holds exactly what the data dir held at the snapshot.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import sharp from 'sharp';
import yazl from 'yazl';
import { AccountRegistry } from '../src/accounts/registry.ts';
import type { GoldenManifest } from '../scripts/golden-data.ts';
import { scratchDir } from './helpers/daemons.ts';
import { waitForJobStatus, waitUntil } from './helpers/poll.ts';
import { json, startTestServer, type TestServer } from './helpers/server.ts';
import { unzip } from './helpers/zip.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { env: { ...process.env, COMPRESSD_DATA_DIR: '' } });
const sha256 = (b: ArrayBuffer | Buffer) => createHash('sha256').update(Buffer.isBuffer(b) ? b : Buffer.from(b)).digest('hex');
const ENDED = ['Succeeded', 'Failed', 'Canceled'];
const FIXTURES = new URL('./fixtures/', import.meta.url).pathname;

async function picture(seed: number): Promise<Buffer> {
  const raw = Buffer.alloc(48 * 48 * 3, 0).map((_, i) => (i * 7 + seed * 13 + ((i * seed) % 29)) & 255);
  return sharp(raw, { raw: { width: 48, height: 48, channels: 3 } }).png().toBuffer();
}

/** Every entry under `dir` with its permission bits. */
async function modes(dir: string): Promise<{ path: string; dir: boolean; mode: number }[]> {
  const out = [{ path: dir, dir: true, mode: (await stat(dir)).mode & 0o777 }];
  for (const name of await readdir(dir, { recursive: true })) {
    const st = await stat(join(dir, name));
    out.push({ path: name, dir: st.isDirectory(), mode: st.mode & 0o777 });
  }
  return out;
}

describe('backup and restore', () => {
  let scratch: { path: string; remove(): Promise<void> };
  let s: TestServer;
  before(async () => {
    scratch = await scratchDir('compressd-backup-');
    s = await startTestServer({ dataDir: join(scratch.path, 'live'), workers: '2' });
  });
  after(async () => {
    await s.stop();
    await scratch.remove();
  });

  it('a snapshot taken while jobs are submitted and finishing restores to exactly that moment', async () => {
    const registry = new AccountRegistry(s.dataDir);
    registry.ensureAccount('alice', 100_000);
    registry.ensureAccount('bob', 100_000);
    const keys = { alice: registry.createKey('alice').key, bob: registry.createKey('bob').key };
    const revoked = registry.createKey('alice').key;
    registry.revokeKey(revoked);
    registry.addCredits('bob', 7);

    /** Every submission: its job id, its account, and when its request began and was answered. */
    const submitted: { id: string; account: 'alice' | 'bob'; sentAt: number; acceptedAt: number }[] = [];
    let loading = true;
    const pictures = await Promise.all([1, 2, 3, 4, 5].map(picture));
    const submitter = async (account: 'alice' | 'bob', n: number) => {
      for (let i = 0; loading; i++) {
        const form = new FormData();
        form.set('file', new Blob([pictures[(i + n) % pictures.length]!]), `p${n}-${i}.png`);
        const sentAt = Date.now();
        const res = await s.api('/compress', { method: 'POST', body: form, key: keys[account] });
        if (res.status === 202) submitted.push({ id: (await json(res)).id, account, sentAt, acceptedAt: Date.now() });
        else {
          const body = await res.text();
          assert.equal(res.status, 429, body);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };
    const load = Promise.all([submitter('alice', 0), submitter('alice', 1), submitter('bob', 2)]);
    const statusOf = async (id: string, account: 'alice' | 'bob', server = s) => json(await server.api(`/compress/job/${id}`, { key: keys[account] }));
    /** Generous deadline: the machine may be loaded. */
    const loaded = { timeoutMs: 180_000 };
    const ended = (j: (typeof submitted)[number], server = s) => waitForJobStatus(j.id, () => statusOf(j.id, j.account, server), ENDED, loaded);
    // Under way: some jobs have ended, others are queued and running.
    await waitUntil('the first jobs to end', () => submitted.length >= 3, loaded);
    for (const j of submitted.slice(0, 3)) await ended(j);

    const file = join(scratch.path, 'snapshot.zip');
    const endedBefore = new Map<string, string>();
    for (const j of [...submitted]) {
      const st = await statusOf(j.id, j.account);
      if (ENDED.includes(st.status)) endedBefore.set(j.id, st.status);
    }
    const snapshotFrom = Date.now();
    const { stdout } = await cli('backup', '--data-dir', s.dataDir, '--out', file);
    const backupEnded = Date.now();
    const jobsAtCut = Number(/: (\d+) jobs, /.exec(stdout)?.[1]);
    const afterwards = registry.createKey('alice').key;
    await new Promise((r) => setTimeout(r, 500));
    loading = false;
    await load;
    assert.ok(endedBefore.size > 0 && submitted.some((j) => j.sentAt > backupEnded), 'jobs finished before the snapshot and were submitted after it');

    const outputs = new Map<string, string>();
    for (const j of submitted) {
      const st = await ended(j);
      if (st.status === 'Succeeded') outputs.set(j.id, sha256(await (await s.api(`/compress/job/${j.id}/download`, { key: keys[j.account] })).arrayBuffer()));
    }
    registry.close();
    assert.equal((await stat(file)).mode & 0o777, 0o600);

    const restoredDir = join(scratch.path, 'restored');
    await cli('restore', file, '--data-dir', restoredDir);
    for (const entry of await modes(restoredDir)) assert.equal(entry.mode, entry.dir ? 0o700 : 0o600, `mode of ${entry.path}`);
    await assert.rejects(cli('restore', file, '--data-dir', restoredDir), /is not empty/);

    const r = await startTestServer({ dataDir: restoredDir, workers: '2' });
    try {
      const present: typeof submitted = [];
      for (const j of submitted) {
        const res = await r.api(`/compress/job/${j.id}`, { key: keys[j.account] });
        if (res.status === 404) {
          await res.arrayBuffer();
          assert.ok(!endedBefore.has(j.id), `job ${j.id} ended before the snapshot and is lost`);
          assert.ok(j.acceptedAt > snapshotFrom, `job ${j.id} accepted before the snapshot and is lost`);
          continue;
        }
        assert.equal(res.status, 200);
        await res.arrayBuffer();
        assert.ok(j.sentAt < backupEnded, `job ${j.id} submitted after the snapshot is in it`);
        present.push(j);
      }
      assert.equal(present.length, jobsAtCut, 'the restored jobs are the jobs of the snapshot');
      assert.ok(present.some((j) => !endedBefore.has(j.id)), 'jobs were in flight at the snapshot');
      const spent = { alice: 0, bob: 0 };
      for (const j of present) {
        const st = await ended(j, r);
        if (endedBefore.has(j.id)) assert.equal(st.status, endedBefore.get(j.id), `status of ${j.id}`);
        else assert.equal(st.status, 'Succeeded', `job ${j.id}, in flight at the snapshot, finishes after the restore`);
        if (st.status === 'Succeeded') {
          spent[j.account] += st.metrics.creditCost;
          const res = await r.api(`/compress/job/${j.id}/download`, { key: keys[j.account] });
          assert.equal(res.status, 200);
          const sum = sha256(await res.arrayBuffer());
          if (endedBefore.has(j.id)) assert.equal(sum, outputs.get(j.id), `output of ${j.id}`);
        }
      }
      for (const account of ['alice', 'bob'] as const) {
        const me = await json(await r.api('/compress/entitlements/me', { key: keys[account] }));
        assert.equal(me.balance, 100_000 + (account === 'bob' ? 7 : 0) - spent[account], `balance of ${account}: one charge per job of the snapshot`);
      }
      assert.equal((await r.api('/compress/entitlements/me', { key: revoked })).status, 401);
      assert.equal((await r.api('/compress/entitlements/me', { key: afterwards })).status, 401, 'a key made after the snapshot');
      assert.equal((await r.api('/compress/entitlements/me', { key: s.key })).status, 200);
    } finally {
      await r.stop();
    }
  });

  it('restore checks every entry against its manifest: a crafted backup with a lying manifest is refused and leaves nothing', async () => {
    const file = join(scratch.path, 'honest.zip');
    await cli('backup', '--data-dir', s.dataDir, '--out', file);
    const entries = await unzip(await readFile(file));
    const manifest = JSON.parse(entries.get('compressd-backup.json')!.toString('utf8'));
    assert.deepEqual(manifest.files['jobs.log'], { bytes: entries.get('jobs.log')!.length, sha256: sha256(entries.get('jobs.log')!) });
    /** The backup again, with some entries' bytes (or the manifest) changed and the others as they were. */
    const crafted = async (name: string, change: Record<string, Buffer>) => {
      const zip = new yazl.ZipFile();
      for (const [entry, bytes] of entries) zip.addBuffer(change[entry] ?? bytes, entry);
      zip.end();
      const path = join(scratch.path, `${name}.zip`);
      await pipeline(zip.outputStream, createWriteStream(path));
      return path;
    };
    const token = Buffer.from(entries.get('download-token.key')!);
    token[0]! ^= 1;
    // A manifest as builds before checksums wrote it: lengths of the journals only.
    const { files: _files, ...unchecked } = manifest;
    const uncheckedManifest = Buffer.from(JSON.stringify(unchecked));
    const longJournal = Buffer.alloc(64 * 1024 * 1024, 0x41);
    const cases: [string, Record<string, Buffer>, RegExp][] = [
      // The review's case: a large jobs.log under a manifest that says it is small.
      ['longer', { 'jobs.log': longJournal }, /"jobs\.log" is longer than its manifest says/],
      ['altered', { 'download-token.key': token }, /"download-token\.key" has SHA-256 [0-9a-f]{64}/],
      ['bad-sums', { 'compressd-backup.json': Buffer.from(JSON.stringify({ ...manifest, files: { 'jobs.log': { bytes: 1 } } })) }, /gives no length and SHA-256 for its entries/],
      // Without checksums the lengths still hold: a journal to its manifest's, a job's file to what it takes in the archive.
      ['unchecked-longer', { 'compressd-backup.json': uncheckedManifest, 'jobs.log': longJournal }, /"jobs\.log" is longer than its manifest says/],
      ['unchecked-deflated', { 'compressd-backup.json': uncheckedManifest }, /"spool\/[^"]+" is compressed/],
    ];
    for (const [name, change, refusal] of cases) {
      const target = join(scratch.path, `restored-${name}`);
      await assert.rejects(cli('restore', await crafted(name, change), '--data-dir', target), refusal);
      await assert.rejects(stat(target), `${name}: no data dir`);
    }
    assert.deepEqual((await readdir(scratch.path)).filter((n) => n.includes('.restore-')), [], 'no half-restored directory left');
  });

  it('a backup made before checksums (test/fixtures/backups/) restores with a warning and serves its jobs', async () => {
    const golden = JSON.parse(await readFile(join(FIXTURES, '0.1.0', 'manifest.json'), 'utf8')) as GoldenManifest;
    const restoredDir = join(scratch.path, 'before-checksums');
    const { stdout, stderr } = await cli('restore', join(FIXTURES, 'backups', 'before-checksums.zip'), '--data-dir', restoredDir);
    assert.match(stderr, /has no checksums .* each entry was held to its declared length/);
    assert.match(stdout, /: 9 jobs, 12 files/);
    const r = await startTestServer({ dataDir: restoredDir, retentionSeconds: golden.retentionSeconds });
    try {
      const { keys, balances, jobs } = golden.files;
      const keyOf = (account: string) => keys.find((k) => k.account === account && k.state === 'active')!.key;
      for (const k of keys) {
        const res = await r.api('/compress/entitlements/me', { key: k.key });
        assert.equal(res.status, k.state === 'revoked' ? 401 : 200, `${k.state} key of ${k.account}`);
        if (res.ok) assert.equal((await json(res)).balance, balances[k.account], `balance of ${k.account}`);
        else await res.arrayBuffer();
      }
      for (const job of jobs) {
        assert.equal((await json(await r.api(`/compress/job/${job.id}`, { key: keyOf(job.account) }))).status, job.status, `job ${job.fileName}`);
        if (!job.output) continue;
        const res = await r.api(`/compress/job/${job.id}/download`, { key: keyOf(job.account) });
        assert.equal(res.status, 200);
        assert.equal(sha256(await res.arrayBuffer()), job.output, `output of ${job.fileName}`);
      }
    } finally {
      await r.stop();
    }
  });

  it('restore refuses a file that is not a compressd backup', async () => {
    const bogus = join(scratch.path, 'bogus.zip');
    await writeFile(bogus, 'not a zip');
    await assert.rejects(cli('restore', bogus, '--data-dir', join(scratch.path, 'nowhere')), /compressd: /);
    await assert.rejects(stat(join(scratch.path, 'nowhere')));
  });
});
