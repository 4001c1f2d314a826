/**
 * The bench's data set, derived from numbers alone: the seed writes it with set-based SQL,
 * and the request lists are computed from the same functions, so that a kept database can be
 * reused (`--reuse`) without the bench storing anything else.
 */
import { createHash } from 'node:crypto';
import { computeHmac } from '../src/domain/hmac.js';
import type { SubscriberStatus } from '../src/domain/types.js';

export const STATUSES: readonly SubscriberStatus[] = ['active', 'warning', 'lockout'];
export const TIERS = ['starter', 'growth', 'scale'] as const;
/** Slugs are `bench-t0001`...; four digits, so at most 9,999 tenants. */
export const MAX_TENANTS = 9_999;

export interface Sizes {
  tenants: number;
  /** Known subscribers per tenant; the store holds tenants * perTenant of them. */
  perTenant: number;
}

export interface BenchTenant {
  num: number;
  slug: string;
  publishableKey: string;
  hmacSecret: string;
  tier: (typeof TIERS)[number];
  cardUpdateUrl: string;
}

function digest(label: string): Buffer {
  return createHash('sha256').update(label, 'utf8').digest();
}

export function slugOf(num: number): string {
  return `bench-t${String(num).padStart(4, '0')}`;
}

/** The SQL that gives the same slug as `slugOf` for an integer expression. */
export const SQL_SLUG = (expr: string): string => `'bench-t' || lpad((${expr})::text, 4, '0')`;
export const SQL_TIER = (expr: string): string => `(ARRAY['starter','growth','scale'])[1 + (${expr}) % 3]`;
export const SQL_STATUS = (expr: string): string => `(ARRAY['active','warning','lockout'])[1 + (${expr}) % 3]`;
export const SQL_CARD_URL = (slugExpr: string): string => `'https://billing.example.com/' || ${slugExpr} || '/card'`;

/** Deterministic, so that a kept bench database can be reused; never use these outside the bench. */
export function benchTenant(num: number): BenchTenant {
  const slug = slugOf(num);
  return {
    num,
    slug,
    publishableKey: `pk_${digest(`dunwall-bench/pk/${num}`).toString('hex').slice(0, 40)}`,
    hmacSecret: digest(`dunwall-bench/hmac/${num}`).toString('base64url'),
    tier: TIERS[num % 3] ?? 'starter',
    cardUpdateUrl: `https://billing.example.com/${slug}/card`,
  };
}

export function customerId(tenantNum: number, n: number): string {
  return `cus_b${tenantNum}_${n}`;
}

/** The status the seed gives subscriber n of any tenant. */
export function seededStatus(n: number): SubscriberStatus {
  return STATUSES[n % 3] ?? 'active';
}

/** Global index g in [0, tenants * perTenant) -> (tenant, n): consecutive indexes go to different tenants. */
export function subscriberAt(sizes: Sizes, g: number): { tenant: number; n: number } {
  return { tenant: (g % sizes.tenants) + 1, n: Math.floor(g / sizes.tenants) + 1 };
}

/** mulberry32: a small seeded PRNG, so that every run asks the same questions. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random permutation of 0..n-1. */
export function permutation(n: number, random: () => number): Uint32Array {
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i += 1) out[i] = i;
  for (let i = n - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    const tmp = out[i] ?? 0;
    out[i] = out[j] ?? 0;
    out[j] = tmp;
  }
  return out;
}

export interface BenchRequest {
  path: string;
  authorization: string;
  /** The exact body the lookup must answer. */
  expected: string;
  tenant: number;
  customerId: string;
}

export type Entitlements = Record<string, Record<string, boolean>>;

/** The lookup's 200 body (docs/api.md, the lookup), keys in the contract's order. */
export function expectedBody(tenant: BenchTenant, status: SubscriberStatus | null, tiers: Entitlements): string {
  if (status === null) return '{"status":"active"}';
  return JSON.stringify({
    status,
    card_update_url: status === 'warning' ? tenant.cardUpdateUrl : null,
    entitlements: tiers[tenant.tier] ?? {},
  });
}

export class RequestFactory {
  private readonly tenants = new Map<number, BenchTenant>();

  constructor(
    readonly sizes: Sizes,
    private readonly tiers: Entitlements,
  ) {}

  tenant(num: number): BenchTenant {
    let t = this.tenants.get(num);
    if (!t) {
      t = benchTenant(num);
      this.tenants.set(num, t);
    }
    return t;
  }

  /** A lookup with the right key and hmac; `known` false: a customer id the seed never wrote. */
  request(tenantNum: number, n: number, known = n <= this.sizes.perTenant): BenchRequest {
    const tenant = this.tenant(tenantNum);
    const id = customerId(tenantNum, n);
    return {
      path: `/api/subscriber-status/${tenant.slug}?processor_customer_id=${id}&hmac=${computeHmac(tenant.hmacSecret, id)}`,
      authorization: `Bearer ${tenant.publishableKey}`,
      expected: expectedBody(tenant, known ? seededStatus(n) : null, this.tiers),
      tenant: tenantNum,
      customerId: id,
    };
  }

  get total(): number {
    return this.sizes.tenants * this.sizes.perTenant;
  }

  /** `count` distinct known subscribers, spread over the tenants, in a random order. */
  hot(count: number, seed = 1): BenchRequest[] {
    const random = prng(seed);
    const n = Math.min(count, this.total);
    const picked = permutation(this.total, random).subarray(0, n);
    return Array.from(picked, (g) => {
      const at = subscriberAt(this.sizes, g);
      return this.request(at.tenant, at.n);
    });
  }

  /** `count` distinct customer ids that no tenant holds, spread over the tenants. */
  unknown(count: number, seed = 2): BenchRequest[] {
    const random = prng(seed);
    const out: BenchRequest[] = [];
    for (let j = 0; j < count; j += 1) {
      const tenant = (j % this.sizes.tenants) + 1;
      out.push(this.request(tenant, this.sizes.perTenant + 1 + Math.floor(j / this.sizes.tenants), false));
    }
    for (let i = out.length - 1; i > 0; i -= 1) {
      const k = Math.floor(random() * (i + 1));
      [out[i], out[k]] = [out[k] as BenchRequest, out[i] as BenchRequest];
    }
    return out;
  }

  /**
   * `length` requests drawn from a Zipf distribution (exponent `s`) over every known
   * subscriber: rank k has weight 1/k^s, and ranks map to subscribers through a random
   * permutation, so that popularity has nothing to do with tenant order.
   */
  zipf(length: number, s = 1.0, seed = 3): { requests: BenchRequest[]; distinct: number } {
    const random = prng(seed);
    const n = this.total;
    const cdf = new Float64Array(n);
    let sum = 0;
    for (let k = 0; k < n; k += 1) {
      sum += 1 / Math.pow(k + 1, s);
      cdf[k] = sum;
    }
    const byRank = permutation(n, random);
    const seen = new Set<number>();
    const requests: BenchRequest[] = [];
    for (let i = 0; i < length; i += 1) {
      const u = random() * sum;
      let lo = 0;
      let hi = n - 1;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((cdf[mid] ?? 0) < u) lo = mid + 1;
        else hi = mid;
      }
      const g = byRank[lo] ?? 0;
      seen.add(g);
      const at = subscriberAt(this.sizes, g);
      requests.push(this.request(at.tenant, at.n));
    }
    return { requests, distinct: seen.size };
  }
}
