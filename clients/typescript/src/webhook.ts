import { createHmac, timingSafeEqual } from 'node:crypto';
import { CompressdError } from './errors.ts';
import type { components } from './openapi.ts';

export type WebhookEvent = components['schemas']['WebhookEvent'];

/**
 * Checks a webhook delivery as the spec says: `X-Service-Signature: t=<unix seconds>,v1=<hex>`,
 * v1 = HMAC-SHA256(secret, "<t>.<raw body>") compared in constant time, and `t` no further than
 * `toleranceSeconds` from now (a replayed old delivery is refused). Pass the body exactly as
 * received, before any JSON parsing. The header goes in as Node gives it
 * (`req.headers['x-service-signature']`, which may be an array when it came more than once: every
 * copy must carry the same `t`). Returns the parsed event; throws a CompressdError otherwise.
 * Deduplicate on `eventId`: retries carry the same one.
 */
export function verifyWebhook(rawBody: string | Uint8Array, signatureHeader: string | readonly string[] | null | undefined, secret: string, toleranceSeconds = 300, now = Date.now()): WebhookEvent {
  const parts = new Map<string, string[]>();
  const header = typeof signatureHeader === 'string' ? signatureHeader : (signatureHeader ?? []).join(',');
  for (const item of header.split(',')) {
    const at = item.indexOf('=');
    if (at > 0) parts.set(item.slice(0, at).trim(), [...(parts.get(item.slice(0, at).trim()) ?? []), item.slice(at + 1).trim()]);
  }
  const stamps = new Set(parts.get('t'));
  const [t] = stamps;
  const signatures = parts.get('v1') ?? [];
  if (stamps.size > 1) throw new CompressdError('webhook.invalid_signature', null, 'X-Service-Signature carries more than one t=');
  if (!t || !/^\d+$/.test(t) || signatures.length === 0) throw new CompressdError('webhook.invalid_signature', null, 'X-Service-Signature lacks t= or v1=');
  if (Math.abs(now / 1000 - Number(t)) > toleranceSeconds) throw new CompressdError('webhook.timestamp_out_of_tolerance', null, `signed at ${t}, more than ${toleranceSeconds} s from now`);
  const expected = createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest();
  const matches = signatures.some((v1) => /^[0-9a-f]{64}$/i.test(v1) && timingSafeEqual(Buffer.from(v1, 'hex'), expected));
  if (!matches) throw new CompressdError('webhook.invalid_signature', null, 'the signature does not match the body and secret');
  try {
    return JSON.parse(typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody)) as WebhookEvent;
  } catch {
    throw new CompressdError('webhook.invalid_payload', null, 'the signed body is not JSON');
  }
}
