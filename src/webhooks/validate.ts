import { isIP } from 'node:net';
import { ApiError } from '../errors.ts';

export type WebhookEventKind = 'succeeded' | 'failed';

/** A job's validated webhook settings, as stored with the job and the outbox. */
export interface WebhookConfig {
  url: string;
  secret: string;
  events: WebhookEventKind[];
}

const MAX_URL_LENGTH = 2048;
const SECRET_MIN = 16;
const SECRET_MAX = 256;
const BLOCKED_SUFFIXES = ['local', 'internal', 'localhost'];
const EVENT_KINDS: readonly WebhookEventKind[] = ['succeeded', 'failed'];

function invalid(detail: string): ApiError {
  return new ApiError('compress.invalid_webhook', 400, detail);
}

// Multipart clients often send every form field, so an empty string means "not given".
function absent(value: unknown): boolean {
  return value === undefined || value === null || value === '';
}

function checkUrl(value: unknown): string {
  if (typeof value !== 'string') throw invalid('webhookUrl must be a string.');
  if (value.length > MAX_URL_LENGTH) throw invalid(`webhookUrl must be at most ${MAX_URL_LENGTH} characters.`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid('webhookUrl is not a valid URL.');
  }
  if (url.protocol !== 'https:') throw invalid('webhookUrl must use https.');
  // The WHATWG parser has already turned "0x7f.1" or "2130706433" into a dotted quad, so these
  // checks see the address the request would really go to.
  const host = url.hostname.toLowerCase().replace(/\.$/, '');
  if (host.startsWith('[') || isIP(host) !== 0) throw invalid('webhookUrl must use a host name, not an IP address.');
  if (host === '') throw invalid('webhookUrl has no host name.');
  for (const suffix of BLOCKED_SUFFIXES) {
    if (host === suffix || host.endsWith(`.${suffix}`)) {
      throw invalid(`webhookUrl hosts under .${suffix} are not allowed.`);
    }
  }
  if (url.href.length > MAX_URL_LENGTH) throw invalid(`webhookUrl must be at most ${MAX_URL_LENGTH} characters.`);
  return url.href;
}

function checkSecret(value: unknown): string {
  if (absent(value)) throw invalid('webhookSecret is required with webhookUrl.');
  if (typeof value !== 'string') throw invalid('webhookSecret must be a string.');
  const length = [...value].length;
  if (length < SECRET_MIN || length > SECRET_MAX) {
    throw invalid(`webhookSecret must be ${SECRET_MIN}-${SECRET_MAX} characters.`);
  }
  return value;
}

function checkEvents(value: unknown): WebhookEventKind[] {
  if (absent(value)) return [...EVENT_KINDS];
  if (typeof value !== 'string') throw invalid('webhookEvents must be a comma-separated string.');
  const kinds = new Set<WebhookEventKind>();
  for (const part of value.split(',')) {
    const kind = part.trim();
    if (!(EVENT_KINDS as readonly string[]).includes(kind)) {
      throw invalid('webhookEvents must be "succeeded", "failed" or "succeeded,failed".');
    }
    kinds.add(kind as WebhookEventKind);
  }
  return EVENT_KINDS.filter((k) => kinds.has(k));
}

/**
 * Validates the webhook fields of a submission. Returns null when no webhook was asked for;
 * throws ApiError compress.invalid_webhook (400) when any field breaks the spec's rules,
 * including a secret or event filter sent without a URL (almost certainly a client mistake).
 */
export function validateWebhook(fields: {
  webhookUrl?: unknown;
  webhookSecret?: unknown;
  webhookEvents?: unknown;
}): WebhookConfig | null {
  if (absent(fields.webhookUrl)) {
    if (!absent(fields.webhookSecret) || !absent(fields.webhookEvents)) {
      throw invalid('webhookSecret and webhookEvents need a webhookUrl.');
    }
    return null;
  }
  const url = checkUrl(fields.webhookUrl);
  const secret = checkSecret(fields.webhookSecret);
  const events = checkEvents(fields.webhookEvents);
  return { url, secret, events };
}
