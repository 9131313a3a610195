import { spawnSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { Daemon, freePort, scratchDir } from './daemons.ts';

/**
 * A throw-away OpenStack Swift with its S3 API (Debian's swift-proxy, -object, -container,
 * -account and memcached, installed by scripts/setup.mjs) on 127.0.0.1: one device, one-replica
 * rings, tempauth user `test:tester` whose S3 access key / secret are `test:tester` / `testing`.
 */
export interface TestSwift {
  /** The S3 endpoint (path-style buckets). */
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
  /** The AWS SDK's standard environment for this server, plus compressd's path-style switch. */
  env: Record<string, string>;
  daemons: Daemon[];
  stop(): Promise<void>;
}

const ACCESS_KEY = 'test:tester';
const SECRET = 'testing';

type Role = 'account' | 'container' | 'object';

/** The [DEFAULT] section every server shares: loopback, one process, this user, quiet logs. */
function defaults(port: number, dir: string, user: string): string {
  return `[DEFAULT]
bind_ip = 127.0.0.1
bind_port = ${port}
workers = 0
mount_check = false
devices = ${join(dir, 'devices')}
swift_dir = ${dir}
user = ${user}
log_level = WARNING
`;
}

function serverConf(role: Role, port: number, dir: string, user: string): string {
  return `${defaults(port, dir, user)}
[pipeline:main]
pipeline = ${role}-server

[app:${role}-server]
use = egg:swift#${role}
`;
}

// The pipeline that works with s3api: `cache` (with memcached) or every request is a 500, `slo` for multipart uploads.
function proxyConf(port: number, memcachePort: number, dir: string, user: string): string {
  const filters = ['catch_errors', 'gatekeeper', 'healthcheck', 'listing_formats', 's3api', 'copy', 'slo', 'dlo'];
  return `${defaults(port, dir, user)}
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:proxy-logging]
use = egg:swift#proxy_logging
${filters.map((f) => `\n[filter:${f}]\nuse = egg:swift#${f}\n`).join('')}
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:${memcachePort}

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = ${SECRET} .admin

`;
}

// One Python start builds the three one-replica rings (a swift-ring-builder call per step would
// start Python nine times, which costs half a minute on a busy 2-core machine).
const RINGS_PY = `
import sys
from swift.common.ring import RingBuilder
swift_dir = sys.argv[1]
for arg in sys.argv[2:]:
    role, port = arg.split('=')
    b = RingBuilder(8, 1, 1)
    b.add_dev({'id': 0, 'region': 1, 'zone': 1, 'ip': '127.0.0.1', 'port': int(port), 'device': 'd1', 'weight': 100})
    b.rebalance()
    b.get_ring().save('%s/%s.ring.gz' % (swift_dir, role))
`;

function buildRings(dir: string, ports: Record<Role, number>): void {
  // Debian's interpreter, where python3-swift lives (a python3 earlier on PATH may not see it).
  const r = spawnSync('/usr/bin/python3', ['-c', RINGS_PY, dir, ...Object.entries(ports).map(([role, port]) => `${role}=${port}`)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`building the Swift rings failed: ${r.stderr || r.error?.message}`);
}

export async function startSwift(): Promise<TestSwift> {
  const tmp = await scratchDir('compressd-swift-');
  const dir = tmp.path;
  await mkdir(join(dir, 'devices', 'd1'), { recursive: true });
  const user = userInfo().username;
  const ports = { account: await freePort(), container: await freePort(), object: await freePort() };
  const proxyPort = await freePort();
  const memcachePort = await freePort();
  buildRings(dir, ports);
  for (const role of ['account', 'container', 'object'] as const) {
    await writeFile(join(dir, `${role}-server.conf`), serverConf(role, ports[role], dir, user));
  }
  await writeFile(join(dir, 'proxy-server.conf'), proxyConf(proxyPort, memcachePort, dir, user));

  const daemons: Daemon[] = [];
  const stop = async () => {
    await Promise.all(daemons.map((d) => d.stop('SIGTERM', 5000)));
    await tmp.remove();
  };
  try {
    // memcached refuses to run as root unless told which user to become.
    daemons.push(new Daemon('memcached', 'memcached', ['-l', '127.0.0.1', '-p', String(memcachePort), '-U', '0', '-m', '32', ...(process.getuid?.() === 0 ? ['-u', 'nobody'] : [])]));
    for (const role of ['account', 'container', 'object'] as const) {
      daemons.push(new Daemon(`swift-${role}`, `swift-${role}-server`, [join(dir, `${role}-server.conf`)]));
    }
    const proxy = new Daemon('swift-proxy', 'swift-proxy-server', [join(dir, 'proxy-server.conf')]);
    daemons.push(proxy);
    const endpoint = `http://127.0.0.1:${proxyPort}`;
    await proxy.ready(async () => (await fetch(`${endpoint}/healthcheck`)).ok, 60_000);
    for (const role of ['account', 'container', 'object'] as const) {
      const d = daemons.find((x) => x.name === `swift-${role}`)!;
      await d.ready(async () => {
        await fetch(`http://127.0.0.1:${ports[role]}/healthcheck`);
        return true;
      }, 60_000);
    }
    return {
      endpoint,
      accessKeyId: ACCESS_KEY,
      secretAccessKey: SECRET,
      region: 'us-east-1',
      env: {
        AWS_ACCESS_KEY_ID: ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY: SECRET,
        AWS_REGION: 'us-east-1',
        AWS_ENDPOINT_URL_S3: endpoint,
        COMPRESSD_S3_FORCE_PATH_STYLE: 'true',
      },
      daemons,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
