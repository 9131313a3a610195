import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { systemClock } from '../clock.ts';
import { fsyncDir } from '../durable/fsync-dir.ts';

const KEY_FILE = 'download-token.key';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = 1;
// Binds tokens to their purpose: a ciphertext made with this key for anything else never verifies here.
const AAD = Buffer.from('compressd.download-token.v1');
const BASE64URL = /^[A-Za-z0-9_-]+$/;


async function readKey(path: string): Promise<Buffer> {
  const key = await readFile(path);
  if (key.length !== KEY_BYTES) throw new Error(`${path} is not a ${KEY_BYTES}-byte key`);
  return key;
}

/**
 * Creates the key once. It is written whole to a private temporary file and then hard-linked
 * into place: link() never replaces an existing file, so two processes starting together agree
 * on one key, and a crash never leaves a half-written key under the real name.
 */
async function loadOrCreateKey(dataDir: string): Promise<Buffer> {
  const path = join(dataDir, KEY_FILE);
  try {
    return await readKey(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dataDir, { recursive: true });
  const tmp = join(dataDir, `.${KEY_FILE}.${process.pid}.${randomBytes(6).toString('hex')}`);
  const handle = await open(tmp, 'wx', 0o600);
  try {
    await handle.writeFile(randomBytes(KEY_BYTES));
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await unlink(tmp);
  }
  await fsyncDir(dataDir);
  return readKey(path);
}

/**
 * Presigned download tokens: AES-256-GCM over the job id and expiry, so a token can be
 * neither read nor forged nor stretched without the key in the data dir.
 * Layout (base64url): version(1) | iv(12) | ciphertext(expiry ms as uint64 BE + job id UTF-8) | tag(16).
 */
export class DownloadTokens {
  private constructor(private readonly key: Buffer) {}

  static async open(dataDir: string): Promise<DownloadTokens> {
    return new DownloadTokens(await loadOrCreateKey(dataDir));
  }

  /** Tokens under a key kept elsewhere (cluster mode: in the database, so every node verifies every token). */
  static async shared(keyStore: (fresh: Buffer) => Promise<Buffer>): Promise<DownloadTokens> {
    const key = await keyStore(randomBytes(KEY_BYTES));
    if (key.length !== KEY_BYTES) throw new Error(`the shared download-token key is not ${KEY_BYTES} bytes`);
    return new DownloadTokens(key);
  }

  create(jobId: string, expiresAt: Date): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(AAD);
    const expiry = Buffer.alloc(8);
    expiry.writeBigUInt64BE(BigInt(expiresAt.getTime()));
    const sealed = Buffer.concat([cipher.update(expiry), cipher.update(jobId, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.of(VERSION), iv, sealed, cipher.getAuthTag()]).toString('base64url');
  }

  /** The job id and expiry of a genuine token unexpired at `now`; null for anything else. */
  verify(token: string, now: Date = systemClock()): { jobId: string; expiresAt: Date } | null {
    if (typeof token !== 'string' || token.length > 4096 || !BASE64URL.test(token)) return null;
    const raw = Buffer.from(token, 'base64url');
    if (raw.length < 1 + IV_BYTES + 8 + TAG_BYTES || raw[0] !== VERSION) return null;
    const iv = raw.subarray(1, 1 + IV_BYTES);
    const sealed = raw.subarray(1 + IV_BYTES, raw.length - TAG_BYTES);
    const tag = raw.subarray(raw.length - TAG_BYTES);
    let plain: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(AAD);
      decipher.setAuthTag(tag);
      plain = Buffer.concat([decipher.update(sealed), decipher.final()]);
    } catch {
      return null;
    }
    const expiresAt = new Date(Number(plain.readBigUInt64BE(0)));
    if (expiresAt.getTime() <= now.getTime()) return null;
    return { jobId: plain.subarray(8).toString('utf8'), expiresAt };
  }
}

/** `<publicUrl>/api/compress/job/{id}/download?token=…`, tolerant of a trailing slash on the base. */
export function presignedDownloadUrl(publicUrl: string, jobId: string, token: string): string {
  const base = publicUrl.replace(/\/+$/, '');
  return `${base}/api/compress/job/${encodeURIComponent(jobId)}/download?token=${token}`;
}
