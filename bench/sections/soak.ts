// `npm run bench soak [-- --minutes N]`: an operator's busy day, reproducibly. One server (2 workers),
// 3 accounts kept near their 18-open-job limit by 2 clients each, a seeded mix of uploads (corpus
// files and bad files), polls, downloads, cancels and deletes, with short retentions. Samples RSS,
// JS heap, descriptors, threads, data-dir and journal sizes and poll latency every 30 s; then rests
// past both retentions, restarts, and prints the table and the slopes per 1,000 jobs.
// SOAK_JOBS (default 10,000), SOAK_MINUTES (or --minutes: stop at whichever comes first),
// SOAK_SEED, SOAK_SAMPLE_SECONDS, SOAK_RETENTION_SECONDS (both retentions), SOAK_ROOT (the checkout
// whose server is run: measure another version with the same load), SOAK_BINARY (run that single
// executable instead of the checkout's source: what users run, on the allocator it carries).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchContext, markdownTable } from '../lib.ts';
import { freePort, rssBytes } from './api.ts';

export interface SoakOptions {
  jobs: number;
  minutes: number;
  seed: number;
  sampleSeconds: number;
  retentionSeconds: number;
  corpus: string;
  root: string;
  workers: number;
  /** A single executable to run instead of `root`'s source. */
  binary?: string;
  log?: (line: string) => void;
}

/** The command that runs `compressd ARGS`: the executable, or the source through tsx. */
function compressd(opts: SoakOptions): [string, string[]] {
  return opts.binary ? [opts.binary, []] : [process.execPath, ['--import', 'tsx', 'src/main.ts']];
}

export interface Sample {
  phase: 'load' | 'rest' | 'restarted';
  seconds: number;
  jobs: number;
  rssMB: number;
  heapMB: number;
  /** The heap V8 holds (used or not) and the memory of Buffers outside it: what RSS has beyond native code. */
  heapTotalMB: number;
  externalMB: number;
  fds: number;
  threads: number;
  dataDirMB: number;
  journalsKB: { jobs: number; ledger: number; outbox: number };
  pollP50: number;
  pollP99: number;
}

export interface SoakResult {
  samples: Sample[];
  jobs: number;
  statuses: Map<number, number>;
  fiveXx: number;
  spoolEntriesAtRest: number;
  /** jobs.log at rest, and as the restart's compaction left it (live records only). */
  jobsLogAtRest: number;
  jobsLogAfterRestart: number;
  restartMs: number;
  restartWorks: boolean;
  freshRssMB: number;
}

const ACCOUNTS = 3;
const CLIENTS_PER_ACCOUNT = 2;

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    try {
      total += e.isDirectory() ? dirBytes(p) : statSync(p).size;
    } catch {
      // Deleted while walked.
    }
  }
  return total;
}

const sizeOf = (path: string) => (existsSync(path) ? statSync(path).size : 0);

async function startServer(opts: SoakOptions, dataDir: string): Promise<{ child: ChildProcess; base: string; ms: number }> {
  const port = await freePort();
  const started = performance.now();
  const [file, prefix] = compressd(opts);
  const child = spawn(
    file,
    [...prefix, 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', dataDir, '--workers', String(opts.workers), '--rate-limit-per-minute', '0', '--retention-seconds', String(opts.retentionSeconds)],
    // The environment twin: a version without the setting ignores it (and keeps its 24 h).
    { cwd: opts.root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, COMPRESSD_LOG_LEVEL: 'warn', COMPRESSD_RECORD_RETENTION_SECONDS: String(opts.retentionSeconds) } },
  );
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return { child, base, ms: performance.now() - started };
    } catch {
      if (i > 600 || child.exitCode !== null) throw new Error('the server did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await gone;
}

export async function runSoak(opts: SoakOptions): Promise<SoakResult> {
  const log = opts.log ?? (() => {});
  const dataDir = mkdtempSync(join(tmpdir(), 'compressd-soak-'));
  const [file, prefix] = compressd(opts);
  const cli = (...args: string[]) => execFileSync(file, [...prefix, ...args, '--data-dir', dataDir], { cwd: opts.root, encoding: 'utf8' });
  const keys = Array.from({ length: ACCOUNTS }, (_, i) => cli('keys', 'create', '--account', `soak-${i}`, '--credits', '100000000').trim().split('\n').pop()!);
  const good = [
    ['jpg/jpeg420exif.jpg', 'photo.jpg'],
    ['png/baiona_alpha.png', 'alpha.png'],
    ['gif/lena.gif', 'lena.gif'],
    ['pdf/ocrmypdf-cardinal-scan.pdf', 'scan.pdf'],
  ].map(([path, name]) => ({ data: readFileSync(join(opts.corpus, path!)), name: name! }));
  const bad = ['bad-crc.png', 'empty.jpg', 'huge-dimensions.png', 'truncated.jpg', 'actually-pdf.jpg'].map((name) => ({ data: readFileSync(join(opts.corpus, 'bad', name)), name }));

  let server = await startServer(opts, dataDir);
  const statuses = new Map<number, number>();
  let jobs = 0;
  let polls: number[] = [];
  const samples: Sample[] = [];
  const t0 = performance.now();
  const metric = async (name: string): Promise<number> => {
    try {
      const text = await (await fetch(`${server.base}/metrics`)).text();
      return Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
    } catch {
      return NaN;
    }
  };
  const sample = async (phase: Sample['phase']) => {
    const pid = server.child.pid!;
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const s: Sample = {
      phase,
      seconds: Math.round((performance.now() - t0) / 1000),
      jobs,
      rssMB: rssBytes(pid) / 1048576,
      heapMB: (await metric('compressd_nodejs_heap_size_used_bytes')) / 1048576,
      heapTotalMB: (await metric('compressd_nodejs_heap_size_total_bytes')) / 1048576,
      externalMB: (await metric('compressd_nodejs_external_memory_bytes')) / 1048576,
      fds: readdirSync(`/proc/${pid}/fd`).length,
      threads: Number(/Threads:\s+(\d+)/.exec(status)?.[1] ?? NaN),
      dataDirMB: dirBytes(dataDir) / 1048576,
      journalsKB: { jobs: sizeOf(join(dataDir, 'jobs.log')) / 1024, ledger: sizeOf(join(dataDir, 'ledger.log')) / 1024, outbox: sizeOf(join(dataDir, 'webhooks', 'outbox.jsonl')) / 1024 },
      pollP50: percentile(polls, 50),
      pollP99: percentile(polls, 99),
    };
    polls = [];
    samples.push(s);
    log(`soak: ${phase} ${s.seconds} s, ${s.jobs} jobs, RSS ${s.rssMB.toFixed(0)} MB, heap ${s.heapMB.toFixed(0)} MB, jobs.log ${s.journalsKB.jobs.toFixed(0)} KB`);
  };

  const deadline = Date.now() + opts.minutes * 60_000;
  const done = () => jobs >= opts.jobs || Date.now() >= deadline;
  const call = async (path: string, key: string, init: RequestInit = {}): Promise<Response | null> => {
    try {
      const res = await fetch(server.base + path, { ...init, headers: { 'x-service-api-key': key, ...(init.headers as Record<string, string>) } });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      return res;
    } catch {
      statuses.set(0, (statuses.get(0) ?? 0) + 1);
      return null;
    }
  };
  const client = async (n: number) => {
    const rand = mulberry32(opts.seed * 1000 + n);
    const key = keys[n % ACCOUNTS]!;
    const mine: string[] = [];
    const pick = () => mine[Math.floor(rand() * mine.length)]!;
    while (!done()) {
      const roll = rand();
      if (roll < 0.3 || mine.length === 0) {
        const f = rand() < 0.85 ? good[Math.floor(rand() * good.length)]! : bad[Math.floor(rand() * bad.length)]!;
        const form = new FormData();
        form.set('file', new Blob([f.data]), f.name);
        const res = await call('/compress', key, { method: 'POST', body: form });
        const body = res ? ((await res.json()) as { id?: string }) : {};
        if (res?.status === 202 && body.id) {
          jobs++;
          mine.push(body.id);
          if (mine.length > 60) mine.shift();
        } else await new Promise((r) => setTimeout(r, 100)); // at the account's limit: let jobs end
      } else if (roll < 0.7) {
        const started = performance.now();
        const res = await call(`/compress/job/${pick()}`, key);
        await res?.arrayBuffer();
        polls.push(performance.now() - started);
      } else if (roll < 0.82) {
        await (await call(`/compress/job/${pick()}/download`, key))?.arrayBuffer();
      } else if (roll < 0.88) {
        await (await call(`/compress/job/${pick()}/cancel`, key, { method: 'POST' }))?.arrayBuffer();
      } else {
        const id = pick();
        const res = await call(`/compress/job/${id}`, key, { method: 'DELETE' });
        await res?.arrayBuffer();
        if (res && res.status < 300) mine.splice(mine.indexOf(id), 1);
      }
    }
  };
  let sampling = Promise.resolve();
  const sampler = setInterval(() => (sampling = sampling.then(() => sample('load'))), opts.sampleSeconds * 1000);
  await sample('load');
  await Promise.all(Array.from({ length: ACCOUNTS * CLIENTS_PER_ACCOUNT }, (_, n) => client(n)));
  clearInterval(sampler);
  await sampling;
  await sample('load');
  // The jobs still queued at the end run first; retention counts from their end.
  for (let i = 0; i < 6000 && (await metric('compressd_jobs_queued')) + (await metric('compressd_jobs_running')) !== 0; i++) await new Promise((r) => setTimeout(r, 100));
  // Rest past both retentions and two sweeps (a sweep runs every retention/4, at most 60 s).
  const sweepEvery = Math.min(60, Math.max(0.2, opts.retentionSeconds / 4));
  const restUntil = Date.now() + (2 * opts.retentionSeconds + 2 * sweepEvery + 2) * 1000;
  while (Date.now() < restUntil) {
    await new Promise((r) => setTimeout(r, Math.min(opts.sampleSeconds * 1000, restUntil - Date.now())));
    await sample('rest');
  }
  const spool = join(dataDir, 'spool');
  const spoolEntriesAtRest = existsSync(spool) ? readdirSync(spool).length : 0;
  const jobsLogAtRest = sizeOf(join(dataDir, 'jobs.log'));
  await stop(server.child);
  server = await startServer(opts, dataDir);
  const restartMs = server.ms;
  const jobsLogAfterRestart = sizeOf(join(dataDir, 'jobs.log'));
  const form = new FormData();
  form.set('file', new Blob([good[2]!.data]), good[2]!.name);
  const submitted = (await (await call('/compress', keys[0]!, { method: 'POST', body: form }))?.json()) as { id?: string } | undefined;
  let restartWorks = false;
  for (let i = 0; i < 600 && submitted?.id && !restartWorks; i++) {
    const job = (await (await call(`/compress/job/${submitted.id}`, keys[0]!))?.json()) as { status?: string } | undefined;
    restartWorks = job?.status === 'Succeeded';
    if (!restartWorks) await new Promise((r) => setTimeout(r, 100));
  }
  await sample('restarted');
  const freshRssMB = samples.at(-1)!.rssMB;
  await stop(server.child);
  rmSync(dataDir, { recursive: true, force: true });
  const fiveXx = [...statuses].filter(([s]) => s >= 500).reduce((a, [, n]) => a + n, 0);
  return { samples, jobs, statuses, fiveXx, spoolEntriesAtRest, jobsLogAtRest, jobsLogAfterRestart, restartMs, restartWorks, freshRssMB };
}

/** Least-squares slope of `y` against jobs (per 1,000 jobs) over the load phase, after its first sample (the warm-up is a step, not a slope). */
function slope(samples: Sample[], y: (s: Sample) => number): number {
  const pts = samples.filter((s) => s.phase === 'load' && s.jobs > 0 && Number.isFinite(y(s)));
  const n = pts.length;
  if (n < 2) return NaN;
  const mx = pts.reduce((a, s) => a + s.jobs, 0) / n;
  const my = pts.reduce((a, s) => a + y(s), 0) / n;
  const sxx = pts.reduce((a, s) => a + (s.jobs - mx) ** 2, 0);
  return sxx === 0 ? NaN : (pts.reduce((a, s) => a + (s.jobs - mx) * (y(s) - my), 0) / sxx) * 1000;
}

export function soakReport(r: SoakResult, opts: SoakOptions): string {
  const f = (v: number, d = 0) => (Number.isFinite(v) ? v.toFixed(d) : 'n/a');
  const measures: [string, (s: Sample) => number, number][] = [
    ['RSS MB', (s) => s.rssMB, 0],
    ['JS heap MB', (s) => s.heapMB, 1],
    ['V8 heap held MB', (s) => s.heapTotalMB, 1],
    ['external MB', (s) => s.externalMB, 1],
    ['descriptors', (s) => s.fds, 0],
    ['threads', (s) => s.threads, 0],
    ['data dir MB', (s) => s.dataDirMB, 1],
    ['jobs.log KB', (s) => s.journalsKB.jobs, 0],
    ['ledger.log KB', (s) => s.journalsKB.ledger, 0],
    ['outbox KB', (s) => s.journalsKB.outbox, 0],
  ];
  const rows = r.samples.map((s) => [s.phase, s.seconds, s.jobs, ...measures.map(([, y, d]) => f(y(s), d)), `${f(s.pollP50, 1)} / ${f(s.pollP99, 1)}`]);
  const slopes = measures.map(([name, y]) => [name, f(slope(r.samples, y), 2)]);
  const rest = r.samples.filter((s) => s.phase === 'rest').at(-1);
  const summary = [
    ['jobs accepted', String(r.jobs)],
    ['5xx answers (must be 0)', String(r.fiveXx)],
    ['statuses', [...r.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')],
    ['RSS at rest → after restart', `${f(rest?.rssMB ?? NaN)} → ${f(r.freshRssMB)} MB`],
    ['spool entries at rest (must be 0)', String(r.spoolEntriesAtRest)],
    ['jobs.log at rest → after restart', `${f(r.jobsLogAtRest / 1024)} → ${f(r.jobsLogAfterRestart / 1024)} KB`],
    ['restart: spawn to /healthz', `${f(r.restartMs)} ms`],
    ['a job after the restart succeeds', String(r.restartWorks)],
  ];
  return [
    '## Soak',
    '',
    `${r.jobs} jobs (target ${opts.jobs}, at most ${opts.minutes} min), seed ${opts.seed}, ${opts.binary ? `the executable ${opts.binary}` : 'the source (tsx)'}, ${opts.workers} workers, ${ACCOUNTS} accounts × ${CLIENTS_PER_ACCOUNT} clients, retention and record retention ${opts.retentionSeconds} s; sampled every ${opts.sampleSeconds} s, then a rest past both retentions and a restart.`,
    '',
    markdownTable(['phase', 's', 'jobs', ...measures.map(([n]) => n), 'poll p50 / p99 ms'], rows),
    '',
    'Slopes per 1,000 jobs over the load phase:',
    '',
    markdownTable(['measure', 'per 1,000 jobs'], slopes),
    '',
    markdownTable(['measure', 'value'], summary),
    '',
  ].join('\n');
}

export default async function soak(ctx: BenchContext): Promise<string> {
  const arg = process.argv.indexOf('--minutes');
  const opts: SoakOptions = {
    jobs: Number(process.env.SOAK_JOBS ?? 10_000),
    minutes: Number(arg >= 0 ? process.argv[arg + 1] : (process.env.SOAK_MINUTES ?? 600)),
    seed: Number(process.env.SOAK_SEED ?? 1),
    sampleSeconds: Number(process.env.SOAK_SAMPLE_SECONDS ?? 30),
    retentionSeconds: Number(process.env.SOAK_RETENTION_SECONDS ?? 60),
    corpus: ctx.corpus,
    root: process.env.SOAK_ROOT ?? fileURLToPath(new URL('../../', import.meta.url)),
    workers: Number(process.env.SOAK_WORKERS ?? 2),
    binary: process.env.SOAK_BINARY ? resolve(process.env.SOAK_BINARY) : undefined,
    log: (line) => console.log(line),
  };
  return soakReport(await runSoak(opts), opts);
}
