import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { buildConnector } from 'undici';

/** Resolves a host name to every address it has (A and AAAA). */
export type Resolver = (hostname: string) => Promise<string[]>;

/** What the egress guard needs: shared by URL input and webhook deliveries. */
export interface EgressConfig {
  /** Host names (exact, or `.example.com` / `*.example.com` for subdomains), IPs and CIDRs exempt from the private-address block. */
  urlAllow: string[];
  /** Host name → address, used instead of DNS. */
  dnsOverrides: Record<string, string>;
  /** TCP + TLS handshake limit, DNS lookup included. */
  connectTimeoutMs: number;
  /**
   * Extra trusted CA (PEM) on top of Node's bundled roots. Meant for tests: setting it replaces
   * Node's default store, so NODE_EXTRA_CA_CERTS is not consulted. Production leaves it unset and
   * trusts extra CAs through NODE_EXTRA_CA_CERTS.
   */
  ca?: string;
  /** DNS seam; defaults to the system resolver (`getaddrinfo`, so /etc/hosts applies). */
  resolve?: Resolver;
  /** The socket connector the guard calls once an address is vetted; defaults to undici's. */
  connector?: buildConnector.connector;
}

export interface FetchConfig extends EgressConfig {
  /** Time from request sent to response headers. */
  headersTimeoutMs: number;
  /** Longest silence between two body chunks. */
  bodyTimeoutMs: number;
  /** Whole download, redirects included: stops a trickling server from holding a request forever. */
  totalTimeoutMs: number;
  maxRedirects: number;
  /** URL downloads one account may run at the same time; more answer 429 `url_fetch.rate_limited`. */
  maxConcurrentPerAccount: number;
  /** Seconds announced in Retry-After on `url_fetch.rate_limited`. */
  rateLimitRetryAfterSeconds: number;
  /** Consecutive failures of one host (5xx, 429, timeouts, connection and DNS errors) that open its circuit. */
  circuitFailureThreshold: number;
  /** Failures further apart than this do not add up. */
  circuitWindowMs: number;
  /** How long an open circuit refuses the host before one probe request is let through. */
  circuitOpenMs: number;
}

export const FETCH_DEFAULTS: Omit<FetchConfig, 'urlAllow' | 'dnsOverrides'> = {
  connectTimeoutMs: 10_000,
  headersTimeoutMs: 15_000,
  bodyTimeoutMs: 30_000,
  totalTimeoutMs: 300_000,
  maxRedirects: 3,
  maxConcurrentPerAccount: 4,
  rateLimitRetryAfterSeconds: 5,
  circuitFailureThreshold: 5,
  circuitWindowMs: 60_000,
  circuitOpenMs: 60_000,
};

/** The fetch configuration from COMPRESSD_URL_ALLOW and COMPRESSD_DNS_OVERRIDES, other values default. */
export function fetchConfigFromEnv(env: NodeJS.ProcessEnv = process.env, overrides: Partial<FetchConfig> = {}): FetchConfig {
  return {
    ...FETCH_DEFAULTS,
    urlAllow: parseUrlAllow(env.COMPRESSD_URL_ALLOW ?? ''),
    dnsOverrides: parseDnsOverrides(env.COMPRESSD_DNS_OVERRIDES ?? ''),
    ...overrides,
  };
}

/**
 * `COMPRESSD_URL_ALLOW`: comma- or space-separated host names, IPs and CIDRs. Entries are
 * validated here so a typo fails at start-up rather than silently allowing nothing.
 */
export function parseUrlAllow(value: string): string[] {
  return splitList(value).map((entry) => {
    const e = entry.toLowerCase();
    if (e.includes('/')) {
      if (!ipaddr.isValidCIDR(e)) throw new Error(`COMPRESSD_URL_ALLOW: "${entry}" is not a valid CIDR`);
      return e;
    }
    if (isIP(e) || isHostPattern(e)) return e;
    throw new Error(`COMPRESSD_URL_ALLOW: "${entry}" is neither a host name, an IP nor a CIDR`);
  });
}

/** `COMPRESSD_DNS_OVERRIDES`: `host=ip,host2=ip2`. */
export function parseDnsOverrides(value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of splitList(value)) {
    const eq = entry.indexOf('=');
    const host = entry.slice(0, eq).trim().toLowerCase();
    const ip = entry.slice(eq + 1).trim().replace(/^\[(.*)\]$/, '$1');
    if (eq <= 0 || !isHostPattern(host) || host.startsWith('.') || host.startsWith('*')) {
      throw new Error(`COMPRESSD_DNS_OVERRIDES: "${entry}" is not host=ip`);
    }
    if (!isIP(ip)) throw new Error(`COMPRESSD_DNS_OVERRIDES: "${ip}" in "${entry}" is not an IP address`);
    out[host] = ip;
  }
  return out;
}

function splitList(value: string): string[] {
  return value.split(/[\s,]+/).filter(Boolean);
}

function isHostPattern(s: string): boolean {
  return /^(\*\.|\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/.test(s);
}
