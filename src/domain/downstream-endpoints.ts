import { BlockList, isIP } from 'node:net';
import { randomBytes } from 'node:crypto';
import { absoluteUrl } from './validation.js';
import type { AdminAction } from './history.js';
import type { PolicyRule } from './policy.js';
import type { SubscriberStatus } from './types.js';

/**
 * Downstream webhooks (docs/webhooks.md): what a tenant's backend hears of its subscribers,
 * how often it is retried, and which addresses it may be sent to. Pure rules; the store
 * writes the events and the deliverer sends them.
 */

export const DOWNSTREAM_EVENT_TYPES = ['subscriber.status_changed', 'subscriber.deleted'] as const;
export type DownstreamEventType = (typeof DOWNSTREAM_EVENT_TYPES)[number];

/** Where a message stands for one endpoint: waiting for an attempt, delivered, or failed for good. */
export const DELIVERY_STATES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

/**
 * What one attempt came to: delivered (2xx), failed (retried), gone (410: the endpoint is
 * disabled), refused (the address is not allowed), gave_up (the last failure of its window).
 */
export const DELIVERY_OUTCOMES = ['delivered', 'failed', 'gone', 'refused', 'gave_up'] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** One count per attempt outcome, all zero. */
export function zeroDeliveryOutcomeCounts(): Record<DeliveryOutcome, number> {
  return Object.fromEntries(DELIVERY_OUTCOMES.map((o) => [o, 0])) as Record<DeliveryOutcome, number>;
}

/** Why an endpoint is disabled: through the admin API, a 410 Gone, or days of failures. */
export const ENDPOINT_DISABLED_REASONS = ['admin', 'gone', 'failing'] as const;
export type EndpointDisabledReason = (typeof ENDPOINT_DISABLED_REASONS)[number];

/** Retries stop this long after a message was queued for an endpoint: about three days. */
export const RETRY_WINDOW_MS = 72 * 3_600_000;
/** An endpoint whose every attempt failed for this long is disabled. */
export const DISABLE_FAILING_AFTER_MS = 5 * 86_400_000;
/** The first retry comes about this long after the first failure; each next one waits twice as long... */
const FIRST_RETRY_MS = 30_000;
/** ...up to this. */
const MAX_RETRY_MS = 8 * 3_600_000;
/** Each wait is spread by up to this fraction either way, so that retries of a burst do not arrive together. */
const JITTER = 0.25;

/**
 * The wait before the next attempt after `failures` failed ones (1 after the first), with
 * jitter; `random` returns a number in [0, 1).
 */
export function retryDelayMs(failures: number, random: () => number = Math.random): number {
  const base = Math.min(FIRST_RETRY_MS * 2 ** Math.min(Math.max(failures - 1, 0), 30), MAX_RETRY_MS);
  return Math.round(base * (1 - JITTER + 2 * JITTER * random()));
}

export const MAX_DESCRIPTION_LENGTH = 500;
const SIGNING_SECRET_BYTES = 32;

/** A Standard Webhooks signing secret: `whsec_` and 32 random bytes in base64. */
export function generateSigningSecret(): string {
  return `whsec_${randomBytes(SIGNING_SECRET_BYTES).toString('base64')}`;
}

/** A public id: a prefix and 24 random base32 characters (120 bits). */
export function publicId(prefix: 'ep' | 'msg'): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let out = `${prefix}_`;
  for (const byte of randomBytes(24)) out += alphabet[byte & 31];
  return out;
}

export const ENDPOINT_ID_RE = /^ep_[a-z2-7]{24}$/;
export const MESSAGE_ID_RE = /^msg_[a-z2-7]{24}$/;

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  return isIP(host) !== 0 && LOOPBACK.check(host, isIP(host) === 6 ? 'ipv6' : 'ipv4');
}

/**
 * Null when `value` can be an endpoint's URL; else why not. https only; http only for a
 * loopback host, and only when `allowHttpLoopback` (local development).
 */
export function endpointUrlProblem(value: string, allowHttpLoopback: boolean): string | null {
  const url = absoluteUrl(value);
  if (typeof url === 'string') return url;
  if (url.username || url.password) return 'must not carry credentials';
  if (url.hash) return 'must not have a fragment';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:') {
    if (!isLoopbackHost(url.hostname)) return 'must be an https URL (http is allowed for loopback addresses only)';
    if (!allowHttpLoopback)
      return 'must be an https URL (http to a loopback address needs DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK=true)';
    return null;
  }
  return 'must be an https URL';
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * Addresses a webhook is never sent to unless the operator allows them: loopback, private,
 * link-local (cloud metadata), shared, unspecified, multicast and reserved ranges, in IPv4
 * and IPv6, IPv4 mapped into IPv6, and the IPv6 ranges that embed an IPv4 address.
 */
const INTERNAL: readonly [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  // IPv4-compatible (deprecated), and every address that embeds an IPv4 one a gateway may
  // reach: SIIT, NAT64 (global and local use), 6to4, Teredo. Allow the network to send there.
  ['::', 96, 'ipv6'],
  ['::ffff:0:0:0', 96, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
  ['64:ff9b:1::', 48, 'ipv6'],
  ['2001::', 32, 'ipv6'],
  ['2002::', 16, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['2001:db8::', 32, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['fec0::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
];

const INTERNAL_LIST = new BlockList();
for (const [net, prefix, family] of INTERNAL) INTERNAL_LIST.addSubnet(net, prefix, family);

/** Networks the operator allows despite the rule above (e.g. `10.1.0.0/16` for a receiver inside its VPC). */
export class AllowedNetworks {
  private readonly list = new BlockList();
  readonly empty: boolean;

  constructor(readonly cidrs: readonly string[]) {
    for (const cidr of cidrs) {
      const parsed = parseCidr(cidr);
      if (parsed === null) throw new Error(`not a network in CIDR notation: ${cidr}`);
      this.list.addSubnet(parsed.address, parsed.prefix, parsed.family);
    }
    this.empty = cidrs.length === 0;
  }

  has(address: string, family: 'ipv4' | 'ipv6'): boolean {
    return !this.empty && this.list.check(address, family);
  }
}

/** `10.0.0.0/8` or `fd00::/8`; null when it is not one. A bare address is a /32 or /128. */
export function parseCidr(value: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [address = '', prefixText, extra] = value.trim().split('/');
  if (extra !== undefined) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1;
  if (prefix < 0 || prefix > max) return null;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** The IPv4 address inside an IPv4-mapped IPv6 one (`::ffff:10.0.0.1`), else null. */
function mappedIpv4(address: string): string | null {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m?.[1] ?? null;
}

/** Null when a webhook may be sent to `address`; else why not. */
export function addressProblem(address: string, allowed: AllowedNetworks): string | null {
  const mapped = mappedIpv4(address);
  const ip = mapped ?? address;
  const version = isIP(ip);
  if (version === 0) return `not an IP address: ${address}`;
  const family = version === 4 ? 'ipv4' : 'ipv6';
  if (allowed.has(ip, family)) return null;
  if (INTERNAL_LIST.check(ip, family)) {
    return `${address} is a loopback, private, link-local or reserved address; allow its network with DUNWALL_WEBHOOK_ALLOWED_NETWORKS to send there`;
  }
  return null;
}

/** What caused a change: a Stripe event, or an action of the admin API. */
export type DownstreamCause =
  | { source: 'stripe'; stripe_event_id: string | null; stripe_event_type: string | null }
  | { source: 'admin'; action: AdminAction; secret_key_id?: string }
  | { source: 'policy'; rule: PolicyRule };

export interface StatusChangedData {
  processor_customer_id: string;
  sequence: number;
  from: SubscriberStatus | null;
  to: SubscriberStatus;
  reason: string;
  previous_reason: string | null;
  cause: DownstreamCause;
  occurred_at: string;
  /** While `warning` and a lockout is scheduled under the tenant's policy: when (RFC 3339). */
  lockout_at?: string;
}

export interface DeletedData {
  processor_customer_id: string;
  sequence: number;
  from: SubscriberStatus;
  previous_reason: string;
  cause: DownstreamCause;
  occurred_at: string;
}

/** The body of every delivery, in the shape Standard Webhooks recommends: type, timestamp, data. */
export type DownstreamPayload =
  | {
      id: string;
      type: 'subscriber.status_changed';
      tenant: string;
      livemode: boolean;
      timestamp: string;
      data: StatusChangedData;
    }
  | { id: string; type: 'subscriber.deleted'; tenant: string; livemode: boolean; timestamp: string; data: DeletedData };

/** Null when the endpoint's event types are valid (distinct known types, at least one); else why not. */
export function eventTypesProblem(types: readonly string[]): string | null {
  if (types.length === 0) return 'must name at least one event type (leave it out for all)';
  for (const t of types) {
    if (!(DOWNSTREAM_EVENT_TYPES as readonly string[]).includes(t))
      return `unknown event type '${t}' (known: ${DOWNSTREAM_EVENT_TYPES.join(', ')})`;
  }
  if (new Set(types).size !== types.length) return 'must not repeat an event type';
  return null;
}
