import ipaddr from 'ipaddr.js';
import { ipAllowed, parseAllowList } from '../accounts/ip-allow.ts';

/**
 * Which proxies in front of the server are believed about the client's address:
 * none, the nearest `hops` of them, or those whose addresses are in `proxies` (IPs and CIDRs).
 */
export type ProxyTrust = { hops: number } | { proxies: string[] };

export const NO_PROXY: ProxyTrust = { hops: 0 };

/**
 * Parses `--trust-proxy`: a hop count, a comma list of proxy IPs/CIDRs, or the old boolean spelling
 * (`true`/`yes`/`on` = 1 hop, `false`/`no`/`off`/empty = none). Throws on anything else.
 */
export function parseProxyTrust(raw: string): ProxyTrust {
  const value = raw.trim();
  if (/^(true|yes|on)$/i.test(value)) return { hops: 1 };
  if (/^(false|no|off|)$/i.test(value)) return NO_PROXY;
  if (/^\d+$/.test(value)) return { hops: Number(value) };
  const proxies = parseAllowList(value);
  if (proxies.length === 0) throw new Error('no proxy address given');
  return { proxies };
}

export function describeProxyTrust(trust: ProxyTrust): string {
  if ('proxies' in trust) return trust.proxies.join(',');
  return trust.hops === 0 ? 'off' : String(trust.hops);
}

/** Only a plain address counts: IPv4 in dotted-quad form (not `127.1` or hex), or IPv6. */
const isIp = (s: string) => ipaddr.IPv4.isValidFourPartDecimal(s) || ipaddr.IPv6.isValid(s);

/**
 * The client's address. Each proxy appends the address it received the request from to
 * X-Forwarded-For, so the chain read right to left, starting at the socket's peer, goes from the
 * nearest hop outwards; everything left of the first untrusted hop was written by that hop (or the
 * client) and may be forged. The answer is the first address that is not a trusted proxy, or the
 * farthest one when every hop is trusted. An entry on that walk that is not a valid IP (a port, a
 * name, garbage) means the chain cannot be read: the socket's address is used.
 */
export function clientAddress(socketIp: string, forwardedFor: string | undefined, trust: ProxyTrust): string {
  if (!forwardedFor || ('hops' in trust && trust.hops === 0)) return socketIp;
  const chain = [socketIp, ...forwardedFor.split(',').map((s) => s.trim()).reverse()];
  const trusted = (ip: string, index: number) => ('hops' in trust ? index < trust.hops : ipAllowed(ip, trust.proxies));
  let i = 0;
  while (i < chain.length - 1 && trusted(chain[i]!, i)) {
    i++;
    if (!isIp(chain[i]!)) return socketIp;
  }
  return chain[i]!;
}
