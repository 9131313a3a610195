// Cluster mode's cost and gain: the same jobs through one files-mode node, one cluster node and two
// cluster nodes (PostgreSQL + Swift S3 on loopback, as the tests start them), for a 768 KB JPEG and
// a 20 MB uncompressed TIFF. Per job (one at a time): submit → Succeeded, admission (the POST
// alone, p50 and p99), and the database queries and S3 requests of admission and of the run, read
// from the nodes' /metrics. Throughput of a batch spread over the nodes (the JPEG). Beside them
// the time one PutObject of the same bytes takes straight from the bench to Swift: what storing the
// input durably costs at least. Two cores are shared by everything, servers included.
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { openAsBlob } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { PgAccountRegistry } from '../../src/accounts/pg-registry.ts';
import { AccountRegistry } from '../../src/accounts/registry.ts';
import { openPool } from '../../src/jobs/cluster/database.ts';
import { s3ClientFromEnv } from '../../src/storage/s3.ts';
import { Daemon, freePort, scratchDir } from '../../test/helpers/daemons.ts';
import { startPostgres } from '../../test/helpers/pg.ts';
import { startSwift } from '../../test/helpers/swift.ts';
import { type BenchContext, markdownTable, median } from '../lib.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BATCH_JOBS = 36;
const ACCOUNTS = 3;

interface Input {
  label: string;
  file: string;
  /** Jobs one at a time. */
  sequential: number;
  /** Jobs submitted at once for the throughput figure (0: none). */
  batch: number;
}

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
  form.set('file', await openAsBlob(file), basename(file));
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

/** The I/O counters of every node, summed: `db:PATH`, `connect:PATH` and `s3:PATH:COMMAND`. */
async function ioCounts(nodes: Node[]): Promise<Map<string, number>> {
  const sums = new Map<string, number>();
  for (const node of nodes) {
    const text = await (await fetch(`${node.url}/metrics`)).text();
    for (const [, name, labels, value] of text.matchAll(/^compressd_(db_queries|db_connections|s3_requests)_total\{([^}]*)\} (\S+)$/gm)) {
      const label = (k: string) => new RegExp(`${k}="([^"]*)"`).exec(labels!)?.[1];
      const key = name === 's3_requests' ? `s3:${label('path')}:${label('command')}` : `${name === 'db_queries' ? 'db' : 'connect'}:${label('path')}`;
      sums.set(key, (sums.get(key) ?? 0) + Number(value));
    }
  }
  return sums;
}

function difference(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  return new Map([...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)]).filter(([, v]) => (v as number) > 0) as [string, number][]);
}

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

/** One job's I/O on `path`, as "9 queries; 1 PutObject" (medians over the jobs). */
function describeIo(perJob: Map<string, number>[], path: string): string {
  const keys = new Set(perJob.flatMap((m) => [...m.keys()]).filter((k) => k.split(':')[1] === path));
  const of = (k: string) => median(perJob.map((m) => m.get(k) ?? 0));
  const parts = [`${of(`db:${path}`)} queries`];
  if (of(`connect:${path}`) > 0) parts.push(`${of(`connect:${path}`)} connects`);
  const s3 = [...keys].filter((k) => k.startsWith('s3:')).sort();
  if (s3.length > 0) parts.push(s3.map((k) => `${of(k)} ${k.split(':')[2]}`).join(' + '));
  return parts.join('; ');
}

interface Figures {
  jobMs: number;
  admitP50: number;
  admitP99: number;
  jobsPerMinute: number | null;
  admissionIo: string;
  runIo: string;
}

async function measure(nodes: Node[], keys: string[], input: Input, counted: boolean): Promise<Figures> {
  const jobTimes: number[] = [];
  const admitTimes: number[] = [];
  const io: Map<string, number>[] = [];
  for (let i = 0; i < input.sequential; i++) {
    const node = nodes[i % nodes.length]!;
    const before = counted ? await ioCounts(nodes) : null;
    const t = performance.now();
    const { id, ms } = await submit(node, keys[0]!, input.file);
    await finished(node, keys[0]!, id);
    jobTimes.push(performance.now() - t);
    admitTimes.push(ms);
    if (before) io.push(difference(await ioCounts(nodes), before));
  }
  let jobsPerMinute: number | null = null;
  if (input.batch > 0) {
    const t = performance.now();
    const batch = await Promise.all(Array.from({ length: input.batch }, (_, i) => submit(nodes[i % nodes.length]!, keys[i % keys.length]!, input.file).then((s) => ({ ...s, i }))));
    await Promise.all(batch.map((s) => finished(nodes[s.i % nodes.length]!, keys[s.i % keys.length]!, s.id)));
    jobsPerMinute = (input.batch / (performance.now() - t)) * 60_000;
  }
  return {
    jobMs: median(jobTimes),
    admitP50: percentile(admitTimes, 50),
    admitP99: percentile(admitTimes, 99),
    jobsPerMinute,
    admissionIo: counted ? describeIo(io, 'admission') : '–',
    runIo: counted ? describeIo(io, 'run') : '–',
  };
}

/** A 20 MB uncompressed TIFF of a phone photo (3000 × 2250), as a scanner or a raw converter writes it. */
async function largeTiff(corpus: string, dir: string): Promise<string> {
  const path = join(dir, 'photo-3000x2250.tif');
  await sharp(join(corpus, 'jpg/phone-IMG_20180725_163423.jpg')).rotate().resize({ width: 3000 }).tiff({ compression: 'none' }).toFile(path);
  return path;
}

export default async function cluster(ctx: BenchContext): Promise<string> {
  const work = await scratchDir('compressd-bench-cluster-');
  const inputs: Input[] = [
    { label: '768 KB JPEG', file: join(ctx.corpus, 'jpg/jpeg420exif.jpg'), sequential: 20, batch: BATCH_JOBS },
    { label: '20 MB TIFF', file: await largeTiff(ctx.corpus, work.path), sequential: 8, batch: 0 },
  ];
  const [db, swift] = await Promise.all([startPostgres(), startSwift()]);
  Object.assign(process.env, swift.env);
  const s3 = s3ClientFromEnv();
  await s3.send(new CreateBucketCommand({ Bucket: 'bench' }));
  const rows: (string | number)[][] = [];
  const putRows: (string | number)[][] = [];
  const row = (setup: string, input: Input, f: Figures) => [
    setup,
    input.label,
    f.jobMs.toFixed(0),
    `${f.admitP50.toFixed(1)} / ${f.admitP99.toFixed(1)}`,
    f.jobsPerMinute === null ? '–' : f.jobsPerMinute.toFixed(0),
    f.admissionIo,
    f.runIo,
  ];
  try {
    for (const input of inputs) {
      const bytes = await readFile(input.file);
      const times: number[] = [];
      for (let i = 0; i < input.sequential; i++) {
        const t = performance.now();
        await s3.send(new PutObjectCommand({ Bucket: 'bench', Key: `put-alone/${i}`, Body: bytes }));
        times.push(performance.now() - t);
      }
      putRows.push([input.label, `${percentile(times, 50).toFixed(1)} / ${percentile(times, 99).toFixed(1)}`]);
    }

    const files = new AccountRegistry(join(work.path, 'files'));
    const fileKeys = Array.from({ length: ACCOUNTS }, (_, i) => (files.ensureAccount(`bench${i}`, 1_000_000), files.createKey(`bench${i}`).key));
    files.close();
    const single = await startNode(['--data-dir', join(work.path, 'files')], process.env);
    for (const input of inputs) rows.push(row('files mode, 1 node', input, await measure([single], fileKeys, input, false)));
    await single.daemon.stop();

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
        await accounts.ensureAccount(`bench${i}`, 1_000_000);
        keys.push((await accounts.createKey(`bench${i}`)).key);
      }
      await pool.end();
      for (const input of inputs) rows.push(row(`cluster mode, ${count} node${count > 1 ? 's' : ''}`, input, await measure(nodes, keys, input, true)));
      await Promise.all(nodes.map((n) => n.daemon.stop()));
    }
  } finally {
    s3.destroy();
    await Promise.all([db.stop(), swift.stop()]);
    await work.remove();
  }
  return [
    '## Cluster mode (PostgreSQL + S3) vs files mode',
    '',
    `One worker thread per node. Job: submit → Succeeded, median of ${inputs.map((i) => `${i.sequential} (${i.label})`).join(' and ')} one at a time (alternating nodes). Admission: the POST /compress alone, p50 / p99 (nearest rank) of those jobs. Per job, from the nodes' /metrics: PostgreSQL queries and S3 requests on the admission path (the POST) and on the run path (claim to end). Throughput: ${BATCH_JOBS} JPEG jobs submitted at once over ${ACCOUNTS} accounts, spread over the nodes. PostgreSQL and Swift run on the same 2 cores (load average at the end: ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(', ')}).`,
    '',
    markdownTable(['setup', 'input', 'job (ms)', 'admission p50 / p99 (ms)', 'jobs / minute', 'admission I/O per job', 'run I/O per job'], rows),
    '',
    'Storing the bytes once: one PutObject of the same file from the bench straight to Swift, p50 / p99 (ms) — the least a durable admission in cluster mode can add over files mode.',
    '',
    markdownTable(['input', 'PutObject p50 / p99 (ms)'], putRows),
  ].join('\n');
}
