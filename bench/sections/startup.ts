// Start-up: time from spawning `compressd serve` to its first 200 (GET /compress/schema, no key),
// for the single executable (extracted cache warm, and cold: a first start that extracts) and,
// side by side, the same source run by tsx and by Deno. Target: ≤ 300 ms for the executable.
import { denoBinary } from '../../test/helpers/deno.ts';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchContext, markdownTable, median } from '../lib.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Milliseconds from spawn to the first 200, then the server is stopped. */
async function toFirst200(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const port = await freePort();
  const data = mkdtempSync(join(tmpdir(), 'compressd-bench-startup-'));
  const started = performance.now();
  const child = spawn(command, [...args, 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', data, '--workers', '1'], { cwd: ROOT, env, stdio: 'ignore' });
  let exited = false;
  child.once('exit', () => (exited = true));
  try {
    for (;;) {
      if (exited) throw new Error(`${command} exited before answering`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/compress/schema`);
        await res.arrayBuffer();
        if (res.status === 200) return performance.now() - started;
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

async function series(runs: number, once: () => Promise<number>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await once());
  return times;
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
  try {
    const warmEnv = { COMPRESSD_CACHE_DIR: join(cache, 'warm') };
    await toFirst200(bin, [], warmEnv);
    rows.push(row('single executable, cache warm (`env -i`)', await series(runs, () => toFirst200(bin, [], warmEnv))));
    let cold = 0;
    rows.push(row('single executable, first start (extracts the runtime tree)', await series(Math.min(3, runs), () => toFirst200(bin, [], { COMPRESSD_CACHE_DIR: join(cache, `cold-${cold++}`) }))));
    rows.push(row('source: `node --import tsx src/main.ts`', await series(runs, () => toFirst200(process.execPath, ['--import', 'tsx', join(ROOT, 'src/main.ts')], { PATH: process.env.PATH, HOME: process.env.HOME }))));
    const deno = denoBinary();
    if (deno) {
      rows.push(row('source: `deno run -A src/main.ts`', await series(runs, () => toFirst200(deno, ['run', '-A', '--no-lock', join(ROOT, 'src/main.ts')], { ...process.env, NO_COLOR: '1' }))));
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
  ].join('\n');
}
