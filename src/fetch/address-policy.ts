import ipaddr from 'ipaddr.js';

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;
type Cidr<T> = [T, number];

const cidrs4 = (list: string[]) => list.map((c) => ipaddr.IPv4.parseCIDR(c));
const cidrs6 = (list: string[]) => list.map((c) => ipaddr.IPv6.parseCIDR(c));

/** IPv4 ranges that are not the public internet: private, shared, loopback, link-local, reserved, documentation, multicast. */
const BLOCKED_V4 = cidrs4([
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
]);

/**
 * IPv6 inside global unicast (2000::/3) that still must not be reached. Everything outside
 * 2000::/3 (::, ::1, fc00::/7, fe80::/10, fec0::/10, ff00::/8, 100::/64, 64:ff9b:1::/48, …)
 * is refused wholesale unless it embeds an IPv4 address, which is then judged instead.
 */
const BLOCKED_V6_IN_GLOBAL = cidrs6(['2001:db8::/32', '2001:10::/28', '2001:20::/28', '3fff::/20']);
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

const V4_MAPPED = ipaddr.IPv6.parseCIDR('::ffff:0:0/96');
const V4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
const V4_TRANSLATED = ipaddr.IPv6.parseCIDR('::ffff:0:0:0/96');
const NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.IPv6.parseCIDR('2002::/16');
const TEREDO = ipaddr.IPv6.parseCIDR('2001::/32');

function v4FromWords(hi: number, lo: number): IPv4 {
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}

/**
 * The IPv4 addresses an IPv6 address carries and that a packet to it would effectively reach:
 * mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), SIIT-translated, NAT64 (64:ff9b::/96),
 * 6to4 (2002:AABB:CCDD::) and Teredo (server and obfuscated client).
 */
export function embeddedIPv4(ip: IPv6): IPv4[] {
  const w = ip.parts;
  if (ip.match(V4_MAPPED) || ip.match(V4_TRANSLATED) || ip.match(NAT64)) return [v4FromWords(w[6]!, w[7]!)];
  if (ip.match(V4_COMPATIBLE)) return [v4FromWords(w[6]!, w[7]!)];
  if (ip.match(SIX_TO_FOUR)) return [v4FromWords(w[1]!, w[2]!)];
  if (ip.match(TEREDO)) return [v4FromWords(w[2]!, w[3]!), v4FromWords(~w[6]! & 0xffff, ~w[7]! & 0xffff)];
  return [];
}

function blockedV4(ip: IPv4): boolean {
  return BLOCKED_V4.some((c) => ip.match(c));
}

function blockedV6(ip: IPv6): boolean {
  // :: and ::1 sit inside ::/96 but are IPv6 addresses in their own right, never IPv4 carriers.
  if (ip.range() === 'unspecified' || ip.range() === 'loopback') return true;
  const inner = embeddedIPv4(ip);
  if (inner.length > 0) return inner.some(blockedV4);
  if (!ip.match(GLOBAL_UNICAST)) return true;
  return BLOCKED_V6_IN_GLOBAL.some((c) => ip.match(c));
}

/** True when `ip` is not a public unicast address (unparseable input counts as blocked). */
export function isBlockedAddress(ip: string): boolean {
  const addr = parseAddress(ip);
  if (!addr) return true;
  return addr.kind() === 'ipv4' ? blockedV4(addr as IPv4) : blockedV6(addr as IPv6);
}

function parseAddress(ip: string): IPv4 | IPv6 | undefined {
  const bare = ip.replace(/^\[(.*)\]$/, '$1');
  // Only canonical dotted-quad IPv4 here: legacy spellings are the URL parser's job, and an
  // address string that is not already normalised did not come from a resolver or a URL.
  if (!ipaddr.IPv4.isValidFourPartDecimal(bare) && !ipaddr.IPv6.isValid(bare)) return undefined;
  try {
    return ipaddr.parse(bare);
  } catch {
    return undefined;
  }
}

/**
 * The operator's exemptions (COMPRESSD_URL_ALLOW): a host name matches by name whatever it
 * resolves to; an address matches a CIDR either as itself or through the IPv4 it embeds.
 */
export class AllowList {
  private readonly hosts = new Set<string>();
  private readonly suffixes: string[] = [];
  private readonly v4: Cidr<IPv4>[] = [];
  private readonly v6: Cidr<IPv6>[] = [];

  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const e = raw.toLowerCase().replace(/\.$/, '');
      if (e.includes('/') || ipaddr.isValid(e)) {
        const [addr, bits] = e.includes('/') ? ipaddr.parseCIDR(e) : [ipaddr.parse(e), ipaddr.parse(e).kind() === 'ipv4' ? 32 : 128];
        if (addr.kind() === 'ipv4') this.v4.push([addr as IPv4, bits]);
        else this.v6.push([addr as IPv6, bits]);
      } else if (e.startsWith('*.') || e.startsWith('.')) {
        this.suffixes.push(e.slice(e.indexOf('.')));
      } else {
        this.hosts.add(e);
      }
    }
  }

  allowsHost(hostname: string): boolean {
    const h = hostname.toLowerCase().replace(/\.$/, '');
    return this.hosts.has(h) || this.suffixes.some((s) => h.endsWith(s));
  }

  allowsAddress(ip: string): boolean {
    const addr = parseAddress(ip);
    if (!addr) return false;
    if (addr.kind() === 'ipv4') return this.v4.some((c) => (addr as IPv4).match(c));
    const v6 = addr as IPv6;
    return this.v6.some((c) => v6.match(c)) || embeddedIPv4(v6).some((v4) => this.v4.some((c) => v4.match(c)));
  }
}
