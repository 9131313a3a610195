import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const PREFIX = 'cpd';

/** A new API key: `cpd_<id>_<secret>`; only the secret's hash is ever stored. */
export function newApiKey(): { id: string; key: string; hash: string } {
  const id = randomBytes(6).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  return { id, key: `${PREFIX}_${id}_${secret}`, hash: hashSecret(secret) };
}

export function parseApiKey(key: string): { id: string; secret: string } | null {
  const m = /^cpd_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/.exec(key);
  return m ? { id: m[1], secret: m[2] } : null;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
