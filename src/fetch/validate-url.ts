import { urlFetchError } from './errors.ts';

/** Longest `inputUrl` accepted; presigned URLs are long, but not this long. */
export const MAX_URL_LENGTH = 8192;

/**
 * Checks an `inputUrl` value without any network activity. Legacy IPv4 spellings
 * (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) come out of the WHATWG parser as dotted
 * quads, so the egress guard only ever sees canonical addresses.
 */
export function validateInputUrl(raw: unknown): URL {
  if (typeof raw !== 'string' || raw.trim() === '') throw urlFetchError('invalid_url', 'inputUrl is missing or empty', false);
  if (raw.length > MAX_URL_LENGTH) throw urlFetchError('invalid_url', `inputUrl is longer than ${MAX_URL_LENGTH} characters`, false);
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw urlFetchError('invalid_url', 'inputUrl is not a valid absolute URL', false);
  }
  if (url.protocol !== 'https:') throw urlFetchError('invalid_scheme', `inputUrl must use https, not ${url.protocol.slice(0, -1)}`, false);
  const reason = unfetchableReason(url);
  if (reason) throw urlFetchError('invalid_url', `inputUrl ${reason}`, false);
  return url;
}

/**
 * Why the fetcher must not request `url` (checked for the input URL and every redirect
 * target), or undefined. Credentials are refused because they would go to whoever answers.
 */
export function unfetchableReason(url: URL): string | undefined {
  if (url.protocol !== 'https:') return `uses ${url.protocol.slice(0, -1)}; only https is allowed`;
  if (url.hostname === '') return 'has no host';
  if (url.username !== '' || url.password !== '') return 'must not contain credentials';
  return undefined;
}
