import ipaddr from 'ipaddr.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Parses an allow list of IPv4/IPv6 addresses and CIDRs (comma or space separated). */
export function parseAllowList(list: string | string[]): string[] {
  const items = (Array.isArray(list) ? list : list.split(/[\s,]+/)).map((s) => s.trim()).filter(Boolean);
  for (const item of items) toRange(item);
  return items;
}

function toRange(item: string): Range {
  try {
    if (item.includes('/')) return ipaddr.parseCIDR(item);
    const addr = ipaddr.parse(item);
    return [addr, addr.kind() === 'ipv4' ? 32 : 128];
  } catch {
    throw new Error(`not an IP address or CIDR: ${item}`);
  }
}

/** True when `ip` (an IPv4-mapped IPv6 counts as its IPv4) is inside one of the entries. */
export function ipAllowed(ip: string, allow: string[]): boolean {
  if (allow.length === 0) return true;
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.process(ip);
  } catch {
    return false;
  }
  return allow.some((item) => {
    let [net, bits] = toRange(item);
    if (net.kind() === 'ipv6' && (net as ipaddr.IPv6).isIPv4MappedAddress()) {
      net = (net as ipaddr.IPv6).toIPv4Address();
      bits = Math.max(0, bits - 96);
    }
    return net.kind() === addr.kind() && addr.match([net, bits] as never);
  });
}
