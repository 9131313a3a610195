// The edge as outside tools see it (issue 29): the client address behind proxies, and what the first start leaves behind.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmod, readdir, readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIRST_KEY_FILE, firstKeyIn } from '../src/accounts/first-key.ts';
import { ConfigError, resolveConfig } from '../src/config.ts';
import { clientAddress, parseProxyTrust, type ProxyTrust } from '../src/server/proxy-trust.ts';
import { Daemon, freePort, scratchDir } from './helpers/daemons.ts';
import { waitForJobStatus } from './helpers/poll.ts';
import { CORPUS, fileForm, json, startTestServer, type TestServer } from './helpers/server.ts';

describe('client address behind proxies', () => {
  const off: ProxyTrust = { hops: 0 };
  const one: ProxyTrust = { hops: 1 };
  const two: ProxyTrust = { hops: 2 };
  const lan: ProxyTrust = { proxies: ['10.0.0.0/8', '::1'] };
  const rows: [trust: ProxyTrust, socket: string, xff: string | undefined, client: string, why: string][] = [
    [off, '10.0.0.1', '203.0.113.7', '10.0.0.1', 'no trust: the header is ignored'],
    [one, '10.0.0.1', undefined, '10.0.0.1', 'no header: the socket'],
    [one, '10.0.0.1', '203.0.113.7', '203.0.113.7', 'one hop: the entry the proxy appended'],
    [one, '10.0.0.1', '10.9.9.9, 203.0.113.7', '203.0.113.7', 'one hop: what the client wrote before it is not believed'],
    [two, '10.0.0.2', '10.9.9.9, 203.0.113.7, 10.0.0.1', '203.0.113.7', 'two hops: the entry the far proxy appended'],
    [two, '10.0.0.2', '203.0.113.7', '203.0.113.7', 'fewer entries than hops: the farthest one'],
    [one, '10.0.0.1', '10.9.9.9, 203.0.113.7:4711', '10.0.0.1', 'an entry with a port is not an IP: the socket'],
    [one, '10.0.0.1', 'garbage', '10.0.0.1', 'garbage where the proxy wrote: the socket'],
    [one, '10.0.0.1', 'garbage, 203.0.113.7', '203.0.113.7', 'garbage beyond the trusted hops does not matter'],
    [one, '10.0.0.1', '127.1', '10.0.0.1', 'a short IPv4 form is not accepted'],
    [one, '10.0.0.1', ' 2001:db8::7 ', '2001:db8::7', 'IPv6, trimmed'],
    [lan, '10.0.0.1', '10.9.9.9, 203.0.113.7', '203.0.113.7', 'listed proxies: the socket is one, the next entry is not'],
    [lan, '10.0.0.2', '10.9.9.9, 203.0.113.7, 10.0.0.1', '203.0.113.7', 'listed proxies: walks past every listed hop'],
    [lan, '::ffff:10.0.0.2', '203.0.113.7', '203.0.113.7', 'an IPv4-mapped socket address matches an IPv4 range'],
    [lan, '::1', '10.0.0.5, 10.0.0.6', '10.0.0.5', 'every hop listed: the farthest one'],
    [lan, '192.0.2.1', '203.0.113.7', '192.0.2.1', 'the socket is not a listed proxy: the header is ignored'],
    [lan, '10.0.0.1', '203.0.113.7, 10.0.0.9, bad', '10.0.0.1', 'an invalid entry on the walk: the socket'],
  ];
  for (const [trust, socket, xff, client, why] of rows) {
    it(`${why} (${JSON.stringify(trust)}, ${socket}, ${xff ?? '—'})`, () => assert.equal(clientAddress(socket, xff, trust), client));
  }

  const settings: [raw: string, trust: ProxyTrust | null][] = [
    ['true', { hops: 1 }],
    ['on', { hops: 1 }],
    ['false', { hops: 0 }],
    ['0', { hops: 0 }],
    ['', { hops: 0 }],
    ['1', { hops: 1 }],
    ['3', { hops: 3 }],
    ['10.0.0.0/8, 192.168.1.1,::1', { proxies: ['10.0.0.0/8', '192.168.1.1', '::1'] }],
    ['maybe', null],
    ['-1', null],
    ['10.0.0.0/99', null],
    [',', null],
  ];
  for (const [raw, trust] of settings) {
    it(`reads --trust-proxy ${JSON.stringify(raw)}`, () => {
      if (trust) assert.deepEqual(parseProxyTrust(raw), trust);
      else assert.throws(() => resolveConfig({ 'trust-proxy': raw }, {}), (e: Error) => e instanceof ConfigError && e.message.startsWith('--trust-proxy: expected a hop count'));
    });
  }
  it('takes the environment and a config file, booleans included', () => {
    assert.deepEqual(resolveConfig({}, { COMPRESSD_TRUST_PROXY: '2' }).trustProxy, { hops: 2 });
    assert.deepEqual(resolveConfig({}, {}, { trustProxy: true }).trustProxy, { hops: 1 });
    assert.deepEqual(resolveConfig({}, {}, { trustProxy: ['10.0.0.1', '10.0.0.2'] }).trustProxy, { proxies: ['10.0.0.1', '10.0.0.2'] });
  });

  describe('a key restricted to one address, behind one proxy', () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer({ trustProxy: '1' });
    });
    after(() => s.stop());

    it('is refused when the client writes that address in front of the one the proxy appended', async () => {
      const key = s.newKey('office', { allowIps: '10.9.9.9' });
      const forged = await s.api('/compress/entitlements/me', { key, headers: { 'X-Forwarded-For': '10.9.9.9, 203.0.113.7' } });
      assert.equal(forged.status, 401);
      assert.equal((await json(forged)).error, 'api_key.invalid_or_ip_not_allowed');
      const real = await s.api('/compress/entitlements/me', { key, headers: { 'X-Forwarded-For': '203.0.113.7, 10.9.9.9' } });
      assert.equal(real.status, 200);
    });
  });
});

/** `compressd serve` of `dataDir` on `port`, as an operator starts it. */
const serve = (dataDir: string, port: number) =>
  new Daemon('serve', process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', dataDir, '--workers', '1'], {
    env: { ...process.env, COMPRESSD_LOG_LEVEL: 'warn' },
  });

/** `compressd serve` of `dataDir` on a free port, once it answers /healthz; `stdout()` is what it printed so far. */
async function served(dataDir: string): Promise<{ daemon: Daemon; url: string; stdout(): string }> {
  const port = await freePort();
  const daemon = serve(dataDir, port);
  let out = '';
  daemon.child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  try {
    await daemon.ready(async () => (await fetch(`${url}/healthz`)).ok, 60_000);
  } catch (err) {
    await daemon.stop();
    throw err;
  }
  return { daemon, url, stdout: () => out };
}

describe('the first start', () => {
  const accountsWritten = async (dataDir: string) => {
    const files = await readdir(dataDir);
    return files.includes('accounts.log') ? (await readFile(join(dataDir, 'accounts.log'), 'utf8')).trim() !== '' : false;
  };

  it('writes no account when the port is busy, so the next start makes the key, prints it once and leaves it in a 0600 file', { timeout: 120_000 }, async () => {
    const dir = await scratchDir('compressd-first-');
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const failed = serve(dir.path, (busy.address() as { port: number }).port);
      assert.equal(await failed.exited, 2, failed.log());
      assert.match(failed.log(), /EADDRINUSE/);
      assert.equal(await accountsWritten(dir.path), false, 'a start that failed wrote an account whose key nobody saw');

      const started = await served(dir.path);
      try {
        const key = firstKeyIn(dir.path);
        assert.ok(key, started.daemon.log());
        assert.equal((await stat(join(dir.path, FIRST_KEY_FILE))).mode & 0o777, 0o600);
        // The operator contract: the first start prints its key once.
        const out = started.stdout();
        assert.match(out, new RegExp(`kept in ${join(dir.path, FIRST_KEY_FILE)} `));
        assert.equal(out.match(new RegExp(`^API key: ${key}$`, 'gm'))?.length, 1, out);
        const me = await fetch(`${started.url}/compress/entitlements/me`, { headers: { 'x-service-api-key': key } });
        assert.equal((await json(me)).account, 'default');
      } finally {
        await started.daemon.stop();
      }
    } finally {
      busy.close();
      await dir.remove();
    }
  });

  it('makes and prints no key when an account was made before the first start (a log that must hold no key)', { timeout: 120_000 }, async () => {
    const dir = await scratchDir('compressd-prepared-');
    try {
      const made = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', 'keys', 'create', '--data-dir', dir.path, '--account', 'default'], { encoding: 'utf8' });
      assert.equal(made.status, 0, made.stderr);
      const key = made.stdout.trim().split('\n').pop()!;
      const started = await served(dir.path);
      try {
        assert.doesNotMatch(started.stdout(), /API key/);
        assert.equal(firstKeyIn(dir.path), null);
        const me = await fetch(`${started.url}/compress/entitlements/me`, { headers: { 'x-service-api-key': key } });
        assert.equal((await json(me)).account, 'default');
      } finally {
        await started.daemon.stop();
      }
    } finally {
      await dir.remove();
    }
  });
});

describe('private files', () => {
  /** Every directory and file under `root`, with its permission bits. */
  const modes = async (root: string) => {
    const entries = await readdir(root, { recursive: true, withFileTypes: true });
    const all = [{ path: root, dir: true }, ...entries.map((e) => ({ path: join(e.parentPath, e.name), dir: e.isDirectory() }))];
    return Promise.all(all.map(async (e) => ({ ...e, mode: (await stat(e.path)).mode & 0o777 })));
  };

  it('keeps a data dir that existed with 0755, and everything the server writes in it, to its own user', { timeout: 120_000 }, async () => {
    const dir = await scratchDir('compressd-private-');
    await chmod(dir.path, 0o755);
    let server: Awaited<ReturnType<typeof served>> | undefined;
    try {
      server = await served(dir.path);
      const { url } = server;
      const key = firstKeyIn(dir.path)!;
      const headers = { 'x-service-api-key': key };
      const accepted = await json(await fetch(`${url}/compress`, { method: 'POST', headers, body: await fileForm(join(CORPUS, 'jpg/jpeg420exif.jpg')) }));
      const job = await waitForJobStatus(accepted.id, async () => json(await fetch(`${url}/compress/job/${accepted.id}`, { headers })), ['Succeeded', 'Failed'], { timeoutMs: 60_000 });
      assert.equal(job.status, 'Succeeded');
      const found = await modes(dir.path);
      assert.ok(found.some((e) => e.path.endsWith('/output')), 'the job left its output in the data dir');
      const open = found.filter((e) => e.mode !== (e.dir ? 0o700 : 0o600)).map((e) => `${e.path} ${e.mode.toString(8)}`);
      assert.deepEqual(open, []);
    } finally {
      await server?.daemon.stop();
      await dir.remove();
    }
  });
});
