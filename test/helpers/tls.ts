import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestCA {
  /** PEM of the self-signed test CA: trust it via `FetchConfig.ca` or NODE_EXTRA_CA_CERTS. */
  caPem: string;
  /** Server certificate (signed by the CA) for every name in `hosts`, and its private key. */
  certPem: string;
  keyPem: string;
  /** The CA on disk, for NODE_EXTRA_CA_CERTS in child processes. */
  caPath: string;
  hosts: string[];
}

/**
 * Names the default certificate covers. Node refuses wildcards directly under a TLD, so test
 * hosts are listed one by one; `*.files.test` covers any extra name a test needs.
 */
export const DEFAULT_TEST_HOSTS = [
  'localhost',
  'files.test',
  'other.test',
  'redirect.test',
  'hooks.test',
  'webhooks.test',
  '*.files.test',
  '127.0.0.1',
  '::1',
];

const cache = new Map<string, Promise<TestCA>>();
const dirs: string[] = [];
process.once('exit', () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * A throwaway CA and a server certificate for `hosts` (DNS names or IP literals), made with the
 * openssl CLI. Memoised per host list, so every test in a process shares one CA.
 */
export function makeTestCA(hosts: string[] = DEFAULT_TEST_HOSTS): Promise<TestCA> {
  const key = hosts.join(',');
  let made = cache.get(key);
  if (!made) {
    made = generate(hosts);
    cache.set(key, made);
  }
  return made;
}

async function generate(hosts: string[]): Promise<TestCA> {
  const dir = await mkdtemp(join(tmpdir(), 'compressd-test-ca-'));
  dirs.push(dir);
  const p = (name: string) => join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run('openssl', [
    'req', '-x509', ...ec, '-keyout', p('ca.key'), '-out', p('ca.pem'), '-days', '3',
    '-subj', '/CN=compressd test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  await run('openssl', ['req', ...ec, '-keyout', p('server.key'), '-out', p('server.csr'), '-subj', `/CN=${hosts[0]}`]);
  const san = hosts.map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`)).join(',');
  await writeFile(
    p('server.ext'),
    `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`,
  );
  await run('openssl', [
    'x509', '-req', '-in', p('server.csr'), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial',
    '-out', p('server.pem'), '-days', '3', '-extfile', p('server.ext'),
  ]);
  const [caPem, certPem, keyPem] = await Promise.all(['ca.pem', 'server.pem', 'server.key'].map((f) => readFile(p(f), 'utf8')));
  return { caPem: caPem!, certPem: certPem!, keyPem: keyPem!, caPath: p('ca.pem'), hosts };
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface TestHttpsServer {
  server: https.Server;
  port: number;
  ca: TestCA;
  /** `https://<host>:<port><path>` (IPv6 hosts bracketed). */
  url(host: string, path?: string): string;
  /** Every request the server has received, in order (method, URL path, Host header). */
  requests: { method: string; path: string; host: string }[];
  /** TCP connections accepted so far (counts handshakes that never became requests too). */
  connections(): number;
  close(): Promise<void>;
}

/** An HTTPS server on 127.0.0.1 (or `bind`), on a free port (or `port`), with a certificate from the test CA. */
export async function startTestHttpsServer(handler: Handler, opts: { bind?: string; hosts?: string[]; port?: number } = {}): Promise<TestHttpsServer> {
  const ca = await makeTestCA(opts.hosts);
  const requests: TestHttpsServer['requests'] = [];
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = https.createServer({ cert: ca.certPem, key: ca.keyPem }, (req, res) => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', host: req.headers.host ?? '' });
    handler(req, res);
  });
  server.on('connection', (s: Socket) => {
    connections++;
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  const bind = opts.bind ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, bind, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    server,
    port,
    ca,
    requests,
    connections: () => connections,
    url: (host, path = '/') => `https://${isIP(host) === 6 ? `[${host}]` : host}:${port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
