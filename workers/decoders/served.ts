import { open as openFd, constants } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { workerLog } from '../shared/log.ts';
import { shellEnv } from './native-program.ts';
import { runFromShell } from './spawner.ts';

/**
 * A program of ours kept running while a thread asks it for one answer after another (`--serve`):
 * where a job asks the same program several times (the JPEG search's jpegli probes: 2-9 a picture),
 * starting it for each cost some 7-15 ms (the process, and the files inShell passes it) of a 5-50 ms
 * encode. Started from the thread's shell like the one-shot programs (spawner.ts: no fork of the
 * server), its standard input and output two named pipes in a private directory, both held open by
 * this thread for reading and writing, so that neither side's open waits for the other and a pipe
 * never ends while this side holds it; the program's end comes from the shell. The directory goes
 * once the program has answered (it has its files open then).
 *
 * Each request is written whole, and each answer is a line "ok SIZE" and SIZE bytes, or a line
 * "error WHY" (the request's fault), after which the program exits. One request at a time per
 * program; a program idle for SERVED_IDLE_MS is told its input ended, and ends. A program that ends
 * under a request (killed, or a fault) loses only its serving: the caller runs the program once for
 * that request, the same encode, so the answer does not depend on what happened to the server.
 */
class Served {
  private readonly ready: Promise<Pipes | undefined>;
  private asked: { resolve(answer: Buffer | undefined): void; reject(err: Error): void } | undefined;
  private heard: Buffer[] = [];
  private length = 0;
  private size = -1;
  private closing: NodeJS.Timeout | undefined;
  private answered = false;
  /** Whether it has a request (from the moment it is asked, before it is ready). */
  busy = false;
  /** Why it ended, once it has (or is ending). */
  ended: string | undefined;
  /** Set when it could not be started here, or ended before its first answer: the program is then run once per request. */
  unservable = false;

  constructor(
    readonly program: { dir: string; program: string; events?: string },
    private readonly failure: (why: string) => Error,
  ) {
    this.ready = this.start().catch(() => undefined);
  }

  /** The answer's bytes; undefined where the caller runs the program once instead. */
  async ask(request: Buffer[]): Promise<Buffer | undefined> {
    this.busy = true;
    const pipes = await this.ready;
    if (!pipes) {
      this.unservable = true;
      return undefined;
    }
    clearTimeout(this.closing);
    pipes.output.ref();
    const answer = new Promise<Buffer | undefined>((resolve, reject) => (this.asked = { resolve, reject }));
    for (const part of request) pipes.input.write(part);
    try {
      const answered = await answer;
      if (answered && !this.answered) {
        // The program has its pipes and its stderr open: their names go, so that nothing is left
        // behind if this process ends first (its stderr is not read after that).
        this.answered = true;
        void rm(pipes.dir, { recursive: true, force: true });
      }
      return answered;
    } finally {
      [this.asked, this.busy] = [undefined, false];
      pipes.output.unref();
      // Marked ended at once, so that no request is written after its input ends.
      this.closing = setTimeout(() => {
        this.ended ??= 'idle';
        pipes.input.end();
      }, SERVED_IDLE_MS).unref();
    }
  }

  private async start(): Promise<Pipes | undefined> {
    const dir = await mkdtemp(join(tmpdir(), 'compressd-served-'));
    const [input, output, stderr] = ['in', 'out', 'err'].map((f) => join(dir, f));
    const made = await runFromShell({ program: 'mkfifo', args: ['-m', '600', input, output], env: {}, stdin: '/dev/null', stdout: '/dev/null', stderr: '/dev/null' });
    if (made.code !== 0) {
      await rm(dir, { recursive: true, force: true });
      return undefined;
    }
    const pipes: Pipes = {
      dir,
      input: new Socket({ fd: await openRw(input), readable: false, writable: true }),
      output: new Socket({ fd: await openRw(output), readable: true, writable: false }),
    };
    pipes.input.on('error', () => {});
    pipes.output.on('error', () => {});
    pipes.output.on('data', (d: Buffer) => this.hear(d));
    pipes.input.unref();
    pipes.output.unref();
    const serving = runFromShell({ program: join(this.program.dir, this.program.program), args: ['--serve'], env: shellEnv(this.program.dir), stdin: input, stdout: output, stderr, serving: true });
    void serving.then(async (end) => {
      const said = (await readFile(stderr, 'latin1').catch(() => '')).trim();
      this.end(said || (end.lost ? 'the shell ended under it' : `it ended with ${end.code ?? end.signal}`));
      pipes.input.destroy();
      pipes.output.destroy();
      await rm(dir, { recursive: true, force: true });
    });
    return pipes;
  }

  private hear(d: Buffer): void {
    this.heard.push(d);
    this.length += d.length;
    if (this.size < 0) {
      const heard = Buffer.concat(this.heard);
      const eol = heard.indexOf(10);
      if (eol < 0) return void (this.heard = [heard]);
      const line = heard.subarray(0, eol).toString('latin1');
      if (!line.startsWith('ok ')) return this.refused(line.replace(/^error /, ''));
      this.size = Number(line.slice(3));
      [this.heard, this.length] = [[heard.subarray(eol + 1)], heard.length - eol - 1];
    }
    if (this.length < this.size) return;
    const answer = Buffer.concat(this.heard, this.length).subarray(0, this.size);
    [this.heard, this.length, this.size] = [[], 0, -1];
    this.asked?.resolve(answer);
  }

  private refused(why: string): void {
    this.ended ??= why;
    this.asked?.reject(this.failure(why));
  }

  private end(why: string): void {
    if (!this.answered) this.unservable = true;
    if (this.asked) workerLog.warn({ event: `${this.program.events ?? this.program.program}.serving_ended`, reason: why }, 'a serving program ended under a request: it is run once for it');
    this.ended ??= why;
    this.asked?.resolve(undefined);
  }
}

interface Pipes {
  dir: string;
  input: Socket;
  output: Socket;
}

/**
 * A thread's serving programs: a request goes to an idle one of its program, else to a new one while
 * fewer than SERVED_AT_ONCE of that program are serving. Undefined where none takes it (more at once,
 * a program that cannot be served here, or one that ended under the request): the caller runs the
 * program once for it.
 */
export function servingPool(failure: (why: string) => Error) {
  let kept: Served[] = [];
  const unservable = new Set<string>();
  return async (program: { dir: string; program: string; events?: string }, request: Buffer[]): Promise<Buffer | undefined> => {
    const path = join(program.dir, program.program);
    if (unservable.has(path)) return undefined;
    kept = kept.filter((s) => !s.ended);
    const same = kept.filter((s) => join(s.program.dir, s.program.program) === path);
    let served = same.find((s) => !s.busy);
    if (!served) {
      if (same.length >= SERVED_AT_ONCE) return undefined;
      served = new Served(program, failure);
      kept.push(served);
    }
    const answer = await served.ask(request);
    if (served.unservable) unservable.add(path);
    return answer;
  };
}

/** The JPEG search asks for two forms at once; a document's pictures run up to four lanes. */
const SERVED_AT_ONCE = 4;

/** How long a program waits for a next request: a job's requests come within milliseconds of each other, the next job's often within seconds. */
const SERVED_IDLE_MS = 10_000;

const openFile = promisify(openFd);

// A pipe opened for reading and writing opens at once, whether or not the other side has it open.
const openRw = (path: string) => openFile(path, constants.O_RDWR | constants.O_NONBLOCK);
