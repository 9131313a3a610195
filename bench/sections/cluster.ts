// Cluster mode's cost and gain: the same small jobs through one files-mode node, one cluster node
// and two cluster nodes (PostgreSQL + Swift S3 on loopback, as the tests start them). Per-job
// latency (submit → Succeeded, one at a time), admission latency (the POST alone) and throughput
// of a batch spread over the nodes. Two cores are shared by everything, servers included.
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { openAsBlob } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PgAccountRegistry } from '../../src/accounts/pg-registry.ts';
import { AccountRegistry } from '../../src/accounts/registry.ts';
import { openPool } from '../../src/jobs/cluster/database.ts';
import { s3ClientFromEnv } from '../../src/storage/s3.ts';
import { Daemon, freePort, scratchDir } from '../../test/helpers/daemons.ts';
import { startPostgres } from '../../test/helpers/pg.ts';
import { startSwift } from '../../test/helpers/swift.ts';
import { type BenchContext, markdownTable, median } from '../lib.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SEQUENTIAL_JOBS = 10;
const BATCH_JOBS = 36;
const ACCOUNTS = 3;

interface Node {
  url: string;
  daemon: Daemon;
}

async function startNode(args: string[], env: NodeJS.ProcessEnv): Promise<Node> {
  const port = await freePort();
  const daemon = new Daemon('compressd', process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--port', String(port), '--host', '127.0.0.1', '--workers', '1', ...args], { cwd: ROOT, env });
  const url = `http://127.0.0.1:${port}`;
  await daemon.ready(async () => (await fetch(`${url}/healthz`)).ok, 60_000);
  return { url, daemon };
}

async function submit(node: Node, key: string, file: string): Promise<{ id: string; ms: number }> {
  const form = new FormData();
  form.set('file', await openAsBlob(file), 'photo.jpg');
  const t = performance.now();
  const res = await fetch(`${node.url}/compress`, { method: 'POST', body: form, headers: { 'x-service-api-key': key } });
  const ms = performance.now() - t;
  if (res.status !== 202) throw new Error(`submit: ${res.status} ${await res.text()}`);
  return { id: ((await res.json()) as { id: string }).id, ms };
}

async function finished(node: Node, key: string, id: string): Promise<void> {
  for (;;) {
    const job = (await (await fetch(`${node.url}/compress/job/${id}`, { headers: { 'x-service-api-key': key } })).json()) as { status: string };
    if (job.status === 'Succeeded') return;
    if (job.status === 'Failed' || job.status === 'Canceled') throw new Error(`job ${id} ${job.status}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Figures {
  jobMs: number;
  admitMs: number;
  jobsPerMinute: number;
}

async function measure(nodes: Node[], keys: string[], file: string): Promise<Figures> {
  const jobTimes: number[] = [];
  const admitTimes: number[] = [];
  for (let i = 0; i < SEQUENTIAL_JOBS; i++) {
    const node = nodes[i % nodes.length]!;
    const t = performance.now();
    const { id, ms } = await submit(node, keys[0]!, file);
    await finished(node, keys[0]!, id);
    jobTimes.push(performance.now() - t);
    admitTimes.push(ms);
  }
  const t = performance.now();
  const batch = await Promise.all(Array.from({ length: BATCH_JOBS }, (_, i) => submit(nodes[i % nodes.length]!, keys[i % keys.length]!, file).then((s) => ({ ...s, i }))));
  await Promise.all(batch.map((s) => finished(nodes[s.i % nodes.length]!, keys[s.i % keys.length]!, s.id)));
  return { jobMs: median(jobTimes), admitMs: median(admitTimes), jobsPerMinute: (BATCH_JOBS / (performance.now() - t)) * 60_000 };
}

export default async function cluster(ctx: BenchContext): Promise<string> {
  const file = join(ctx.corpus, 'jpg/jpeg420exif.jpg');
  const work = await scratchDir('compressd-bench-cluster-');
  const [db, swift] = await Promise.all([startPostgres(), startSwift()]);
  Object.assign(process.env, swift.env);
  await s3ClientFromEnv().send(new CreateBucketCommand({ Bucket: 'bench' }));
  const rows: (string | number)[][] = [];
  try {
    const files = new AccountRegistry(join(work.path, 'files'));
    const fileKeys = Array.from({ length: ACCOUNTS }, (_, i) => (files.ensureAccount(`bench${i}`, 100_000), files.createKey(`bench${i}`).key));
    files.close();
    const single = await startNode(['--data-dir', join(work.path, 'files')], process.env);
    const filesMode = await measure([single], fileKeys, file);
    await single.daemon.stop();
    rows.push(['files mode, 1 node', filesMode.jobMs.toFixed(0), filesMode.admitMs.toFixed(1), filesMode.jobsPerMinute.toFixed(0)]);

    for (const count of [1, 2]) {
      const url = await db.createDatabase(`bench${count}`);
      const nodes: Node[] = [];
      for (let n = 0; n < count; n++) {
        nodes.push(await startNode(['--data-dir', join(work.path, `c${count}-${n}`), '--database-url', url, '--storage', `s3://bench/run${count}`, '--node-id', `n${n}`], process.env));
      }
      const pool = openPool(url);
      const accounts = new PgAccountRegistry(pool);
      const keys: string[] = [];
      for (let i = 0; i < ACCOUNTS; i++) {
        await accounts.ensureAccount(`bench${i}`, 100_000);
        keys.push((await accounts.createKey(`bench${i}`)).key);
      }
      await pool.end();
      const figures = await measure(nodes, keys, file);
      rows.push([`cluster mode, ${count} node${count > 1 ? 's' : ''}`, figures.jobMs.toFixed(0), figures.admitMs.toFixed(1), figures.jobsPerMinute.toFixed(0)]);
      await Promise.all(nodes.map((n) => n.daemon.stop()));
    }
  } finally {
    await Promise.all([db.stop(), swift.stop()]);
    await work.remove();
  }
  return [
    '## Cluster mode (PostgreSQL + S3) vs files mode',
    '',
    `A ${(await openAsBlob(file)).size} byte JPEG; one worker thread per node. Job: submit → Succeeded, median of ${SEQUENTIAL_JOBS} one at a time (alternating nodes). Admission: the POST /compress alone. Throughput: ${BATCH_JOBS} jobs submitted at once over ${ACCOUNTS} accounts, spread over the nodes. PostgreSQL and Swift run on the same 2 cores.`,
    '',
    markdownTable(['setup', 'job (ms)', 'admission (ms)', 'jobs / minute'], rows),
  ].join('\n');
}
