import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { AllowList, isBlockedAddress } from './address-policy.ts';
import type { EgressConfig, Resolver } from './config.ts';

export { isBlockedAddress } from './address-policy.ts';

/** The destination resolved to (or is) an address outside the public internet. */
export class EgressDeniedError extends Error {
  readonly code = 'EGRESS_DENIED';
  constructor(
    readonly hostname: string,
    readonly address: string,
  ) {
    super(`${hostname} resolves to ${address}, which is not a public address`);
    this.name = 'EgressDeniedError';
  }
}

/** The host name has no address (or the resolver failed or timed out). */
export class DnsFailureError extends Error {
  readonly code = 'EGRESS_DNS_FAILURE';
  constructor(
    readonly hostname: string,
    /** Temporary resolver trouble (SERVFAIL, timeout) rather than a name that does not exist. */
    readonly transient: boolean,
    cause?: unknown,
  ) {
    super(`could not resolve ${hostname}`, { cause });
    this.name = 'DnsFailureError';
  }
}

const systemResolver: Resolver = async (hostname) => (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

const TRANSIENT_DNS = new Set(['EAI_AGAIN', 'ESERVFAIL', 'ETIMEOUT', 'ECONNREFUSED']);

/**
 * Resolves `hostname` (IP literals and overrides without DNS) and returns the address to connect
 * to, after checking that EVERY address it has is public or exempt: a name with one private
 * record among public ones is refused, so round-robin tricks cannot slip through.
 */
export async function vetDestination(hostname: string, config: EgressConfig, allow = new AllowList(config.urlAllow)): Promise<string> {
  const host = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  const addresses = isIP(host) ? [host] : await resolveWithTimeout(host, config);
  if (addresses.length === 0) throw new DnsFailureError(host, false);
  if (!isIP(host) && allow.allowsHost(host)) return addresses[0]!;
  for (const address of addresses) {
    if (isBlockedAddress(address) && !allow.allowsAddress(address)) throw new EgressDeniedError(host, address);
  }
  return addresses[0]!;
}

async function resolveWithTimeout(host: string, config: EgressConfig): Promise<string[]> {
  const override = config.dnsOverrides[host];
  if (override) return [override];
  const resolve = config.resolve ?? systemResolver;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DnsFailureError(host, true, new Error('DNS lookup timed out'))), config.connectTimeoutMs);
  });
  try {
    return await Promise.race([resolve(host), timeout]);
  } catch (err) {
    if (err instanceof DnsFailureError) throw err;
    const code = (err as { code?: string }).code ?? '';
    throw new DnsFailureError(host, TRANSIENT_DNS.has(code), err);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A connector that vets the destination and then opens the socket to the vetted address
 * itself: the address checked is the address used (no second lookup, so DNS rebinding has
 * nothing to race), and IP-literal hosts go through the same check. TLS still verifies the
 * certificate against the host name, because undici derives SNI from `host`, not `hostname`.
 */
export function guardedConnector(config: EgressConfig): buildConnector.connector {
  const allow = new AllowList(config.urlAllow);
  const base =
    config.connector ??
    buildConnector({
      timeout: config.connectTimeoutMs,
      ...(config.ca ? { ca: [...rootCertificates, config.ca] } : {}),
    });
  return (options, callback) => {
    vetDestination(options.hostname, config, allow).then(
      (address) => base({ ...options, hostname: address }, callback),
      (err: Error) => callback(err, null),
    );
  };
}

/**
 * An undici dispatcher whose every connection passes the egress guard. Use it for all
 * outbound requests to user-supplied URLs (URL input, webhooks); it never follows redirects.
 */
export function guardedDispatcher(config: EgressConfig, options: Omit<Agent.Options, 'connect'> = {}): Dispatcher {
  return new Agent({ ...options, connect: guardedConnector(config) });
}
