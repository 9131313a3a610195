import { openAsBlob } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { after, afterEach } from 'node:test';
import { pino } from 'pino';
import { AccountRegistry } from '../../src/accounts/registry.ts';
import { resolveConfig, type ServeConfig } from '../../src/config.ts';
import type { FetchConfig } from '../../src/fetch/config.ts';
import { openApiDocument } from '../../src/server/openapi/document.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { TestClock } from './clock.ts';
import { contractSummary, contractStats, takeMismatches, watchContract } from './contract.ts';
import { waitForJobStatus } from './poll.ts';

export const CORPUS = new URL('../../../shared/corpus/', import.meta.url).pathname;

export interface TestServer {
  url: string;
  key: string;
  dataDir: string;
  service: RunningService;
  /** The service's clock: move it forward instead of waiting for leases, retention, retries, rate windows. */
  clock: TestClock;
  /** fetch against the server with the default key (override with headers). */
  api(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  /** Creates another key (and account) through the same registry the CLI uses. */
  newKey(account: string, opts?: { credits?: number; guest?: boolean; allowIps?: string }): string;
  stop(): Promise<void>;
}

export async function startTestServer(settings: Partial<Record<keyof ServeConfig, string>> = {}, fetchExtra: Partial<FetchConfig> = {}): Promise<TestServer> {
  const dataDir = settings.dataDir ?? (await mkdtemp(join(tmpdir(), 'compressd-test-')));
  const flags: Record<string, string> = { port: '0', host: '127.0.0.1', workers: '2', 'data-dir': dataDir };
  for (const [k, v] of Object.entries(settings)) flags[k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)] = v!;
  const config = resolveConfig(flags, {});
  const clock = new TestClock();
  const service = await startService({ config, log: pino({ level: 'silent' }), fetch: fetchExtra, clock: clock.now });
  const url = `http://127.0.0.1:${service.port}`;
  // The document /openapi.json serves, built in-process so that no request counts against a rate limit.
  watchContract(service.server as Server, openApiDocument(service.routes()));
  const registry = new AccountRegistry(dataDir);
  const key = service.firstKey ?? registry.createKey('default').key;
  return {
    url,
    key,
    dataDir,
    service,
    clock,
    api(path, init = {}) {
      const headers = new Headers(init.headers);
      const k = init.key === undefined ? key : init.key;
      if (k !== null) headers.set('x-service-api-key', k);
      return fetch(url + path, { ...init, headers });
    },
    newKey(account, opts = {}) {
      registry.ensureAccount(account, opts.credits);
      return registry.createKey(account, { guest: opts.guest, allowIps: opts.allowIps }).key;
    },
    async stop() {
      registry.close();
      await service.close();
      if (!settings.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

// Every test of a file that uses test servers fails when a response it caused broke the
// OpenAPI contract; answers still in flight when a test ends count against the next one or,
// at the end, against the file. Each file prints its tally and the run's so far.
const failOnMismatch = () => {
  const fresh = takeMismatches();
  if (fresh.length) throw new Error(`${fresh.length} response(s) off the OpenAPI document:\n${fresh.join('\n')}`);
};
afterEach(failOnMismatch);
after(() => {
  if (contractStats.operations.size > 0) console.log(contractSummary(relative(process.cwd(), process.argv[1] ?? 'test')));
  failOnMismatch();
});

/** A multipart form with a corpus (or any) file streamed from disk. */
export async function fileForm(path: string, fields: Record<string, string> = {}, name = basename(path)): Promise<FormData> {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  form.set('file', await openAsBlob(path), name);
  return form;
}

export async function json<T = Record<string, any>>(res: Response): Promise<T> {
  return (await res.json()) as T;
}

/** Polls a job until its status is one of `until` (default: any terminal status). */
export async function waitForJob(s: TestServer, id: string, until = ['Succeeded', 'Failed', 'Canceled'], timeoutMs = 60_000, key?: string): Promise<Record<string, any>> {
  return waitForJobStatus(id, async () => json(await s.api(`/compress/job/${id}`, { key })), until, { timeoutMs });
}
