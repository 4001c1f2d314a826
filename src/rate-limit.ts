import rateLimitPlugin from '@fastify/rate-limit';
import type { FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { App } from './app.js';
import { Lru } from './cache/lru.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import type { RateLimits } from './config.js';
import { PROBLEM_CONTENT_TYPE, problem } from './errors.js';
import { sendProblem } from './http.js';

/** Every limit counts requests in fixed windows of one minute. */
export const RATE_LIMIT_WINDOW_MS = 60_000;
const RATE_LIMIT_WINDOW_S = RATE_LIMIT_WINDOW_MS / 1000;
/** Client addresses and tenants counted at once in memory; past it the oldest window is forgotten. */
const MEMORY_WINDOWS_MAX = 100_000;
/** Keys in Redis start with this, so that other users of the server are not disturbed. */
export const DEFAULT_REDIS_PREFIX = 'dunwall:rl:';
/**
 * After Redis fails a count (down, or slower than its command timeout), requests go on
 * uncounted for this long before it is asked again: a slow Redis must not slow every lookup.
 */
export const REDIS_RETRY_INTERVAL_MS = 1_000;

export interface RateLimitOptions {
  limits: RateLimits;
  /** Shares the counts across instances; null: each process counts on its own. */
  redis: Redis | null;
  trustedProxies: TrustedProxies | null;
  now: () => number;
  log: FastifyBaseLogger;
  /** Prefix of the Redis keys; deployments sharing one server each need their own. */
  redisPrefix?: string;
}

type Hook = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
type SendHook = (req: FastifyRequest, reply: FastifyReply, payload: unknown) => Promise<unknown>;

export interface RateLimitGuards {
  /** onRequest of the lookup and its preflight: the address's quota, and its failures. */
  lookup: Hook;
  /**
   * The tenant's quota, counted once the key has proved the request is the tenant's own
   * (so that nobody without it can use the quota up). True: refused, the 429 is sent.
   */
  tenant(req: FastifyRequest, reply: FastifyReply, tenantKey: string, quota: number | null): Promise<boolean>;
  /** onRequest of the admin API: the address's quota, and its failures. */
  admin: Hook;
  /** onSend of the lookup: a 401 or 404 counts as a failure; past the quota it becomes a 429. */
  lookupFailure: SendHook;
  /** onSend of the admin API: a 401 counts as a failure (a 404 after a valid token is no guess). */
  adminFailure: SendHook;
}

/** A fixed-window counter on the injected clock (the plugin's own reads the wall clock). */
function memoryWindows(now: () => number): FastifyRateLimitStoreCtor {
  type Result = { current: number; ttl: number };
  return class MemoryWindows {
    private readonly windows = new Lru<string, { count: number; endMs: number }>(MEMORY_WINDOWS_MAX);
    incr(key: string, done: (err: Error | null, result?: Result) => void, timeWindow: number): void {
      const nowMs = now();
      const window = this.windows.get(key, nowMs) ?? { count: 0, endMs: nowMs + timeWindow };
      window.count += 1;
      this.windows.set(key, window, window.endMs);
      done(null, { current: window.count, ttl: window.endMs - nowMs });
    }
    read(key: string, done: (err: Error | null, result?: Result) => void): void {
      const nowMs = now();
      const window = this.windows.get(key, nowMs);
      done(null, window ? { current: window.count, ttl: window.endMs - nowMs } : { current: 0, ttl: 0 });
    }
    child(): MemoryWindows {
      return new MemoryWindows();
    }
  };
}

interface Count {
  policy: string;
  quota: number;
  /** Requests counted in this window, this one included when it was counted. */
  current: number;
  resetS: number;
}

const remaining = (c: Count): number => Math.max(0, c.quota - c.current);

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers): every policy that
 * applies, and the one closest to its quota.
 */
function describe(reply: FastifyReply, counts: readonly Count[]): void {
  let tightest: Count | undefined;
  for (const c of counts) if (tightest === undefined || remaining(c) < remaining(tightest)) tightest = c;
  if (tightest === undefined) return;
  reply.header('ratelimit-policy', counts.map((c) => `"${c.policy}";q=${c.quota};w=${RATE_LIMIT_WINDOW_S}`).join(', '));
  reply.header('ratelimit', `"${tightest.policy}";r=${remaining(tightest)};t=${tightest.resetS}`);
}

function refusalHeaders(reply: FastifyReply, counts: readonly Count[], over: Count): void {
  describe(reply, counts.includes(over) ? counts : [...counts, over]);
  reply.header('retry-after', String(over.resetS));
}

type Limiter = ReturnType<App['createRateLimit']>;

/**
 * Registers @fastify/rate-limit (its Redis store when `redis` is given, counters in
 * memory otherwise) and returns the hooks that enforce Dunwall's limits. A count that
 * fails lets the request through: a broken limiter must never block a user.
 */
export async function registerRateLimits(app: App, opts: RateLimitOptions): Promise<RateLimitGuards> {
  const { limits, now, log } = opts;
  await app.register(rateLimitPlugin, {
    global: false,
    timeWindow: RATE_LIMIT_WINDOW_MS,
    ...(opts.redis ? { redis: opts.redis, nameSpace: opts.redisPrefix ?? DEFAULT_REDIS_PREFIX } : { store: memoryWindows(now) }),
  });

  // Each limiter asks for the address: it is worked out once per request.
  const addresses = new WeakMap<FastifyRequest, string>();
  const addressOf = (req: FastifyRequest): string => {
    let address = addresses.get(req);
    if (address === undefined) {
      address = clientAddress(req.raw, opts.trustedProxies);
      addresses.set(req, address);
    }
    return address;
  };
  const byAddress = (max: number, prefix: string): Limiter | null =>
    max > 0 ? app.createRateLimit({ max, keyGenerator: (req) => `${prefix}:${addressOf(req)}` }) : null;
  const perIp = byAddress(limits.lookupPerIp, 'ip');
  const admin = byAddress(limits.adminPerIp, 'admin');
  const failures = byAddress(limits.failuresPerIp, 'fail');
  // The quota differs by tenant: `tenant()` hands it over through `quotas`.
  const quotas = new WeakMap<FastifyRequest, { key: string; quota: number }>();
  const perTenant = app.createRateLimit({
    keyGenerator: (req) => `tenant:${quotas.get(req)?.key ?? ''}`,
    max: (req) => quotas.get(req)?.quota ?? limits.lookupPerTenant,
  });
  /** The address's counts, for the RateLimit fields of the answer. */
  const counted = new WeakMap<FastifyRequest, Count[]>();

  let storeDown = false;
  let retryAtMs = 0;
  async function count(limiter: Limiter | null, policy: string, req: FastifyRequest, increment = true): Promise<Count | null> {
    if (limiter === null || (storeDown && now() < retryAtMs)) return null;
    let result: Awaited<ReturnType<Limiter>>;
    try {
      result = await limiter(req, { increment });
    } catch (err) {
      retryAtMs = now() + REDIS_RETRY_INTERVAL_MS;
      if (!storeDown) log.warn({ err: { message: (err as Error).message } }, 'rate limit store unavailable: requests go uncounted until it is back');
      storeDown = true;
      return null;
    }
    if (storeDown) log.info('rate limit store available again');
    storeDown = false;
    if (result.isAllowed) return null;
    // `remaining` stops at 0: past the quota, all that is known is that it is past.
    const current = result.isExceeded ? result.max + 1 : result.max - result.remaining;
    return { policy, quota: result.max, current, resetS: Math.max(1, result.ttlInSeconds) };
  }

  /**
   * The address's own quota, and its failures: past the failure quota an address is
   * refused until the window ends, whatever it sends (read only here: failures are counted
   * as they are answered).
   */
  async function refusedByAddress(req: FastifyRequest, reply: FastifyReply, own: Limiter | null, policy: string): Promise<boolean> {
    const [mine, failed] = await Promise.all([count(own, policy, req), count(failures, 'failures', req, false)]);
    const counts = mine ? [mine] : [];
    const over = mine && mine.current > mine.quota ? mine : failed && remaining(failed) === 0 ? failed : null;
    if (over === null) {
      counted.set(req, counts);
      describe(reply, counts);
      return false;
    }
    refusalHeaders(reply, counts, over);
    return true;
  }

  /** Counts a failure as it is answered; past the quota the answer is a 429 instead, so that a burst sent at once is held too. */
  function failureHook(statuses: readonly number[]): SendHook {
    return async (req, reply, payload) => {
      if (failures === null || !statuses.includes(reply.statusCode)) return payload;
      const failed = await count(failures, 'failures', req);
      if (failed === null || failed.current <= failed.quota) return payload;
      reply.removeHeader('www-authenticate');
      refusalHeaders(reply, counted.get(req) ?? [], failed);
      reply.code(429).header('content-type', PROBLEM_CONTENT_TYPE);
      return JSON.stringify(problem('rate_limited'));
    };
  }

  return {
    lookup: async (req, reply) => {
      if (!(await refusedByAddress(req, reply, perIp, 'ip'))) return undefined;
      // The snippet reads the answer cross-origin; it fails open on a 429.
      reply.header('access-control-allow-origin', '*').header('cache-control', 'no-store');
      return sendProblem(reply, 'rate_limited');
    },
    async tenant(req, reply, tenantKey, own) {
      const quota = own ?? limits.lookupPerTenant;
      if (quota <= 0) return false;
      quotas.set(req, { key: tenantKey, quota });
      const mine = await count(perTenant, 'tenant', req);
      if (mine === null) return false;
      const counts = [...(counted.get(req) ?? []), mine];
      if (mine.current <= mine.quota) {
        describe(reply, counts);
        return false;
      }
      refusalHeaders(reply, counts, mine);
      sendProblem(reply, 'rate_limited');
      return true;
    },
    admin: async (req, reply) => ((await refusedByAddress(req, reply, admin, 'admin')) ? sendProblem(reply, 'rate_limited') : undefined),
    lookupFailure: failureHook([401, 404]),
    adminFailure: failureHook([401]),
  };
}
