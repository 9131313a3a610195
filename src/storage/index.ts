import { fileURLToPath } from 'node:url';
import type { BlobStore } from '../jobs/backend.ts';
import type { IoSink } from '../ops/io-counts.ts';
import { LocalBlobStore } from '../jobs/files/blobs.ts';
import { s3ClientFromEnv, S3BlobStore, type S3Location } from './s3.ts';

/** Blobs whose job another node may still be admitting are younger than this; recovery leaves them. */
const ORPHAN_GRACE_MS = 3600_000;

export class StorageSpecError extends Error {}

export type StorageSpec = { kind: 's3'; location: S3Location } | { kind: 'dir'; path: string };

/** Parses `--storage`: `s3://BUCKET[/PREFIX]` or `file:///DIR`. */
export function parseStorage(spec: string): StorageSpec {
  let url: URL;
  try {
    url = new URL(spec);
  } catch {
    throw new StorageSpecError(`--storage: expected s3://BUCKET[/PREFIX] or file:///DIR, got ${JSON.stringify(spec)}`);
  }
  if (url.protocol === 's3:') {
    if (!url.hostname) throw new StorageSpecError(`--storage: no bucket in ${JSON.stringify(spec)}`);
    const prefix = decodeURIComponent(url.pathname.replace(/^\/+/, ''));
    return { kind: 's3', location: { bucket: url.hostname, prefix: prefix && !prefix.endsWith('/') ? `${prefix}/` : prefix } };
  }
  if (url.protocol === 'file:') {
    if (url.hostname) throw new StorageSpecError(`--storage: a file URL names a local path, file:///DIR, got ${JSON.stringify(spec)}`);
    return { kind: 'dir', path: fileURLToPath(url) };
  }
  throw new StorageSpecError(`--storage: unsupported scheme ${url.protocol} (use s3:// or file://)`);
}

/** The shared blob store of a cluster, checked reachable before the node takes work. */
export async function openBlobStore(spec: string, io?: IoSink): Promise<BlobStore> {
  const parsed = parseStorage(spec);
  if (parsed.kind === 's3') {
    const store = new S3BlobStore(s3ClientFromEnv(io), parsed.location, ORPHAN_GRACE_MS);
    await store.check();
    return store;
  }
  return new LocalBlobStore(parsed.path, ORPHAN_GRACE_MS);
}
