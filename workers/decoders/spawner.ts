import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { THREAD_IDLE_MS } from '../../src/catalog/contract.ts';
import { workerLog } from '../shared/log.ts';

/**
 * Starts the native decoders' programs from a small shell this thread keeps, instead of from the
 * server. Node starts a process by fork(), and a fork leaves every page of the server
 * copy-on-write: each page the server (every thread of it) writes afterwards takes a fault, some
 * 6,000–8,000 of them, about 0.15 s on a machine where a fault costs 16–20 µs. Measured: ten 1 MP
 * JPEG encodes took 230–250 ms right after starting even `sleep`, 75–85 ms otherwise, and a 2 MP DNG's
 * quality search 0.85–1.0 s after its native decode against 0.56–0.65 s after a WebAssembly one.
 * The shell is forked once, when the thread first needs it; it forks itself (a megabyte) for
 * each program after that.
 *
 * A program runs with its stdin, stdout and stderr from and to files (`io`); the shell says its
 * process id, then its end: `pid ID PID` and `done ID STATUS` (128 + the signal's number when a
 * signal ended it). Each program runs in a subshell of a subshell that exits at once, so the shell
 * keeps no record of it and waits for nothing: several programs may run at a time.
 */
export interface ShellRun {
  program: string;
  args: string[];
  /** Variables set for the program alone. */
  env: Record<string, string>;
  stdin: string;
  stdout: string;
  stderr: string;
  signal?: AbortSignal;
  /** A program that serves while it is asked (served.ts): it does not keep the thread alive. */
  serving?: true;
}

/** How a program ended: its exit code, or the signal that ended it; `lost` when the shell ended (or never started) under it. */
export interface ShellEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  lost?: true;
}

/**
 * How long an idle shell is kept. The pool ends a thread idle for THREAD_IDLE_MS without closing
 * what the thread started, and a shell would outlive its thread waiting for a next line: it ends
 * first. The next thread's first picture forks the server once more.
 */
export const SHELL_IDLE_MS = THREAD_IDLE_MS / 2;

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

interface Waiting {
  pid?: number;
  signal?: AbortSignal;
  serving?: true;
  onAbort: () => void;
  resolve(end: ShellEnd): void;
}

class Shell {
  readonly child: ChildProcess;
  private readonly waiting = new Map<number, Waiting>();
  private next = 0;
  private line = '';
  private closing: NodeJS.Timeout | undefined;
  ended = false;

  constructor() {
    this.child = spawn('/bin/sh', [], { stdio: ['pipe', 'pipe', 'ignore'] });
    this.child.stdout!.setEncoding('latin1').on('data', (d: string) => this.read(d));
    this.child.stdin!.on('error', () => {});
    this.child.on('error', (err) => this.end(err.message));
    this.child.on('close', () => this.end('the shell ended'));
    this.kept();
  }

  run(r: ShellRun): Promise<ShellEnd> {
    const id = this.next++;
    const env = Object.entries(r.env).map(([k, v]) => `${k}=${quote(v)}`).join(' ');
    const command = `${env} ${quote(r.program)} ${r.args.map(quote).join(' ')} <${quote(r.stdin)} >${quote(r.stdout)} 2>${quote(r.stderr)}`;
    return new Promise((resolve) => {
      const waiting: Waiting = {
        signal: r.signal,
        serving: r.serving,
        onAbort: () => {
          try {
            if (waiting.pid) process.kill(waiting.pid, 'SIGKILL');
          } catch {
            // It has ended already; its end is on its way.
          }
        },
        resolve,
      };
      this.waiting.set(id, waiting);
      r.signal?.addEventListener('abort', waiting.onAbort, { once: true });
      this.kept();
      this.child.stdin!.write(`( ( ${command} & echo "pid ${id} $!"; wait $!; echo "done ${id} $?" ) & )\n`);
    });
  }

  private read(d: string): void {
    const lines = (this.line + d).split('\n');
    this.line = lines.pop()!;
    for (const l of lines) {
      const [what, id, n] = l.split(' ');
      const waiting = this.waiting.get(Number(id));
      if (!waiting) continue;
      if (what === 'pid') {
        waiting.pid = Number(n);
        if (waiting.signal?.aborted) waiting.onAbort();
      } else if (what === 'done') {
        const status = Number(n);
        this.settle(Number(id), status > 128 ? { code: null, signal: SIGNALS.get(status - 128) ?? 'SIGKILL' } : { code: status, signal: null });
      }
    }
  }

  private settle(id: number, end: ShellEnd): void {
    const waiting = this.waiting.get(id)!;
    this.waiting.delete(id);
    waiting.signal?.removeEventListener('abort', waiting.onAbort);
    this.kept();
    waiting.resolve(end);
  }

  private end(why: string): void {
    if (this.ended) return;
    this.ended = true;
    if (this.waiting.size) workerLog.warn({ event: 'decoder.shell_ended', reason: why, running: this.waiting.size }, 'the shell that starts the native decoders ended with programs running');
    for (const id of [...this.waiting.keys()]) this.settle(id, { code: null, signal: null, lost: true });
  }

  // A shell with no program keeps neither the thread nor the process alive, and ends after a while;
  // one whose programs all serve keeps neither alive either, but stays while they do.
  private kept(): void {
    clearTimeout(this.closing);
    const running = [...this.waiting.values()];
    const ref = running.some((w) => !w.serving);
    for (const s of [this.child, this.child.stdin, this.child.stdout] as unknown as { ref?: () => void; unref?: () => void }[]) (ref ? s.ref : s.unref)?.call(s);
    if (running.length > 0) return;
    this.closing = setTimeout(() => {
      this.ended = true;
      this.child.stdin!.end();
    }, SHELL_IDLE_MS).unref();
  }
}

let shell: Shell | undefined;

/** Runs a program from this thread's shell (started on first use, and again if it ended). */
export function runFromShell(r: ShellRun): Promise<ShellEnd> {
  if (!shell || shell.ended) shell = new Shell();
  return shell.run(r);
}

/** This thread's shell's process id while it is kept (tests watch it end). */
export const shellPid = (): number | undefined => (shell && !shell.ended ? shell.child.pid : undefined);
