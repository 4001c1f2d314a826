import { BlockList, isIP } from 'node:net';

/** Names TRUST_PROXY accepts for whole ranges, so that an operator need not spell them out. */
const NAMED_RANGES: Record<string, readonly string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * The header the proxies write. Only one is read: a proxy appends to its own header and
 * passes the other through as the client sent it, so reading both would let a client
 * name itself.
 */
export const FORWARDING_HEADERS = ['x-forwarded-for', 'forwarded'] as const;
export type ForwardingHeader = (typeof FORWARDING_HEADERS)[number];

/** Which peers may speak for the client, and through which header. */
export interface TrustedProxies {
  header: ForwardingHeader;
  /** True when `address` (a socket peer, or a hop named in the header) is a trusted proxy. */
  trusts(address: string): boolean;
}

function stripMapped(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * Parses TRUST_PROXY: a comma-separated list of addresses, CIDR ranges and the names
 * `loopback` and `private`. Returns the problem with the value as a string, never throws.
 */
export function parseTrustedProxies(
  value: string,
  header: ForwardingHeader = 'x-forwarded-for',
): TrustedProxies | string {
  const list = new BlockList();
  const add = (entry: string): string | null => {
    const [address = '', bits, extra] = entry.split('/');
    const family = isIP(address);
    if (family === 0 || extra !== undefined)
      return `TRUST_PROXY: ${JSON.stringify(entry)} is not an address or CIDR range`;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) {
      list.addAddress(address, type);
      return null;
    }
    const prefix = Number(bits);
    if (!/^\d{1,3}$/.test(bits) || prefix > (family === 4 ? 32 : 128))
      return `TRUST_PROXY: ${JSON.stringify(entry)} has an invalid prefix length`;
    list.addSubnet(address, prefix, type);
    return null;
  };
  const entries = value
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  if (entries.length === 0) return 'TRUST_PROXY: names no address';
  for (const entry of entries) {
    for (const range of NAMED_RANGES[entry] ?? [entry]) {
      const problem = add(range);
      if (problem) return problem;
    }
  }
  return {
    header,
    trusts(address) {
      const plain = stripMapped(address);
      const family = isIP(plain);
      return family !== 0 && list.check(plain, family === 4 ? 'ipv4' : 'ipv6');
    },
  };
}

/**
 * A hop without its port: `203.0.113.5:51234` and `[2001:db8::1]:443` (some proxies add
 * the client's port) are the addresses `203.0.113.5` and `2001:db8::1`; a port must not
 * make a fresh client of every connection.
 */
function withoutPort(hop: string): string {
  const node = hop.trim().replace(/^"|"$/g, '');
  if (node.startsWith('[')) {
    const end = node.indexOf(']');
    return node.slice(1, end < 0 ? undefined : end);
  }
  return /^[\d.]+:\d+$/.test(node) ? node.slice(0, node.indexOf(':')) : node;
}

/** `for=` values of an RFC 7239 `Forwarded` header, nearest hop last, without quotes or ports. */
function forwardedFor(header: string): string[] {
  const hops: string[] = [];
  for (const element of header.split(',')) {
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=');
      if (eq >= 0 && pair.slice(0, eq).trim().toLowerCase() === 'for') hops.push(withoutPort(pair.slice(eq + 1)));
    }
  }
  return hops;
}

interface AddressedRequest {
  headers: Record<string, string | string[] | undefined>;
  socket: { remoteAddress?: string | undefined };
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(',') : value;
}

/**
 * IPv6 clients are counted per /64: one host usually holds the whole prefix. `address` is
 * a valid IPv6 address; the answer is its first four groups, e.g. `2001:db8:0:1::/64`.
 */
function ipv6Prefix64(address: string): string {
  const plain = address.split('%')[0] ?? '';
  const groupsOf = (part: string): string[] =>
    // A dotted IPv4 tail stands for the last two groups (it is never among the first four).
    part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const gap = plain.indexOf('::');
  const head = groupsOf(gap < 0 ? plain : plain.slice(0, gap));
  const tail = gap < 0 ? [] : groupsOf(plain.slice(gap + 2));
  const groups = [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/**
 * The address a request is counted under. Without trusted proxies it is the socket's peer,
 * whatever the headers claim (anyone can send them). Behind trusted proxies it walks the
 * proxies' header from the nearest hop and stops at the first address that is not a
 * trusted proxy: everything to its left was written by the client and proves nothing.
 */
export function clientAddress(req: AddressedRequest, trusted: TrustedProxies | null): string {
  if (trusted === null) return peerAddress(req.socket);
  let address = stripMapped(req.socket.remoteAddress ?? '');
  if (trusted !== null && trusted.trusts(address)) {
    const value = headerValue(req.headers[trusted.header]);
    const chain =
      value === undefined
        ? []
        : trusted.header === 'forwarded'
          ? forwardedFor(value)
          : value.split(',').map(withoutPort);
    for (let i = chain.length - 1; i >= 0; i -= 1) {
      address = stripMapped(chain[i] ?? '');
      if (!trusted.trusts(address)) break;
    }
  }
  return counted(address);
}

/** An address as it is counted: IPv4 as is, IPv6 by its /64, anything else bounded. */
function counted(address: string): string {
  const family = isIP(address);
  if (family === 6) return ipv6Prefix64(address);
  return family === 4 ? address : address.slice(0, 64) || 'unknown';
}

const PEER = Symbol('dunwall.peer');

/**
 * The socket's peer as it is counted (worked out once per connection): what the rate
 * limits count without trusted proxies, and what the per-address connection cap counts.
 */
export function peerAddress(socket: { remoteAddress?: string | undefined }): string {
  const holder = socket as { [PEER]?: string; remoteAddress?: string | undefined };
  let peer = holder[PEER];
  if (peer === undefined) {
    peer = counted(stripMapped(socket.remoteAddress ?? ''));
    // A socket that has closed has no address any more: only a real one is kept.
    if (socket.remoteAddress !== undefined) holder[PEER] = peer;
  }
  return peer;
}
