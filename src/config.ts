import { availableParallelism, hostname } from 'node:os';
import { resolve } from 'node:path';
import { defaultMemoryBudgetBytes } from './jobs/memory-budget.ts';
import { DEFAULT_MAX_CRASHES } from './jobs/lifecycle.ts';
import { describeProxyTrust, NO_PROXY, parseProxyTrust, type ProxyTrust } from './server/proxy-trust.ts';

/** Every setting of `compressd serve`: a flag `--kebab-name` and its environment twin (`COMPRESSD_` and the name in upper snake case); flags win. */
export interface ServeConfig {
  port: number;
  host: string;
  dataDir: string;
  workers: number;
  memoryBudgetMb: number;
  publicUrl: string;
  retentionSeconds: number;
  recordRetentionSeconds: number;
  jobTimeoutSeconds: number;
  jobMaxCrashes: number;
  bodyIdleSeconds: number;
  bodyMinBytesPerSecond: number;
  urlAllow: string;
  dnsOverrides: string;
  webhookRetryDelays: number[];
  rateLimitPerMinute: number;
  trustProxy: ProxyTrust;
  maxFileSizeBytes: number;
  site: string;
  minFreeDiskBytes: number;
  accountDiskShare: number;
  metricsToken: string;
  databaseUrl: string;
  storage: string;
  nodeId: string;
  leaseSeconds: number;
  pollSeconds: number;
}

type Kind = 'int' | 'number' | 'string' | 'numbers' | 'proxies';

interface Setting {
  key: keyof ServeConfig;
  flag: string;
  env: string;
  kind: Kind;
  help: string;
  default: (partial: Partial<ServeConfig>) => unknown;
}

const setting = (key: keyof ServeConfig, kind: Kind, help: string, dflt: Setting['default']): Setting => ({
  key,
  kind,
  help,
  default: dflt,
  flag: key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`),
  env: `COMPRESSD_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`,
});

export const SETTINGS: Setting[] = [
  setting('port', 'int', 'TCP port to listen on', () => 8080),
  setting('host', 'string', 'address to listen on', () => '0.0.0.0'),
  setting('dataDir', 'string', 'data directory (accounts, journals, spool)', () => './data'),
  setting('workers', 'int', 'compression worker threads', () => availableParallelism()),
  setting('memoryBudgetMb', 'int', "memory for running jobs' pictures; a job waits for room, one that can never fit fails (jobs.memory_budget)", () => Math.floor(defaultMemoryBudgetBytes() / 1024 ** 2)),
  setting('publicUrl', 'string', 'base URL of presigned download links in webhooks', (c) => `http://${c.host === '0.0.0.0' ? 'localhost' : c.host}:${c.port}`),
  setting('retentionSeconds', 'number', 'how long outputs are kept after completion', () => 3600),
  setting('recordRetentionSeconds', 'number', 'how long a job record is kept after its output expired (410), then forgotten (404)', () => 86400),
  setting('jobTimeoutSeconds', 'number', 'a running job past this fails with jobs.timeout', () => 300),
  setting('jobMaxCrashes', 'int', 'a job whose runs ended with their process this many times fails with jobs.crashed', () => DEFAULT_MAX_CRASHES),
  setting('bodyIdleSeconds', 'number', 'a request body that sends nothing for this long is ended with 408', () => 60),
  setting('bodyMinBytesPerSecond', 'int', 'a request body that averages fewer bytes per second than this, past --body-idle-seconds, is ended with 408 (0 = no minimum)', () => 16 * 1024),
  setting('urlAllow', 'string', 'host names or CIDRs exempt from the private-address block', () => ''),
  setting('dnsOverrides', 'string', 'host=ip,… resolved without DNS', () => ''),
  setting('webhookRetryDelays', 'numbers', 'seconds before webhook attempts 1-5', () => [0, 1, 5, 30, 120]),
  setting('rateLimitPerMinute', 'int', 'requests per minute per client IP (0 = off)', () => 3000),
  setting('trustProxy', 'proxies', 'proxies believed about X-Forwarded-For: a hop count or proxy IPs/CIDRs; alone = 1 hop', () => NO_PROXY),
  setting('maxFileSizeBytes', 'int', 'largest accepted input, upload or URL', () => 1024 * 1024 * 1024),
  setting('site', 'string', 'the `site` field of webhook payloads', () => 'compressd'),
  setting('minFreeDiskBytes', 'int', 'refuse new jobs (503) when the data volume has less free space', () => 256 * 1024 * 1024),
  setting('accountDiskShare', 'number', "the largest share (0-1] of the free space above --min-free-disk-bytes one account's uploads in progress may hold (503 beyond)", () => 0.5),
  setting('metricsToken', 'string', 'bearer token required by GET /metrics (empty = open)', () => ''),
  setting('databaseUrl', 'string', 'PostgreSQL URL: cluster mode, state shared by every node (empty = files mode)', () => ''),
  setting('storage', 'string', 'cluster mode: where inputs and outputs live, s3://BUCKET[/PREFIX] or file:///DIR', () => ''),
  setting('nodeId', 'string', "cluster mode: this node's name in leases and claims", () => `${hostname()}-${process.pid}`),
  setting('leaseSeconds', 'number', "cluster mode: a running job whose node stops renewing for this long runs again elsewhere", () => 10),
  setting('pollSeconds', 'number', 'cluster mode: how often a node looks for jobs queued by other nodes (an expiring lease is acted on at once)', () => 0.5),
];

export class ConfigError extends Error {}

function parseValue(s: Setting, raw: string, source: string): unknown {
  const fail = (what: string) => new ConfigError(`${source}: ${what}, got ${JSON.stringify(raw)}`);
  switch (s.kind) {
    case 'int': {
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 0) throw fail('expected a whole number ≥ 0');
      return n;
    }
    case 'number': {
      const n = Number(raw);
      if (!Number.isFinite(n) || n <= 0) throw fail('expected a number > 0');
      return n;
    }
    case 'proxies':
      try {
        return parseProxyTrust(raw);
      } catch {
        throw fail('expected a hop count, proxy IPs/CIDRs separated by commas, or true/false');
      }
    case 'numbers': {
      const list = raw.split(',').map((x) => Number(x.trim()));
      if (list.length === 0 || list.some((n) => !Number.isFinite(n) || n < 0)) throw fail('expected comma-separated seconds');
      return list;
    }
    default:
      return raw;
  }
}

/**
 * Resolves the configuration from flags (already parsed, as strings), then
 * the environment, then a config file's settings (keys as in ServeConfig, e.g.
 * `{"port": 9000, "retentionSeconds": 600}`), then the defaults. Throws ConfigError
 * with one clear line.
 */
export function resolveConfig(
  flags: Record<string, string | undefined>,
  env: NodeJS.ProcessEnv = process.env,
  file: Record<string, unknown> = {},
  fileName = 'config file',
): ServeConfig {
  const unknown = Object.keys(file).filter((k) => !SETTINGS.some((s) => s.key === k));
  if (unknown.length > 0) throw new ConfigError(`${fileName}: unknown setting ${unknown.join(', ')}`);
  const out: Partial<ServeConfig> = {};
  for (const s of SETTINGS) {
    const flag = flags[s.flag];
    const envValue = env[s.env];
    const fromFile = file[s.key];
    let value: unknown;
    if (flag !== undefined) value = parseValue(s, flag, `--${s.flag}`);
    else if (envValue !== undefined && envValue !== '') value = parseValue(s, envValue, s.env);
    else if (fromFile !== undefined && fromFile !== null) value = parseValue(s, Array.isArray(fromFile) ? fromFile.join(',') : String(fromFile), `${fileName}: ${s.key}`);
    else value = s.default(out);
    (out as Record<string, unknown>)[s.key] = value;
  }
  const config = out as ServeConfig;
  if (config.workers < 1) throw new ConfigError('--workers: expected at least 1');
  if (config.memoryBudgetMb < 64) throw new ConfigError('--memory-budget-mb: expected at least 64');
  if (config.port > 65535) throw new ConfigError('--port: expected at most 65535');
  if (config.accountDiskShare > 1) throw new ConfigError('--account-disk-share: expected a share of at most 1');
  if (config.databaseUrl && !config.storage) throw new ConfigError('--database-url: cluster mode also needs --storage s3://BUCKET[/PREFIX] or file:///DIR');
  if (config.storage && !config.databaseUrl) throw new ConfigError('--storage: shared storage is for cluster mode, which needs --database-url');
  config.dataDir = resolve(config.dataDir);
  config.publicUrl = config.publicUrl.replace(/\/+$/, '');
  return config;
}

/**
 * Variables read outside the settings table, with no flag: by the single executable's launcher
 * before anything else runs, by the logger, by the S3 client (the AWS SDK's own) and by Node.
 * `serve --help` lists them; a test checks that every variable the source reads is listed here or in SETTINGS.
 */
export const ENVIRONMENT_ONLY: { names: string[]; help: string }[] = [
  { names: ['COMPRESSD_LOG_LEVEL'], help: 'log level: trace, debug, info, warn, error, fatal or silent (default: info)' },
  { names: ['COMPRESSD_ALLOCATOR'], help: 'the single executable: jemalloc (bundled; it re-executes itself onto it at start) or system (glibc malloc) (default: jemalloc)' },
  { names: ['COMPRESSD_CACHE_DIR'], help: 'where the single executable unpacks its runtime; must allow exec (default: $XDG_CACHE_HOME/compressd, else ~/.cache/compressd)' },
  { names: ['NODE_EXTRA_CA_CERTS'], help: 'PEM file of extra certificate authorities trusted for URL input, webhooks and S3 (standard Node)' },
  { names: ['COMPRESSD_S3_FORCE_PATH_STYLE'], help: 'cluster mode: true for path-style S3 addressing, for servers without virtual-host buckets (default: false)' },
  { names: ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_REGION', 'AWS_ENDPOINT_URL_S3'], help: "cluster mode: S3 credentials, region and endpoint (the AWS SDK's standard variables)" },
];

/** What a flag's value looks like in the help, where its kind alone says too little. */
const ARGUMENT: Partial<Record<keyof ServeConfig, string>> = {
  host: 'ADDRESS',
  dataDir: 'DIR',
  publicUrl: 'URL',
  urlAllow: 'HOST|CIDR,…',
  dnsOverrides: 'HOST=IP,…',
  webhookRetryDelays: 'SECONDS,…',
  trustProxy: 'HOPS|CIDR,…',
  maxFileSizeBytes: 'BYTES',
  minFreeDiskBytes: 'BYTES',
  memoryBudgetMb: 'MB',
  bodyMinBytesPerSecond: 'BYTES',
  accountDiskShare: 'SHARE',
  site: 'NAME',
  metricsToken: 'TOKEN',
  databaseUrl: 'URL',
  storage: 'URL',
  nodeId: 'NAME',
};
const ARGUMENT_OF_KIND: Record<Kind, string> = { int: 'N', number: 'SECONDS', string: 'VALUE', numbers: 'LIST', proxies: 'HOPS|CIDR,…' };

const HELP_WIDTH = 80;
const HELP_INDENT = '        ';

/** Words in lines under `indent`, shorter than 80 columns. */
export function wrapWords(text: string, indent = HELP_INDENT): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && indent.length + line.length + 1 + word.length >= HELP_WIDTH) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line].map((l) => indent + l).join('\n');
}

/** One option of a help: `--flag ARG` and its environment twin on a line, its description wrapped below. */
export function helpEntry(flag: string, env: string | undefined, text: string): string {
  return `${`  ${flag.padEnd(32)} ${env ?? ''}`.trimEnd()}\n${wrapWords(text)}`;
}

/**
 * A setting as another command takes it (`--data-dir` of `keys`, `backup`): the same flag, environment
 * twin, description and default as `serve` has, so the two cannot drift apart.
 */
export function settingOption(key: keyof ServeConfig): { arg: string; env: string; help: string; default?: string } {
  const s = SETTINGS.find((x) => x.key === key)!;
  const d = s.default({});
  return { arg: ARGUMENT[key] ?? ARGUMENT_OF_KIND[s.kind], env: s.env, help: s.help, ...(d === '' ? {} : { default: String(d) }) };
}

/** Every setting as `--flag ARG  ENV_TWIN` over its description and default, then the variables with no flag. */
export function settingsHelp(): string {
  const defaults: Partial<ServeConfig> = {};
  const entries = SETTINGS.map((s) => {
    const d = s.default(defaults);
    (defaults as Record<string, unknown>)[s.key] = d;
    const shown = s.key === 'publicUrl' ? 'http://<host>:<port>' : s.key === 'workers' ? 'number of cores' : s.key === 'memoryBudgetMb' ? 'memory - 512' : s.key === 'nodeId' ? '<host name>-<pid>' : s.key === 'trustProxy' ? describeProxyTrust(d as ProxyTrust) : Array.isArray(d) ? d.join(',') : String(d);
    return helpEntry(`--${s.flag} ${ARGUMENT[s.key] ?? ARGUMENT_OF_KIND[s.kind]}`, s.env, `${s.help} (default: ${shown || 'empty'})`);
  });
  entries.push(helpEntry('--config FILE', undefined, 'JSON file with any of these settings (camelCase keys); flags and environment win'));
  const environment = ENVIRONMENT_ONLY.map((v) => `${v.names.map((n) => `  ${n}`).join('\n')}\n${wrapWords(v.help)}`);
  return `${entries.join('\n')}\n\nEnvironment only (no flag):\n${environment.join('\n')}`;
}
