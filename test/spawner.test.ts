// Issue 40: the native decoders start from a shell the thread keeps (workers/decoders/spawner.ts), so
// the server, whose every page a fork leaves copy-on-write, never forks per picture.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, mock } from 'node:test';
import { runFromShell, SHELL_IDLE_MS, shellPid } from '../workers/decoders/spawner.ts';

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'spawner-'));
  writeFileSync(join(dir, 'empty'), '');
});
after(() => rmSync(dir, { recursive: true, force: true }));

const files = (name: string) => ({ stdin: join(dir, 'empty'), stdout: join(dir, `${name}.out`), stderr: join(dir, `${name}.err`) });

describe('the shell that starts the native decoders', () => {
  it('starts a program as its own child, not the server\'s, with the variables asked and its files', async () => {
    const end = await runFromShell({ program: '/bin/sh', args: ['-c', 'echo "$PPID $ASKED"; echo said >&2; exit 3'], env: { ASKED: "it's set" }, ...files('one') });
    assert.deepEqual(end, { code: 3, signal: null });
    const [ppid, ...asked] = readFileSync(join(dir, 'one.out'), 'utf8').trim().split(' ');
    assert.notEqual(Number(ppid), process.pid);
    assert.equal(asked.join(' '), "it's set");
    assert.equal(readFileSync(join(dir, 'one.err'), 'utf8'), 'said\n');
  });

  it('runs several programs at once and tells each its own end', async () => {
    const ends = await Promise.all([0, 1, 2].map((n) => runFromShell({ program: '/bin/sh', args: ['-c', `sleep 0.${3 - n}; echo ${n}; exit ${n}`], env: {}, ...files(`many${n}`) })));
    assert.deepEqual(ends.map((e) => e.code), [0, 1, 2]);
    assert.deepEqual([0, 1, 2].map((n) => readFileSync(join(dir, `many${n}.out`), 'utf8')), ['0\n', '1\n', '2\n']);
  });

  it('kills the program when its job is stopped', async () => {
    const stop = new AbortController();
    const started = Date.now();
    const ending = runFromShell({ program: '/bin/sleep', args: ['30'], env: {}, ...files('stopped'), signal: stop.signal });
    setTimeout(() => stop.abort(), 200);
    assert.deepEqual(await ending, { code: null, signal: 'SIGKILL' });
    assert.ok(Date.now() - started < 10_000);
  });

  it(`ends when idle for ${SHELL_IDLE_MS / 1000} s, before the pool ends the thread, and the next program starts a new one`, async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      await runFromShell({ program: '/bin/true', args: [], env: {}, ...files('idle') });
      const pid = shellPid()!;
      assert.ok(pid > 0);
      mock.timers.tick(SHELL_IDLE_MS - 1000);
      assert.equal(shellPid(), pid);
      mock.timers.tick(1000);
      assert.equal(shellPid(), undefined);
      // The shell reads its end of input and exits.
      const alive = () => spawnSync('kill', ['-0', String(pid)]).status === 0;
      for (let i = 0; i < 500 && alive(); i++) await new Promise((r) => setImmediate(r));
      assert.equal(alive(), false, 'the shell exited');
      await runFromShell({ program: '/bin/true', args: [], env: {}, ...files('again') });
      assert.notEqual(shellPid(), pid);
    } finally {
      mock.timers.reset();
    }
  });

  it('keeps no process waiting once idle: a script that decoded through it ends by itself', () => {
    const module = new URL('../workers/decoders/spawner.ts', import.meta.url).href;
    const script = `const { runFromShell } = await import(${JSON.stringify(module)});
      const end = await runFromShell({ program: '/bin/true', args: [], env: {}, stdin: '/dev/null', stdout: '/dev/null', stderr: '/dev/null' });
      console.log(JSON.stringify(end));`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000, cwd: new URL('..', import.meta.url).pathname });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout.trim()), { code: 0, signal: null });
  });
});
