// Start-up: time from spawning `compressd serve` to its first 200 (GET /compress/schema, no key),
// for the single executable (extracted cache warm, and cold: a first start that extracts) and,
// side by side, the same source run by tsx and by Deno. Target: ≤ 300 ms for the executable.
// Then the same from a data dir that remembers 100,000 jobs (bench/remembered-jobs.ts; set
// BENCH_STARTUP_DATA=DIR to keep it there and reuse it in a later run), to `/healthz`, split into the
// phases the server logs in its `listening` line (`startupMs`). Target: ≤ 1.5 s for the executable.
import { denoBinary } from '../../test/helpers/deno.ts';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchContext, markdownTable, median } from '../lib.ts';
import { writeRememberedJobs } from '../remembered-jobs.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const REMEMBERED = Number(process.env.BENCH_STARTUP_JOBS ?? 100_000);
const cpus = availableParallelism();

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

interface Start {
  ms: number;
  /** CPU time the server process (all its threads) had spent when it answered: what a start costs on an idle machine. */
  cpuMs: number;
  /** The server's own phases (its `listening` log line), when it logs them. */
  phases: Record<string, number>;
}

/**
 * Milliseconds from spawn to the first 200 of `path`, then the server is stopped. With `template`
 * the server starts on a copy of that data dir (copied before the clock starts), else on a new one.
 */
async function toFirst200(command: string, args: string[], env: NodeJS.ProcessEnv, path = '/compress/schema', template?: string): Promise<Start> {
  const port = await freePort();
  const data = mkdtempSync(join(tmpdir(), 'compressd-bench-startup-'));
  if (template) cpSync(template, data, { recursive: true });
  let out = '';
  const started = performance.now();
  const child = spawn(command, [...args, 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', data, '--workers', '1'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'ignore'] });
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  let exited = false;
  child.once('exit', () => (exited = true));
  try {
    for (;;) {
      if (exited) throw new Error(`${command} exited before answering`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}${path}`);
        await res.arrayBuffer();
        if (res.status === 200) {
          const ms = performance.now() - started;
          const cpuMs = cpuOf(child.pid!);
          // The listening line follows the first answer by a moment.
          for (let i = 0; i < 500 && !/"startupMs"/.test(out); i++) await new Promise((r) => setTimeout(r, 2));
          const line = out.split('\n').find((l) => l.includes('"startupMs"'));
          return { ms, cpuMs, phases: line ? (JSON.parse(line) as { startupMs: Record<string, number> }).startupMs : {} };
        }
      } catch {
        // Not listening yet.
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    if (!exited) {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    }
    rmSync(data, { recursive: true, force: true });
  }
}

/** User + system CPU milliseconds of a live process (Linux: /proc/PID/stat, in clock ticks of 10 ms). */
function cpuOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function series(runs: number, once: () => Promise<Start>): Promise<number[]> {
  return (await starts(runs, once)).map((s) => s.ms);
}

async function starts(runs: number, once: () => Promise<Start>): Promise<Start[]> {
  const all: Start[] = [];
  for (let i = 0; i < runs; i++) all.push(await once());
  return all;
}

/** Median of each phase over the starts, in the order the server logs them, then the total. */
function phaseRow(form: string, all: Start[]): (string | number)[] {
  const names = Object.keys(all[0]!.phases);
  const phase = (n: string) => Math.round(median(all.map((s) => s.phases[n] ?? 0)));
  const logged = median(all.map((s) => Object.values(s.phases).reduce((a, b) => a + b, 0)));
  return [form, Math.round(median(all.map((s) => s.ms))), Math.round(Math.min(...all.map((s) => s.ms))), Math.round(median(all.map((s) => s.cpuMs))), ...names.map(phase), Math.round(median(all.map((s) => s.ms)) - logged), all.length];
}

/** The data dir of REMEMBERED jobs: BENCH_STARTUP_DATA when set (made there if absent), else a new one. */
async function rememberedDir(): Promise<{ dir: string; made: string; keep: boolean }> {
  const wanted = process.env.BENCH_STARTUP_DATA;
  if (wanted && existsSync(join(wanted, 'jobs.log'))) return { dir: wanted, made: 'reused', keep: true };
  const dir = wanted ?? mkdtempSync(join(tmpdir(), 'compressd-bench-remembered-'));
  const made = await writeRememberedJobs(dir, REMEMBERED);
  return { dir, made: `written in ${made.seconds.toFixed(0)} s`, keep: !!wanted };
}

const row = (form: string, times: number[]) => [form, Math.round(median(times)), Math.round(Math.min(...times)), Math.round(Math.max(...times)), times.length];

export default async function startup(ctx: BenchContext): Promise<string> {
  const runs = Math.max(5, ctx.runs);
  const buildStarted = performance.now();
  const built = spawnSync(process.execPath, ['build.mjs'], { cwd: ROOT, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`build failed: ${built.stderr}`);
  const buildSeconds = (performance.now() - buildStarted) / 1000;
  const bin = join(ROOT, 'dist/compressd');
  const cache = mkdtempSync(join(tmpdir(), 'compressd-bench-cache-'));
  const rows: (string | number)[][] = [];
  const phased: (string | number)[][] = [];
  let header: string[] = [];
  let remembered = '';
  const load: number[] = [];
  try {
    const warmEnv = { COMPRESSD_CACHE_DIR: join(cache, 'warm') };
    await toFirst200(bin, [], warmEnv);
    rows.push(row('single executable, cache warm (`env -i`)', await series(runs, () => toFirst200(bin, [], warmEnv))));
    let cold = 0;
    rows.push(row('single executable, first start (extracts the runtime tree)', await series(Math.min(3, runs), () => toFirst200(bin, [], { COMPRESSD_CACHE_DIR: join(cache, `cold-${cold++}`) }))));
    const tsx = { command: process.execPath, args: ['--import', 'tsx', join(ROOT, 'src/main.ts')], env: { PATH: process.env.PATH, HOME: process.env.HOME } };
    rows.push(row('source: `node --import tsx src/main.ts`', await series(runs, () => toFirst200(tsx.command, tsx.args, tsx.env))));
    const deno = denoBinary();
    if (deno) {
      rows.push(row('source: `deno run -A src/main.ts`', await series(runs, () => toFirst200(deno, ['run', '-A', '--no-lock', join(ROOT, 'src/main.ts')], { ...process.env, NO_COLOR: '1' }))));
    }

    const data = await rememberedDir();
    try {
      remembered = `${REMEMBERED.toLocaleString('en')} jobs (${data.made}; \`jobs.log\` ${(statSync(join(data.dir, 'jobs.log')).size / 1048576).toFixed(0)} MB)`;
      const forms: [string, () => Promise<Start>][] = [
        ['single executable, new data dir', () => toFirst200(bin, [], warmEnv, '/healthz')],
        [`single executable, ${REMEMBERED.toLocaleString('en')} remembered jobs`, () => toFirst200(bin, [], warmEnv, '/healthz', data.dir)],
        ['source (tsx), new data dir', () => toFirst200(tsx.command, tsx.args, tsx.env, '/healthz')],
        [`source (tsx), ${REMEMBERED.toLocaleString('en')} remembered jobs`, () => toFirst200(tsx.command, tsx.args, tsx.env, '/healthz', data.dir)],
      ];
      for (const [form, once] of forms) {
        load.push(loadavg()[0]!);
        const all = await starts(runs, once);
        header = ['Form', 'median ms', 'min ms', 'CPU ms', ...Object.keys(all[0]!.phases).map((p) => `${p} ms`), 'to the answer ms', 'runs'];
        phased.push(phaseRow(form, all));
      }
    } finally {
      if (!data.keep) rmSync(data.dir, { recursive: true, force: true });
    }
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
  return [
    '## Start-up: spawn to the first 200',
    '',
    `\`GET /compress/schema\` polled every 2 ms after spawning \`serve\` with a new data dir (which also creates the first account and key). Target for the single executable: ≤ 300 ms. Binary: ${(statSync(bin).size / 1048576).toFixed(1)} MB, built in ${buildSeconds.toFixed(1)} s.`,
    '',
    markdownTable(['Form', 'median ms', 'min ms', 'max ms', 'runs'], rows),
    '',
    '## Start-up with remembered jobs, by phase',
    '',
    `\`GET /healthz\` polled every 2 ms after spawning \`serve\` on a copy of a data dir holding ${remembered}, as the service's own code leaves it after a day (bench/remembered-jobs.ts), or on a new data dir. CPU ms is the median CPU time (user + system, all threads) the server had used when it answered: near what the start takes on an idle machine. Phases are medians of what the server logs (\`startupMs\` of its \`listening\` line): the first is the runtime and module load from process start; "to the answer" is what the spawn-to-200 time has beyond them (process spawn and the poll). Target for the single executable with remembered jobs: ≤ 1.5 s. Load average (1 min) before each row: ${load.map((l) => l.toFixed(1)).join(', ')} (${cpus} cores).`,
    '',
    markdownTable(header, phased),
  ].join('\n');
}
