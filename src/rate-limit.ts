import rateLimitPlugin from '@fastify/rate-limit';
import type { FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { App } from './app.js';
import { Lru } from './cache/lru.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import type { RateLimits } from './config.js';
import { sendProblem } from './http.js';

/** Every limit counts requests in fixed windows of one minute. */
export const RATE_LIMIT_WINDOW_MS = 60_000;
const RATE_LIMIT_WINDOW_S = RATE_LIMIT_WINDOW_MS / 1000;
/** Client addresses and tenants counted at once in memory; past it the oldest window is forgotten. */
const MEMORY_WINDOWS_MAX = 100_000;
/** Keys in Redis start with this, so that other users of the server are not disturbed. */
export const DEFAULT_REDIS_PREFIX = 'dunwall:rl:';

export interface RateLimitOptions {
  limits: RateLimits;
  /** Shares the counts across instances; null: each process counts on its own. */
  redis: Redis | null;
  trustedProxies: TrustedProxies | null;
  now: () => number;
  /** Prefix of the Redis keys; deployments sharing one server each need their own. */
  redisPrefix?: string;
}

type Hook = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** The tenant a lookup counts against: its key in the counters, and its own quota (null: the default). */
export interface TenantQuota {
  key: string;
  quota: number | null;
}

export interface RateLimitGuards {
  /** onRequest of the lookup: per address, failures, then per tenant (`tenantQuota` null: no such tenant). */
  lookup(tenantQuota: (req: FastifyRequest) => Promise<TenantQuota | null>): Hook;
  /** onRequest of the admin API: per address, then failures. */
  admin: Hook;
  /** onResponse of both: counts 401 and 404 answers against the address. */
  countFailure(req: FastifyRequest, reply: FastifyReply): void;
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
  remaining: number;
  resetS: number;
  /** Counted past the quota: this request is refused. */
  exceeded: boolean;
}

type Limiter = ReturnType<App['createRateLimit']>;

async function count(limiter: Limiter | null, policy: string, req: FastifyRequest, increment = true): Promise<Count | null> {
  if (limiter === null) return null;
  const result = await limiter(req, { increment });
  if (result.isAllowed) return null;
  return { policy, quota: result.max, remaining: result.remaining, resetS: Math.max(1, result.ttlInSeconds), exceeded: result.isExceeded };
}

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers): every policy that
 * applies, and the one closest to its quota.
 */
function describe(reply: FastifyReply, counts: readonly Count[]): void {
  let tightest: Count | undefined;
  for (const c of counts) if (tightest === undefined || c.remaining < tightest.remaining) tightest = c;
  if (tightest === undefined) return;
  reply.header('ratelimit-policy', counts.map((c) => `"${c.policy}";q=${c.quota};w=${RATE_LIMIT_WINDOW_S}`).join(', '));
  reply.header('ratelimit', `"${tightest.policy}";r=${tightest.remaining};t=${tightest.resetS}`);
}

function refuse(reply: FastifyReply, counts: readonly Count[], over: Count): FastifyReply {
  describe(reply, over.policy === 'failures' ? [...counts, { ...over, remaining: 0 }] : counts.map((c) => (c === over ? { ...c, remaining: 0 } : c)));
  reply.header('retry-after', String(over.resetS));
  return sendProblem(reply, 'rate_limited');
}

/**
 * Registers @fastify/rate-limit (its Redis store when `redis` is given, counters in
 * memory otherwise) and returns the hooks that enforce Dunwall's limits. A store that
 * fails lets requests through: a broken limiter must never block a user.
 */
export async function registerRateLimits(app: App, opts: RateLimitOptions): Promise<RateLimitGuards> {
  const { limits } = opts;
  await app.register(rateLimitPlugin, {
    global: false,
    skipOnError: true,
    timeWindow: RATE_LIMIT_WINDOW_MS,
    ...(opts.redis ? { redis: opts.redis, nameSpace: opts.redisPrefix ?? DEFAULT_REDIS_PREFIX } : { store: memoryWindows(opts.now) }),
  });
  const addressOf = (req: FastifyRequest): string => clientAddress(req.raw, opts.trustedProxies);
  const quotas = new WeakMap<FastifyRequest, { key: string; quota: number }>();
  const limiter = (max: number, prefix: string): Limiter | null =>
    max > 0 ? app.createRateLimit({ max, keyGenerator: (req) => `${prefix}:${addressOf(req)}` }) : null;

  const perIp = limiter(limits.lookupPerIp, 'ip');
  const admin = limiter(limits.adminPerIp, 'admin');
  const failures = limiter(limits.failuresPerIp, 'fail');
  // The quota differs by tenant: the hook resolves it and hands it over through `quotas`.
  const perTenant = app.createRateLimit({
    keyGenerator: (req) => `tenant:${quotas.get(req)?.key ?? ''}`,
    max: (req) => quotas.get(req)?.quota ?? limits.lookupPerTenant,
  });

  /**
   * The address's own quota, and its failures: past the failure quota an address is
   * refused until the window ends, whatever it sends (read only: failures are counted when
   * they are answered).
   */
  async function byAddress(req: FastifyRequest, own: Limiter | null, policy: string): Promise<{ counts: Count[]; over: Count | null }> {
    const [mine, failed] = await Promise.all([count(own, policy, req), count(failures, 'failures', req, false)]);
    const counts = mine ? [mine] : [];
    if (mine?.exceeded) return { counts, over: mine };
    return { counts, over: failed && failed.remaining === 0 ? failed : null };
  }

  return {
    lookup(tenantQuota) {
      return async (req, reply) => {
        const { counts, over } = await byAddress(req, perIp, 'ip');
        // Only once the address is within its quota does it count against the tenant's:
        // one noisy address must not use up a whole tenant's.
        const tenant = over === null ? await tenantQuota(req) : null;
        const quota = tenant === null ? 0 : (tenant.quota ?? limits.lookupPerTenant);
        if (tenant !== null && quota > 0) {
          quotas.set(req, { key: tenant.key, quota });
          const mine = await count(perTenant, 'tenant', req);
          if (mine) counts.push(mine);
        }
        const refused = over ?? counts.find((c) => c.exceeded);
        if (refused === undefined) return describe(reply, counts);
        // The snippet reads the answer cross-origin; it fails open on a 429.
        reply.header('access-control-allow-origin', '*').header('cache-control', 'no-store');
        return refuse(reply, counts, refused);
      };
    },
    admin: async (req, reply) => {
      const { counts, over } = await byAddress(req, admin, 'admin');
      if (over === null) return describe(reply, counts);
      return refuse(reply, counts, over);
    },
    countFailure(req, reply) {
      if (failures !== null && (reply.statusCode === 401 || reply.statusCode === 404)) void failures(req).catch(() => {});
    },
  };
}
