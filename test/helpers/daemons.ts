import { spawn, type ChildProcess, type ChildProcessByStdio, type SpawnOptions } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import type { Readable } from 'node:stream';
import { firstKeyIn } from '../../src/accounts/first-key.ts';
import { waitUntil } from './poll.ts';

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.once('error', reject);
  });
}

const live = new Set<ChildProcess>();
const scratchDirs = new Set<string>();
// A test that fails before its `after` hook must not leave servers or their files behind.
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

/** A new temporary directory, deleted by `remove()` or at the latest when the process exits. */
export async function scratchDir(prefix: string): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  scratchDirs.add(path);
  return {
    path,
    async remove() {
      await rm(path, { recursive: true, force: true });
      scratchDirs.delete(path);
    },
  };
}

/** A server process started by a test, with its output kept for error messages. */
export class Daemon {
  readonly child: ChildProcess;
  private output = '';
  readonly exited: Promise<number | null>;

  constructor(readonly name: string, command: string, args: string[], options: SpawnOptions = {}) {
    this.child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(this.child);
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-8000);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.child.once('error', (err) => keep(Buffer.from(`${err.message}\n`)));
    this.exited = new Promise((resolve) =>
      this.child.once('close', (code) => {
        live.delete(this.child);
        resolve(code);
      }),
    );
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last few kilobytes of the process's stdout and stderr. */
  log(): string {
    return `--- ${this.name} ---\n${this.output}`;
  }

  /** Waits until `probe` says the server answers; fails at once if the process exits. */
  async ready(probe: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
    await waitUntil(this.name, probe, { timeoutMs, retryErrors: true, gone: () => (this.running ? undefined : 'exited') }).catch((err: Error) => {
      throw new Error(`${err.message}\n${this.log()}`);
    });
  }

  /** Sends `signal` and waits for the exit; SIGKILL after `graceMs`. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * The first start's API key of a `compressd serve` child on `dataDir`: resolves once it is listening,
 * with the key it left in the data dir; rejects with everything it said if it exits first.
 */
export function firstKeyOf(child: ChildProcessByStdio<null, Readable, Readable>, dataDir: string): Promise<string> {
  let said = '';
  return new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      said += d;
      const key = said.includes('listening') ? firstKeyIn(dataDir) : null;
      if (key) resolve(key);
    });
    child.stderr.on('data', (d) => (said += d));
    child.on('exit', (code) => reject(new Error(`the server exited with ${code}: ${said}`)));
  });
}

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end with no stdin, collecting what it printed. */
export function run(cmd: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
