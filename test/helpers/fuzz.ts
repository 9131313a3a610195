// The fuzzers' shared parts: a seeded generator, raw HTTP exchanges over node:net, and the
// invariants checked after every case (alive, no 5xx but 503, jobs end, no held credit,
// a spool with live jobs only, outputs that decode).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import yauzl from 'yauzl';
import { json, type TestServer } from './server.ts';

const exec = promisify(execFile);

/** mulberry32: small, fast and the same on every platform. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

/** Seed and case count: fixed in CI, from FUZZ_SEED / COMPRESSD_FUZZ_CASES for long runs. */
export function fuzzSettings(name: string, defaultCases: number, casesVar = 'COMPRESSD_FUZZ_CASES'): { seed: number; cases: number } {
  const seed = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 20261123;
  const cases = process.env[casesVar] ? Number(process.env[casesVar]) : defaultCases;
  assert.ok(Number.isInteger(seed) && Number.isInteger(cases) && cases > 0, `FUZZ_SEED and ${casesVar} must be whole numbers`);
  console.log(`${name}: seed ${seed}, ${cases} cases (FUZZ_SEED=${seed} ${casesVar}=${cases} to replay)`);
  return { seed, cases };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Splits what a server sent on one connection into responses (Content-Length, chunked or to the end). */
export function parseResponses(data: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let at = 0;
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const lines = data.subarray(at, headEnd).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!);
    if (!m) break;
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let body: Buffer;
    let next: number;
    if (headers['content-length'] !== undefined) {
      next = headEnd + 4 + Number(headers['content-length']);
      body = data.subarray(headEnd + 4, next);
    } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const parts: Buffer[] = [];
      let p = headEnd + 4;
      for (;;) {
        const lineEnd = data.indexOf('\r\n', p);
        if (lineEnd < 0) break;
        const size = parseInt(data.subarray(p, lineEnd).toString('latin1'), 16);
        if (!Number.isFinite(size)) break;
        parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
        p = lineEnd + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(parts);
      next = p;
    } else {
      body = data.subarray(headEnd + 4);
      next = data.length;
    }
    out.push({ status: Number(m[1]), headers, body });
    at = next;
  }
  return out;
}

export interface RawOptions {
  /** Destroy the connection after sending this many bytes (the client is gone). */
  abortAfter?: number;
  /** Half-close after sending, so the server sees the end of the stream. */
  halfClose?: boolean;
  /** Destroy the connection once this many response bytes arrived (an aborted download). */
  readLimit?: number;
  /** How long to wait for the server to answer or close. */
  waitMs: number;
}

/** Sends `chunks` on one connection and collects everything the server answers until it closes or `waitMs` passes. */
export function rawExchange(port: number, chunks: Buffer[], opts: RawOptions): Promise<{ data: Buffer; ending: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (ending: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ data: Buffer.concat(received), ending });
    };
    const timer = setTimeout(() => finish(`no answer or close within ${opts.waitMs} ms`), opts.waitMs);
    socket.on('error', (err: NodeJS.ErrnoException) => finish(`socket error ${err.code} (${socket.connecting ? 'connecting' : 'connected'})`));
    socket.on('close', () => finish('closed by the server'));
    socket.on('data', (d) => {
      received.push(d);
      size += d.length;
      if (opts.readLimit !== undefined && size >= opts.readLimit) finish('download aborted');
    });
    socket.on('connect', async () => {
      let sent = 0;
      for (const chunk of chunks) {
        if (done) return;
        if (opts.abortAfter !== undefined && sent + chunk.length >= opts.abortAfter) {
          socket.write(chunk.subarray(0, opts.abortAfter - sent));
          setImmediate(() => finish('upload aborted'));
          return;
        }
        socket.write(chunk);
        sent += chunk.length;
        if (chunks.length > 1) await new Promise((r) => setImmediate(r));
      }
      if (opts.halfClose) socket.end();
    });
  });
}

const IMAGE_FORMATS = new Set(['jpg', 'png', 'gif', 'webp', 'avif']);

/** Throws unless `data` is a readable file of `format` (images fully decoded). */
export async function assertDecodes(data: Buffer, format: string): Promise<void> {
  if (IMAGE_FORMATS.has(format)) {
    const { info } = await sharp(data, { animated: true, limitInputPixels: false }).raw().toBuffer({ resolveWithObject: true });
    assert.ok(info.width > 0 && info.height > 0);
  } else if (format === 'pdf') {
    // Poppler, an independent renderer that tolerates what viewers tolerate, draws the first page.
    const dir = await mkdtemp(join(tmpdir(), 'compressd-fuzz-pdf-'));
    try {
      await writeFile(join(dir, 'out.pdf'), data);
      const { stdout } = await exec('pdftoppm', ['-r', '10', '-f', '1', '-l', '1', '-png', '-singlefile', join(dir, 'out.pdf')], { encoding: 'buffer', maxBuffer: 16 << 20 });
      assert.ok((await sharp(stdout).metadata()).width! > 0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  } else if (format === 'docx' || format === 'pptx') {
    const names = await new Promise<string[]>((resolve, reject) =>
      yauzl.fromBuffer(data, { lazyEntries: false }, (err, zip) => {
        if (err || !zip) return reject(err);
        const found: string[] = [];
        zip.on('entry', (e: yauzl.Entry) => found.push(e.fileName));
        zip.on('end', () => resolve(found));
        zip.on('error', reject);
      }),
    );
    assert.ok(names.includes('[Content_Types].xml'), 'an Office output without [Content_Types].xml');
  } else {
    assert.fail(`no decoder for ${format}`);
  }
}

const TERMINAL = new Set(['Succeeded', 'Failed', 'Canceled']);

/**
 * Watches a running server through its API while a fuzzer throws cases at it, and records
 * every broken invariant with the case that broke it (so a failure names how to replay it).
 */
export class Invariants {
  readonly violations: string[] = [];
  /** Accepted job id → the case that made it and the key that owns it. */
  readonly accepted = new Map<string, { caseName: string; key: string; input?: Buffer }>();
  readonly statuses = new Map<number, number>();
  outputsChecked = 0;

  constructor(readonly s: TestServer) {}

  violation(caseName: string, what: string): void {
    if (this.violations.length < 50) this.violations.push(`${caseName}: ${what}`);
  }

  /**
   * Records one response: no 5xx but 503; every error in the spec's envelope; a 202 is a job to
   * follow (`input`: the file it was given, when the caller knows it).
   */
  response(caseName: string, status: number, body: Buffer | string, key = this.s.key, hasBody = true, input?: Buffer): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    if (status >= 500 && status !== 503) this.violation(caseName, `answered ${status}: ${String(body).slice(0, 200)}`);
    if (status >= 400 && hasBody) {
      let envelope: { error?: unknown } | null = null;
      try {
        envelope = JSON.parse(String(body));
      } catch {
        // reported below
      }
      if (typeof envelope?.error !== 'string') this.violation(caseName, `${status} without the error envelope: ${JSON.stringify(String(body).slice(0, 120))}`);
    }
    if (status === 202) {
      try {
        const id = JSON.parse(String(body)).id;
        if (typeof id === 'string') this.accepted.set(id, { caseName, key, input });
      } catch {
        this.violation(caseName, '202 without a JSON job record');
      }
    }
  }

  /** The server is alive and answers within 2 s. */
  async alive(caseName: string): Promise<void> {
    try {
      const res = await fetch(`${this.s.url}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (res.status !== 200) this.violation(caseName, `health check answered ${res.status}`);
      await res.arrayBuffer();
    } catch (err) {
      this.violation(caseName, `no answer within 2 s after the case (${(err as Error).message})`);
    }
  }

  /**
   * Every accepted job ends within `timeoutMs` (Failed with an error code; Succeeded with an
   * output that decodes, or with the very file it was given: the never-larger rule hands back a
   * damaged input that the door accepted, as viewers do, when no re-encode is smaller), then no
   * credit stays reserved and the spool holds only live jobs.
   */
  async settle(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const keys = new Set([this.s.key]);
    for (const [id, { caseName, key, input }] of this.accepted) {
      keys.add(key);
      let job: Record<string, any>;
      for (;;) {
        job = await json(await this.s.api(`/compress/job/${id}`, { key }));
        if (TERMINAL.has(job.status) || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      if (!TERMINAL.has(job.status)) this.violation(caseName, `job ${id} still ${job.status} after ${timeoutMs} ms`);
      else if (job.status === 'Failed' && typeof job.error?.code !== 'string') this.violation(caseName, `job ${id} Failed without an error code`);
      else if (job.status === 'Succeeded') {
        const res = await this.s.api(`/compress/job/${id}/download`, { key });
        const data = Buffer.from(await res.arrayBuffer());
        const format = (job.output?.fileName ?? job.fileName ?? '').split('.').pop()?.toLowerCase() ?? '';
        try {
          assert.equal(res.status, 200);
          if (!input?.equals(data)) await assertDecodes(data, format === 'jpeg' ? 'jpg' : format);
          this.outputsChecked++;
        } catch (err) {
          this.violation(caseName, `job ${id}: the ${format} output does not decode (${(err as Error).message})`);
        }
      }
    }
    this.accepted.clear();
    for (const key of keys) {
      const me = await json(await this.s.api('/compress/entitlements/me', { key }));
      if (me.credits.reserved !== 0) this.violation('settle', `${me.credits.reserved} credits of ${me.account} reserved with every job ended`);
    }
    await this.spoolHoldsOnlyLiveJobs('settle', [...keys]);
  }

  /** Every spool directory belongs to a job the API knows; a refused or aborted request left nothing. */
  async spoolHoldsOnlyLiveJobs(caseName: string, keys = [this.s.key]): Promise<void> {
    const known = async (id: string) => {
      for (const key of keys) if ((await this.s.api(`/compress/job/${id}`, { key })).status === 200) return true;
      return false;
    };
    // A request whose client vanished may still be closing its file for a moment.
    for (let attempt = 0; ; attempt++) {
      const ids = await readdir(join(this.s.dataDir, 'spool')).catch(() => [] as string[]);
      const orphans: string[] = [];
      for (const id of ids) if (!(await known(id))) orphans.push(id);
      if (orphans.length === 0) return;
      if (attempt === 20) {
        this.violation(caseName, `the spool holds files of no job: ${orphans.join(', ')}`);
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  report(): void {
    const summary = [...this.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ');
    console.log(`statuses: ${summary}; outputs decoded: ${this.outputsChecked}`);
    assert.deepEqual(this.violations, [], `the fuzzer found ${this.violations.length} problem(s)`);
  }
}
