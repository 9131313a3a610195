// The API's own cost: per small job, the time the service adds around the compressor (submit,
// queue, pool hand-off, journal, poll), and the server's memory while a 1 GB upload streams
// through it (target: RSS grows by at most 100 MB).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstKeyIn } from '../../src/accounts/first-key.ts';
import { compress } from '../../workers/png.ts';
import { type BenchContext, markdownTable, median } from '../lib.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const UPLOAD_BYTES = 1_000_000_000;
const SMALL_JOBS = 20;

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

export async function startServer(workers = 1): Promise<{ child: ChildProcess; base: string; key: string; dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'compressd-bench-api-'));
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', dataDir, '--workers', String(workers)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const key = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const k = out.includes('listening') ? firstKeyIn(dataDir) : null;
      if (k) resolve(k);
    });
    child.once('exit', () => reject(new Error(`server exited: ${out}`)));
  });
  return { child, base: `http://127.0.0.1:${port}`, key, dataDir };
}

/** A multipart body streamed from nothing: one "file" part of `size` bytes that no compressor accepts as a JPEG. */
function hugeMultipart(size: number): { body: ReadableStream<Uint8Array>; contentType: string; length: number } {
  const boundary = `----compressd-bench-${Date.now()}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="huge.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const chunk = Buffer.alloc(1024 * 1024, 0x5a);
  let sent = 0;
  let stage = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (stage === 0) {
        controller.enqueue(head);
        stage = 1;
      } else if (stage === 1) {
        const n = Math.min(chunk.length, size - sent);
        controller.enqueue(n === chunk.length ? chunk : chunk.subarray(0, n));
        sent += n;
        if (sent >= size) stage = 2;
      } else {
        controller.enqueue(tail);
        controller.close();
      }
    },
  });
  return { body, contentType: `multipart/form-data; boundary=${boundary}`, length: head.length + size + tail.length };
}

export default async function api(ctx: BenchContext): Promise<string> {
  const png = join(ctx.corpus, 'png/baiona_alpha.png');
  const { child, base, key, dataDir } = await startServer();
  const headers = { 'x-service-api-key': key };
  const rows: (string | number)[][] = [];
  try {
    const submitMs: number[] = [];
    const totalMs: number[] = [];
    const workerMs: number[] = [];
    for (let i = 0; i < SMALL_JOBS; i++) {
      const form = new FormData();
      form.set('file', new Blob([readFileSync(png)]), 'small.png');
      form.set('options', JSON.stringify({ compression: { mode: 'lossless' } }));
      const t0 = performance.now();
      const res = await fetch(`${base}/compress`, { method: 'POST', body: form, headers });
      const { id } = (await res.json()) as { id: string };
      submitMs.push(performance.now() - t0);
      let job: { status: string; startedAt: string; completedAt: string };
      do {
        await new Promise((r) => setTimeout(r, 5));
        job = (await (await fetch(`${base}/compress/job/${id}`, { headers })).json()) as typeof job;
      } while (job.status === 'Queued' || job.status === 'Running');
      totalMs.push(performance.now() - t0);
      const out = await mkdtemp(join(tmpdir(), 'compressd-bench-direct-'));
      const d0 = performance.now();
      await compress({ inputPath: png, format: 'png', options: { compression: { mode: 'lossless' } } }, { dir: out }, { signal: new AbortController().signal, progress: () => {} });
      workerMs.push(performance.now() - d0);
      await rm(out, { recursive: true, force: true });
    }
    rows.push(['small PNG job, submit → 202', `${median(submitMs).toFixed(1)} ms`]);
    rows.push(['small PNG job, submit → Succeeded (polling every 5 ms)', `${median(totalMs).toFixed(1)} ms`]);
    rows.push(['same compression called directly', `${median(workerMs).toFixed(1)} ms`]);
    rows.push(['API overhead per small job (median difference)', `${(median(totalMs) - median(workerMs)).toFixed(1)} ms`]);

    const before = rssBytes(child.pid!);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(child.pid!))), 25);
    const upload = hugeMultipart(UPLOAD_BYTES);
    const t0 = performance.now();
    const res = await fetch(`${base}/compress`, {
      method: 'POST',
      body: upload.body,
      headers: { ...headers, 'content-type': upload.contentType, 'content-length': String(upload.length) },
      duplex: 'half',
    } as RequestInit);
    const accepted = (await res.json()) as { id?: string; error?: string };
    const uploadMs = performance.now() - t0;
    clearInterval(sampler);
    if (accepted.id) await fetch(`${base}/compress/job/${accepted.id}/cancel`, { method: 'POST', headers });
    rows.push(['1 GB upload: answer', `${res.status} ${accepted.error ?? 'accepted'}`]);
    rows.push(['1 GB upload: time', `${(uploadMs / 1000).toFixed(1)} s (${(UPLOAD_BYTES / 1e6 / (uploadMs / 1000)).toFixed(0)} MB/s)`]);
    rows.push(['1 GB upload: server RSS before → peak', `${(before / 1048576).toFixed(0)} MB → ${(peak / 1048576).toFixed(0)} MB`]);
    rows.push(['1 GB upload: RSS growth (target ≤ 100 MB)', `${((peak - before) / 1048576).toFixed(0)} MB`]);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
  return `## API overhead and memory\n\n${SMALL_JOBS} small jobs, one at a time, one worker thread; then one 1 GB streamed upload.\n\n${markdownTable(['measure', 'value'], rows)}\n`;
}
