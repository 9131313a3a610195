// `npm run bench load`: N concurrent clients against a real server for a set time, each looping
// over a mix of uploads, status polls, downloads, cancels and bad requests. Reports requests/s,
// status-poll latency while every worker is busy, the 5xx count (must be 0) and server RSS.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchContext, markdownTable } from '../lib.ts';
import { freePort, rssBytes } from './api.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLIENTS = Number(process.env.LOAD_CLIENTS ?? 32);
const SECONDS = Number(process.env.LOAD_SECONDS ?? 30);
const WORKERS = Number(process.env.LOAD_WORKERS ?? 2);
const ACCOUNTS = 4;

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function startServer(dataDir: string): Promise<{ child: ChildProcess; base: string; keys: string[] }> {
  const cli = (...args: string[]) => execFileSync(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args, '--data-dir', dataDir], { cwd: ROOT, encoding: 'utf8' });
  const keys = Array.from({ length: ACCOUNTS }, (_, i) => cli('keys', 'create', '--account', `load-${i}`, '--credits', '1000000').trim().split('\n').pop()!);
  const port = await freePort();
  // The per-IP rate limit is off: every client shares one address, and the server's own capacity is measured.
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/main.ts', 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', dataDir, '--workers', String(WORKERS), '--rate-limit-per-minute', '0'],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, COMPRESSD_LOG_LEVEL: 'warn' } },
  );
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch {
      if (i > 300) throw new Error('the server did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { child, base, keys };
}

interface Tally {
  requests: number;
  statuses: Map<number, number>;
  busyPolls: number[];
  otherPolls: number[];
  dropped: number;
}

export default async function load(ctx: BenchContext): Promise<string> {
  const files = [
    ['jpg/jpeg420exif.jpg', 'photo.jpg'],
    ['png/baiona_alpha.png', 'alpha.png'],
    ['gif/lena.gif', 'lena.gif'],
    ['pdf/ocrmypdf-cardinal-scan.pdf', 'scan.pdf'],
  ].map(([path, name]) => ({ data: readFileSync(join(ctx.corpus, path!)), name: name! }));
  const truncated = Buffer.from('--xx\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n\xff\xd8 partial', 'latin1');
  const dataDir = mkdtempSync(join(tmpdir(), 'compressd-bench-load-'));
  const { child, base, keys } = await startServer(dataDir);
  const tally: Tally = { requests: 0, statuses: new Map(), busyPolls: [], otherPolls: [], dropped: 0 };
  let allBusy = false;
  let peakRss = rssBytes(child.pid!);
  const startRss = peakRss;
  const sampler = setInterval(async () => {
    peakRss = Math.max(peakRss, rssBytes(child.pid!));
    try {
      const text = await (await fetch(`${base}/metrics`)).text();
      allBusy = Number(/^compressd_jobs_running (\S+)/m.exec(text)?.[1] ?? 0) >= WORKERS;
    } catch {
      allBusy = false;
    }
  }, 200);

  const deadline = Date.now() + SECONDS * 1000;
  const call = async (path: string, init: RequestInit & { key: string }): Promise<Response | null> => {
    tally.requests++;
    try {
      const res = await fetch(base + path, { ...init, headers: { 'x-service-api-key': init.key, ...(init.headers as Record<string, string>) } });
      tally.statuses.set(res.status, (tally.statuses.get(res.status) ?? 0) + 1);
      return res;
    } catch {
      tally.dropped++;
      return null;
    }
  };

  const client = async (n: number) => {
    const key = keys[n % keys.length]!;
    const mine: string[] = [];
    let step = 0;
    while (Date.now() < deadline) {
      const roll = (step++ * 37 + n * 11) % 100;
      if (roll < 15) {
        const f = files[(step + n) % files.length]!;
        const form = new FormData();
        form.set('file', new Blob([f.data]), f.name);
        const res = await call('/compress', { method: 'POST', body: form, key });
        const body = res ? ((await res.json()) as { id?: string }) : {};
        if (body.id) mine.push(body.id);
      } else if (roll < 65 && mine.length > 0) {
        const id = mine[step % mine.length]!;
        const busy = allBusy;
        const t0 = performance.now();
        const res = await call(`/compress/job/${id}`, { key });
        if (res) await res.arrayBuffer();
        (busy ? tally.busyPolls : tally.otherPolls).push(performance.now() - t0);
      } else if (roll < 75 && mine.length > 0) {
        const res = await call(`/compress/job/${mine[step % mine.length]}/download`, { key });
        if (res) await res.arrayBuffer();
      } else if (roll < 80 && mine.length > 0) {
        const res = await call(`/compress/job/${mine.pop()}/cancel`, { method: 'POST', key });
        if (res) await res.arrayBuffer();
      } else {
        const bad = [
          () => call('/compress', { method: 'POST', body: truncated, headers: { 'content-type': 'multipart/form-data; boundary=xx' }, key }),
          () => call('/compress', { method: 'POST', body: '{"inputUrl":', headers: { 'content-type': 'application/json' }, key }),
          () => call('/compress/job/not-a-job', { key }),
          () => call('/compress/compressors', { key: 'sk_wrong' }),
          () => call('/no/such/route', { method: 'DELETE', key }),
        ];
        const res = await bad[step % bad.length]!();
        if (res) await res.arrayBuffer();
      }
    }
  };

  const started = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n)));
  const elapsed = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const endRss = rssBytes(child.pid!);
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });

  const fiveXx = [...tally.statuses].filter(([s]) => s >= 500).reduce((a, [, n]) => a + n, 0);
  const ms = (v: number) => (Number.isNaN(v) ? 'n/a' : `${v.toFixed(1)} ms`);
  const rows = [
    ['requests', `${tally.requests} in ${elapsed.toFixed(1)} s`],
    ['requests/s', (tally.requests / elapsed).toFixed(0)],
    [`status poll p50 / p99, all ${WORKERS} workers busy (${tally.busyPolls.length} polls)`, `${ms(percentile(tally.busyPolls, 50))} / ${ms(percentile(tally.busyPolls, 99))}`],
    [`status poll p50 / p99, otherwise (${tally.otherPolls.length} polls)`, `${ms(percentile(tally.otherPolls, 50))} / ${ms(percentile(tally.otherPolls, 99))}`],
    ['5xx answers (must be 0)', String(fiveXx)],
    ['connections dropped by the server', String(tally.dropped)],
    ['statuses', [...tally.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')],
    ['server RSS start → peak → end', `${(startRss / 1048576).toFixed(0)} → ${(peakRss / 1048576).toFixed(0)} → ${(endRss / 1048576).toFixed(0)} MB`],
  ];
  return `## Load\n\n${CLIENTS} concurrent clients for ${SECONDS} s against one server (${WORKERS} worker threads, ${ACCOUNTS} accounts, rate limit off): 15 % uploads of small corpus files, 50 % status polls, 10 % downloads, 5 % cancels, 20 % bad requests (a multipart body cut inside the file part, broken JSON, unknown job, wrong key, unknown route).\n\n${markdownTable(['measure', 'value'], rows)}\n`;
}
