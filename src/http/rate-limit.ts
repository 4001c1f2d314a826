import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Lru } from './lru.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { problemAnswer, sendProblem } from './problems.js';

/** Every limit counts requests in fixed windows of one minute, from a key's first request. */
export const RATE_LIMIT_WINDOW_MS = 60_000;
const RATE_LIMIT_WINDOW_S = RATE_LIMIT_WINDOW_MS / 1000;
/**
 * Keys (addresses, tenants) counted at once in memory, per policy; past it, one not counted
 * since the eviction hand last passed is forgotten (a busy one too, once this many others
 * keep arriving: such a flood comes from more addresses than a per-address limit can hold).
 */
const MEMORY_WINDOWS_MAX = 100_000;
/** Keys in Redis start with this, so that other users of the server are not disturbed. */
export const DEFAULT_REDIS_PREFIX = 'dunwall:rl:';
/**
 * After Redis fails a count (down, or slower than its command timeout), requests go on
 * uncounted for this long before it is asked again: a slow Redis must not slow every lookup.
 */
export const REDIS_RETRY_INTERVAL_MS = 1_000;

/** Requests per minute; 0 turns that limit off. */
export interface RateLimits {
  /** Lookups (and their CORS preflights) from one client address. */
  lookupPerIp: number;
  /** Lookups of one tenant, all addresses together, unless the tenant has its own limit. */
  lookupPerTenant: number;
  /** 401 and 404 answers to one address (lookup and admin API); past it, that address gets 429 on both. */
  failuresPerIp: number;
  /** Admin API requests from one address. */
  adminPerIp: number;
  /**
   * Requests with one tenant secret key (tenant API, and lookups with the key), whatever
   * their address: a tenant's servers call from few addresses, so an address quota would
   * refuse them. Absent: the default.
   */
  perSecretKey?: number;
}

/** The default quota of one secret key, per minute: a busy backend asking for every request it serves. */
export const DEFAULT_PER_SECRET_KEY = 60_000;

export type Maybe<T> = T | Promise<T>;

export type PolicyName = 'ip' | 'admin' | 'failures' | 'tenant' | 'key';

/**
 * What one policy has counted for one key in the current window. In memory it is the
 * window itself, counted in place: a request allocates nothing to be counted.
 */
export interface Count {
  readonly name: PolicyName;
  /** The policy as the RateLimit-Policy field names it, quota and window included. */
  policy: string;
  quota: number;
  /** Requests counted in this window, this one included when it was counted. */
  current: number;
  /** When the window ends, on the limiter's clock. */
  endMs: number;
}

export interface RateLimitOptions {
  limits: RateLimits;
  /** Shares the counts across instances; null: each process counts on its own. */
  redis: Redis | null;
  trustedProxies: TrustedProxies | null;
  now: () => number;
  log: Pick<Logger, 'info' | 'warn'>;
  /** Prefix of the Redis keys; deployments sharing one server each need their own. */
  redisPrefix?: string;
}

/** Counts (or, with `increment` false, reads) `key` under a policy; null: not counted (Redis away). */
type Counter = (
  name: PolicyName,
  key: string | number,
  quota: number,
  policy: string,
  increment: boolean,
) => Maybe<Count | null>;

function policyText(name: string, quota: number): string {
  return `"${name}";q=${quota};w=${RATE_LIMIT_WINDOW_S}`;
}

export const remaining = (c: Count): number => (c.quota > c.current ? c.quota - c.current : 0);

/** Seconds until the window ends, at least 1 (RateLimit `t`, Retry-After). */
export function resetSeconds(c: Count, nowMs: number): number {
  const s = Math.ceil((c.endMs - nowMs) / 1000);
  return s > 1 ? s : 1;
}

/**
 * Counts in this process, synchronously: the lookup pays a map read and an addition, no
 * promise, no allocation once its key has a window. An expired window is reset in place.
 */
function memoryCounter(now: () => number): Counter {
  const windows = {
    ip: new Lru<string | number, Count>(MEMORY_WINDOWS_MAX),
    admin: new Lru<string | number, Count>(MEMORY_WINDOWS_MAX),
    failures: new Lru<string | number, Count>(MEMORY_WINDOWS_MAX),
    tenant: new Lru<string | number, Count>(MEMORY_WINDOWS_MAX),
    key: new Lru<string | number, Count>(MEMORY_WINDOWS_MAX),
  };
  return (name, key, quota, policy, increment) => {
    const nowMs = now();
    // Chosen by a branch, not `windows[name]`: a read by a varying key is a slow lookup in V8.
    const lru =
      name === 'ip'
        ? windows.ip
        : name === 'tenant'
          ? windows.tenant
          : name === 'failures'
            ? windows.failures
            : name === 'key'
              ? windows.key
              : windows.admin;
    let window = lru.get(key, nowMs);
    if (window === undefined) {
      if (!increment) return null;
      window = lru.peek(key)?.value;
      if (window === undefined) window = { name, policy, quota, current: 0, endMs: 0 };
      window.current = 0;
      window.endMs = nowMs + RATE_LIMIT_WINDOW_MS;
      lru.set(key, window, window.endMs);
    }
    window.quota = quota;
    window.policy = policy;
    if (increment) window.current += 1;
    return window;
  };
}

/** One atomic count: INCR (or GET), the window's expiry set by its first request, and what is left of it. */
const REDIS_COUNT_SCRIPT = `
local c
if ARGV[2] == '1' then
  c = redis.call('INCR', KEYS[1])
  if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
else
  c = tonumber(redis.call('GET', KEYS[1]) or '0')
end
local t = redis.call('PTTL', KEYS[1])
if t < 0 then
  if c > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
  t = tonumber(ARGV[1])
end
return {c, t}`;

interface CountingRedis extends Redis {
  dunwallRateCount(key: string, windowMs: number, increment: '0' | '1'): Promise<[number, number]>;
}

/**
 * Counts in Redis, shared by every instance: one script per count (EVALSHA). A failed count
 * lets the request through, and Redis is not asked again for REDIS_RETRY_INTERVAL_MS.
 */
function redisCounter(redis: Redis, prefix: string, now: () => number, log: RateLimitOptions['log']): Counter {
  if (typeof (redis as unknown as Partial<CountingRedis>).dunwallRateCount !== 'function')
    redis.defineCommand('dunwallRateCount', { numberOfKeys: 1, lua: REDIS_COUNT_SCRIPT });
  const counting = redis as CountingRedis;
  let down = false;
  let retryAtMs = 0;
  return async (name, key, quota, policy, increment) => {
    if (down && now() < retryAtMs) return null;
    try {
      const [current, ttlMs] = await counting.dunwallRateCount(
        `${prefix}${name}:${key}`,
        RATE_LIMIT_WINDOW_MS,
        increment ? '1' : '0',
      );
      if (down) log.info('rate limit store available again');
      down = false;
      if (!increment && current === 0) return null;
      return { name, policy, quota, current, endMs: now() + ttlMs };
    } catch (err) {
      retryAtMs = now() + REDIS_RETRY_INTERVAL_MS;
      if (!down)
        log.warn(
          { err: { message: (err as Error).message } },
          'rate limit store unavailable: requests go uncounted until it is back',
        );
      down = true;
      return null;
    }
  };
}

/** The RateLimit fields of an answer (draft-ietf-httpapi-ratelimit-headers). */
export interface RateLimitFields {
  policy: string;
  /** `"name";r=R;t=T` */
  limit: string;
  /** Set on a refusal: Retry-After, in seconds. */
  retryAfterS: number | null;
}

/**
 * Where a request stands when it arrives: its address's own count (null: no such limit, or
 * not counted), and the address's failures (null: none in this window).
 */
export interface Arrival {
  own: Count | null;
  failures: Count | null;
  /** The count that refuses it, or null. */
  over: Count | null;
}

/**
 * Dunwall's rate limits, counted in Redis when given, in this process otherwise. A count
 * that fails lets the request through: a broken limiter must never block a user. The
 * answers carry every policy that applies, and the one closest to its quota (or the one
 * that refused).
 */
export class RateLimiter {
  private readonly count: Counter;
  private readonly limits: RateLimits;
  private readonly trusted: TrustedProxies | null;
  private readonly now: () => number;
  readonly policies: Readonly<Record<PolicyName, string>>;
  /** The last address and tenant policies joined, and their join. */
  private lastPair: [string, string, string] = ['', '', ''];

  constructor(opts: RateLimitOptions) {
    this.limits = opts.limits;
    this.trusted = opts.trustedProxies;
    this.now = opts.now;
    this.count = opts.redis
      ? redisCounter(opts.redis, opts.redisPrefix ?? DEFAULT_REDIS_PREFIX, opts.now, opts.log)
      : memoryCounter(opts.now);
    this.policies = {
      ip: policyText('ip', opts.limits.lookupPerIp),
      admin: policyText('admin', opts.limits.adminPerIp),
      failures: policyText('failures', opts.limits.failuresPerIp),
      tenant: policyText('tenant', opts.limits.lookupPerTenant),
      key: policyText('key', this.perKey()),
    };
  }

  private perKey(): number {
    return this.limits.perSecretKey ?? DEFAULT_PER_SECRET_KEY;
  }

  /** Counts a request made with a secret key against that key's quota (null: no limit, or not counted). */
  key(keyId: string): Maybe<Count | null> {
    const quota = this.perKey();
    if (quota <= 0) return null;
    const counted = this.count('key', keyId, quota, this.policies.key, true);
    return counted instanceof Promise ? counted.catch(() => null) : counted;
  }

  /** The address a request is counted under: the peer, or the client its trusted proxies name. */
  addressOf(req: IncomingMessage): string {
    return clientAddress(req, this.trusted);
  }

  /** The policy text of a tenant's own quota (null: the service's default). */
  tenantPolicy(quota: number | null): string {
    return quota === null || quota === this.limits.lookupPerTenant ? this.policies.tenant : policyText('tenant', quota);
  }

  /**
   * A request arrives from `address`: counts it against the address's own quota (`ip` for
   * lookups, `admin` for the admin API, none for webhooks) and reads its failures. Past
   * the failure quota an address is refused until the window ends, whatever it sends,
   * unless `failures` is false (a request that proved it holds a secret).
   */
  arrive(address: string, own: 'ip' | 'admin' | null, failures = true): Maybe<Arrival> {
    const quota = own === 'ip' ? this.limits.lookupPerIp : own === 'admin' ? this.limits.adminPerIp : 0;
    const mine =
      own !== null && quota > 0
        ? this.count(own, address, quota, own === 'ip' ? this.policies.ip : this.policies.admin, true)
        : null;
    const failed =
      failures && this.limits.failuresPerIp > 0
        ? this.count('failures', address, this.limits.failuresPerIp, this.policies.failures, false)
        : null;
    if (mine instanceof Promise || failed instanceof Promise) {
      return Promise.all([mine, failed]).then(
        ([m, f]) => arrival(m, f),
        () => arrival(null, null),
      );
    }
    return arrival(mine, failed);
  }

  /** The failures counted under `key` in this window (null: none), without counting. */
  failuresOf(key: string): Maybe<Count | null> {
    if (this.limits.failuresPerIp <= 0) return null;
    const read = this.count('failures', key, this.limits.failuresPerIp, this.policies.failures, false);
    return read instanceof Promise ? read.catch(() => null) : read;
  }

  /**
   * Counts a failed request under `key`: its address, or a narrower key of it (one tenant's
   * webhook from that address). Non-null: that was one failure past the quota, and the
   * answer must be a 429 refused by this count (so that a burst sent at once is held too).
   */
  fail(key: string): Maybe<Count | null> {
    if (this.limits.failuresPerIp <= 0) return null;
    const counted = this.count('failures', key, this.limits.failuresPerIp, this.policies.failures, true);
    if (counted instanceof Promise) return counted.then(overQuota, () => null);
    return overQuota(counted);
  }

  /**
   * Counts an answered lookup against its tenant's quota (`quota` null: the default).
   * Returns the count (null: no limit, or not counted); past its quota the answer is a 429.
   */
  tenant(tenantId: number, quota: number | null): Maybe<Count | null> {
    const q = quota ?? this.limits.lookupPerTenant;
    if (q <= 0) return null;
    const counted = this.count('tenant', tenantId, q, this.tenantPolicy(quota), true);
    return counted instanceof Promise ? counted.catch(() => null) : counted;
  }

  /**
   * The RateLimit fields for the counts that apply, in this order: the address's own, its
   * failures (once it has failed at all), the tenant's. `over`: the count that refused the
   * request, named with r=0 and a Retry-After.
   */
  fields(own: Count | null, failures: Count | null, tenant: Count | null, over: Count | null): RateLimitFields | null {
    const f = failures !== null && failures.current > 0 ? failures : null;
    let tightest: Count | null = over;
    if (tightest === null) {
      if (own !== null) tightest = own;
      if (f !== null && (tightest === null || remaining(f) < remaining(tightest))) tightest = f;
      if (tenant !== null && (tightest === null || remaining(tenant) < remaining(tightest))) tightest = tenant;
    }
    if (tightest === null) return null;
    let policy: string;
    const extra = over !== null && over !== own && over !== f && over !== tenant ? over : null;
    if (own !== null && f === null && tenant !== null && extra === null) {
      // The usual answer's pair, joined once per pair of policies rather than per request.
      if (own.policy !== this.lastPair[0] || tenant.policy !== this.lastPair[1])
        this.lastPair = [own.policy, tenant.policy, `${own.policy}, ${tenant.policy}`];
      policy = this.lastPair[2];
    } else {
      policy = own === null ? '' : own.policy;
      if (f !== null) policy = policy === '' ? f.policy : `${policy}, ${f.policy}`;
      if (tenant !== null) policy = policy === '' ? tenant.policy : `${policy}, ${tenant.policy}`;
      if (extra !== null) policy = policy === '' ? extra.policy : `${policy}, ${extra.policy}`;
    }
    const resetS = resetSeconds(tightest, this.now());
    return {
      policy,
      limit: `"${tightest.name}";r=${tightest === over ? 0 : remaining(tightest)};t=${resetS}`,
      retryAfterS: over === null ? null : resetS,
    };
  }
}

function arrival(own: Count | null, failures: Count | null): Arrival {
  const over =
    own !== null && own.current > own.quota ? own : failures !== null && remaining(failures) === 0 ? failures : null;
  return { own, failures, over };
}

function overQuota(c: Count | null): Count | null {
  return c !== null && c.current > c.quota ? c : null;
}

/** Where a request routed by Fastify stands with the limits, once its guard has run. */
const arrivals = new WeakMap<FastifyRequest, { address: string; arrival: Arrival }>();

/** Sets the RateLimit fields (and a refusal's Retry-After) on a Fastify reply. */
export function setRateLimitFields(reply: FastifyReply, fields: RateLimitFields | null): void {
  if (fields === null) return;
  reply.header('ratelimit-policy', fields.policy).header('ratelimit', fields.limit);
  if (fields.retryAfterS !== null) reply.header('retry-after', String(fields.retryAfterS));
}

/**
 * An onRequest hook: counts the request against its address (`own`: the quota it counts
 * in; null: none, only the failures are read) and refuses it with a 429 past a quota.
 * `narrower`: a second failure count to read (e.g. the address's failures for one
 * tenant's webhook), refused alike. `authenticated`: true for a request that proved it
 * holds a secret, checked before the failures are (and in constant time): the failures are
 * then not held against it.
 */
export function guardAddress(
  limiter: RateLimiter,
  own: 'ip' | 'admin' | null,
  narrower?: ((req: FastifyRequest, address: string) => string | null) | null,
  authenticated?: (req: FastifyRequest) => boolean,
) {
  return (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void => {
    const address = limiter.addressOf(req.raw);
    // A request that carries a valid secret (the admin token; a tenant's secret key) is
    // not a guess: the failures of its address (a developer's own typos, a shared NAT's)
    // do not refuse it. Its own quota still counts; a wrong secret still fails, and counts.
    const proven = authenticated?.(req) === true;
    const narrowKey = proven ? null : (narrower?.(req, address) ?? null);
    const decide = (arrival: Arrival, narrow: Count | null): void => {
      arrivals.set(req, { address, arrival });
      const over = arrival.over ?? (narrow !== null && remaining(narrow) === 0 ? narrow : null);
      setRateLimitFields(reply, limiter.fields(arrival.own, arrival.failures, null, over));
      if (over === null) return done();
      // A lookup's refusal is read cross-origin by the snippet, which fails open on it.
      if (own === 'ip') reply.header('access-control-allow-origin', '*').header('cache-control', 'no-store');
      sendProblem(reply, 'rate_limited');
    };
    const arrival = limiter.arrive(address, own, !proven);
    const narrow = narrowKey === null ? null : limiter.failuresOf(narrowKey);
    if (arrival instanceof Promise || narrow instanceof Promise) {
      Promise.all([arrival, narrow]).then(
        ([a, n]) => decide(a, n),
        () => done(),
      );
    } else {
      decide(arrival, narrow);
    }
  };
}

/**
 * Counts a request with a valid secret key against the key's quota and sets the RateLimit
 * fields; past the quota, answers 429 and returns true.
 */
export async function guardKey(limiter: RateLimiter, keyId: string, reply: FastifyReply): Promise<boolean> {
  const count = await limiter.key(keyId);
  if (count === null) return false;
  const over = count.current > count.quota ? count : null;
  setRateLimitFields(reply, limiter.fields(count, null, null, over));
  if (over === null) return false;
  sendProblem(reply, 'rate_limited');
  return true;
}

/**
 * An onSend hook: an answer whose status is in `statuses` counts as a failure (under the
 * key `keyOf` names, the address by default); the one past the quota is a 429 instead.
 */
export function countFailures(
  limiter: RateLimiter,
  statuses: readonly number[],
  keyOf?: (req: FastifyRequest, reply: FastifyReply, address: string) => string,
) {
  return async (req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    if (!statuses.includes(reply.statusCode)) return payload;
    const seen = arrivals.get(req);
    const address = seen?.address ?? limiter.addressOf(req.raw);
    const over = await limiter.fail(keyOf ? keyOf(req, reply, address) : address);
    if (over === null) return payload;
    // The answer on its way is swapped for the refusal, headers and all.
    reply.removeHeader('www-authenticate');
    setRateLimitFields(reply, limiter.fields(seen?.arrival.own ?? null, seen?.arrival.failures ?? null, null, over));
    const answer = problemAnswer('rate_limited');
    reply.code(answer.status);
    for (let i = 0; i < answer.headers.length; i += 2) reply.header(answer.headers[i] as string, answer.headers[i + 1]);
    return answer.body;
  };
}
