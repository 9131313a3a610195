// Cluster mode's settings and its shared-directory blob store (no servers needed).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { ConfigError, resolveConfig } from '../src/config.ts';
import { LocalBlobStore } from '../src/jobs/files/blobs.ts';
import { parseStorage, StorageSpecError } from '../src/storage/index.ts';
import { scratchDir } from './helpers/daemons.ts';

describe('cluster settings', () => {
  test('--storage accepts s3://BUCKET[/PREFIX] and file:///DIR', () => {
    assert.deepEqual(parseStorage('s3://jobs'), { kind: 's3', location: { bucket: 'jobs', prefix: '' } });
    assert.deepEqual(parseStorage('s3://jobs/prod/eu'), { kind: 's3', location: { bucket: 'jobs', prefix: 'prod/eu/' } });
    assert.deepEqual(parseStorage('s3://jobs/prod/'), { kind: 's3', location: { bucket: 'jobs', prefix: 'prod/' } });
    assert.deepEqual(parseStorage('file:///mnt/shared/compressd'), { kind: 'dir', path: '/mnt/shared/compressd' });
  });

  for (const [spec, message] of [
    ['/mnt/shared', /expected s3:\/\/BUCKET/],
    ['s3://', /no bucket|expected/],
    ['file://server/share', /local path/],
    ['gs://bucket', /unsupported scheme gs:/],
  ] as const) {
    test(`--storage ${spec} is refused with a clear message`, () => {
      assert.throws(() => parseStorage(spec), (err: Error) => err instanceof StorageSpecError && message.test(err.message));
    });
  }

  test('cluster mode needs both a database and shared storage; the node id has a default', () => {
    assert.throws(() => resolveConfig({ 'database-url': 'postgres://db/x' }, {}), (err: Error) => err instanceof ConfigError && /needs --storage/.test(err.message));
    assert.throws(() => resolveConfig({}, { COMPRESSD_STORAGE: 's3://jobs' }), (err: Error) => err instanceof ConfigError && /needs --database-url/.test(err.message));
    const config = resolveConfig({ 'database-url': 'postgres://db/x' }, { COMPRESSD_STORAGE: 's3://jobs', COMPRESSD_LEASE_SECONDS: '3' });
    assert.equal(config.leaseSeconds, 3);
    assert.match(config.nodeId, new RegExp(`-${process.pid}$`));
    assert.equal(resolveConfig({}, {}).databaseUrl, '', 'without a database URL: files mode');
  });
});

describe('shared-directory blob store (file:///DIR)', () => {
  let shared: { path: string; remove(): Promise<void> };
  let scratch: { path: string; remove(): Promise<void> };
  before(async () => {
    shared = await scratchDir('compressd-shared-');
    // /dev/shm is another file system than the temporary directory on most Linux machines: the move becomes a copy.
    const shm = '/dev/shm/compressd-scratch-test';
    scratch = existsSync('/dev/shm') ? { path: shm, remove: () => rm(shm, { recursive: true, force: true }) } : await scratchDir('compressd-scratch-');
    await mkdir(scratch.path, { recursive: true });
  });
  after(async () => {
    await shared?.remove();
    await scratch?.remove();
  });

  test('a node stores its scratch file even when the shared directory is another file system', async () => {
    const store = new LocalBlobStore(shared.path);
    const file = join(scratch.path, 'result');
    await writeFile(file, 'compressed');
    assert.equal(await store.putFile('job-a', 'output', file), 10);
    assert.equal(existsSync(file), false, 'the scratch file is consumed');
    assert.equal(await readFile((await store.localFile('job-a', 'output'))!, 'utf8'), 'compressed');
  });

  test('recovery sees only jobs whose files are older than the grace period', async () => {
    const store = new LocalBlobStore(shared.path, 60_000);
    await store.put('old-job', 'input', Readable.from([Buffer.from('x')]));
    await store.put('new-job', 'input', Readable.from([Buffer.from('y')]));
    const hourAgo = new Date(Date.now() - 3600_000);
    await utimes(join(shared.path, 'old-job'), hourAgo, hourAgo);
    assert.deepEqual(await store.ids(), ['old-job']);
    assert.deepEqual((await new LocalBlobStore(shared.path).ids()).sort(), ['job-a', 'new-job', 'old-job'], 'without a grace period every job is seen');
  });
});
