/**
 * Phrases object stores put in the body of a request refused because its signature expired:
 * S3 (`AccessDenied` "Request has expired", `ExpiredToken`), GCS (`ExpiredToken`, "token has
 * expired") and Azure SAS ("Signature not valid in the specified time frame").
 */
const EXPIRED_BODY = /request has expired|<code>\s*expiredtoken\s*<\/code>|token has expired|signature not valid in the specified time frame/i;

/** Statuses object stores answer an expired signature with. */
export const EXPIRY_STATUSES = new Set([400, 401, 403]);

/**
 * True when a 400/401/403 answer to a presigned URL means "expired": the store said so in
 * its error body, or the URL's own signature parameters put its expiry in the past.
 */
export function isExpiredPresignedAnswer(status: number, body: string, url: URL, now = Date.now()): boolean {
  if (!EXPIRY_STATUSES.has(status)) return false;
  if (EXPIRED_BODY.test(body)) return true;
  const expiry = signedExpiry(url.searchParams);
  return expiry !== undefined && expiry <= now;
}

/** Expiry instant (ms) encoded in presigned-URL query parameters, if any. */
export function signedExpiry(q: URLSearchParams): number | undefined {
  const get = (name: string) => {
    for (const [k, v] of q) if (k.toLowerCase() === name) return v;
    return undefined;
  };
  // SigV4 (S3 and GCS V4): start date + lifetime in seconds.
  for (const prefix of ['x-amz', 'x-goog']) {
    const date = get(`${prefix}-date`);
    const lifetime = get(`${prefix}-expires`);
    if (date && lifetime && /^\d+$/.test(lifetime)) {
      const start = parseBasicIso(date);
      if (start !== undefined) return start + Number(lifetime) * 1000;
    }
  }
  // S3 SigV2 and GCS V2: absolute Unix seconds.
  const expires = get('expires');
  if (expires && /^\d{9,11}$/.test(expires)) return Number(expires) * 1000;
  // Azure SAS: `se` is an ISO 8601 instant; `sig` tells it is a SAS and not some other `se`.
  const se = get('se');
  if (se && get('sig')) {
    const t = Date.parse(se);
    if (!Number.isNaN(t)) return t;
  }
  return undefined;
}

/** `20240101T120000Z` → epoch ms. */
function parseBasicIso(s: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, se] = m.map(Number) as number[];
  return Date.UTC(y!, mo! - 1, d!, h!, mi!, se!);
}
