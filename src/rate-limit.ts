import rateLimitPlugin from '@fastify/rate-limit';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Redis } from 'ioredis';
import type { App } from './app-instance.js';
import { Lru } from './lru.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import type { RateLimits } from './config.js';
import { ERRORS, PROBLEM_CONTENT_TYPE, problem } from './errors.js';
import type { ErrorCode } from './errors.js';
import { sendProblem } from './http.js';

/** Every limit counts requests in fixed windows of one minute, from a key's first request. */
export const RATE_LIMIT_WINDOW_MS = 60_000;
const RATE_LIMIT_WINDOW_S = RATE_LIMIT_WINDOW_MS / 1000;
/**
 * Addresses and tenants counted at once in memory; past it, one not counted since the
 * eviction hand last passed is forgotten (a busy one too, once this many others keep
 * arriving: such a flood comes from more addresses than a per-address limit can hold).
 */
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

type Maybe<T> = T | Promise<T>;

/** What one limit has counted for a key in the current window. */
interface Count {
  /** The policy as the RateLimit-Policy field names it, quota and window included. */
  policy: string;
  name: string;
  quota: number;
  /** Requests counted in this window, this one included when it was counted. */
  current: number;
  resetS: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The counts of the request's address, for the RateLimit fields of its answer. */
    rateLimitCounts: Count[] | null;
    /** The address the request is counted under, once worked out. */
    rateLimitAddress: string | null;
  }
}

export interface RateLimitGuards {
  /** onRequest of the lookup and its preflight: the address's quota, and its failures. */
  lookup(req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void;
  /**
   * The tenant's quota, counted once the key has proved the request is the tenant's own
   * (so that nobody without it can use the quota up). True: refused, the 429 is sent.
   */
  tenant(req: FastifyRequest, reply: FastifyReply, tenantKey: string, quota: number | null): Maybe<boolean>;
  /**
   * A lookup about to answer `code`: a 401 or 404 counts as a failure. True: that was one
   * failure too many, and the answer must be the 429 instead (its fields are set).
   */
  lookupFailure(req: FastifyRequest, reply: FastifyReply, code: ErrorCode): Maybe<boolean>;
  /** onRequest of the admin API: the address's quota, and its failures. */
  admin(req: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  /** onSend of the admin API: a 401 counts as a failure (a 404 after a valid token is no guess). */
  adminFailure(req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown>;
}

/** Counts (or, with `increment` false, reads) a request under `key`; null: not counted. */
type Counter = (req: FastifyRequest, key: string, quota: number, increment: boolean) => Maybe<{ current: number; resetS: number } | null>;

/**
 * Counts in this process, synchronously: the lookup's hot path pays a few map operations
 * and no promise. Windows run on the injected clock, so tests move time, never sleep.
 */
function memoryCounter(now: () => number): Counter {
  const windows = new Lru<string, { count: number; endMs: number }>(MEMORY_WINDOWS_MAX);
  return (_req, key, _quota, increment) => {
    const nowMs = now();
    let window = windows.get(key, nowMs);
    if (increment) {
      if (window === undefined) {
        window = { count: 0, endMs: nowMs + RATE_LIMIT_WINDOW_MS };
        windows.set(key, window, window.endMs);
      }
      window.count += 1;
    }
    if (window === undefined) return { current: 0, resetS: RATE_LIMIT_WINDOW_S };
    return { current: window.count, resetS: Math.max(1, Math.ceil((window.endMs - nowMs) / 1000)) };
  };
}

/**
 * Counts in Redis through @fastify/rate-limit (its Redis store: one atomic script per
 * count), shared by every instance. A failed count lets the request through, and Redis is
 * not asked again for REDIS_RETRY_INTERVAL_MS.
 */
function redisCounter(app: App, now: () => number, log: FastifyBaseLogger): Counter {
  const asked = new WeakMap<FastifyRequest, { key: string; quota: number }>();
  const limiter = app.createRateLimit({
    keyGenerator: (req) => asked.get(req)?.key ?? '',
    max: (req) => asked.get(req)?.quota ?? 0,
  });
  let down = false;
  let retryAtMs = 0;
  return async (req, key, quota, increment) => {
    if (down && now() < retryAtMs) return null;
    // Two counts of one request run at once: each gets its own object to read from.
    const own = Object.create(req) as FastifyRequest;
    asked.set(own, { key, quota });
    try {
      const result = await limiter(own, { increment });
      if (down) log.info('rate limit store available again');
      down = false;
      if (result.isAllowed) return null;
      // `remaining` stops at 0: past the quota, all that is known is that it is past.
      return { current: result.isExceeded ? result.max + 1 : result.max - result.remaining, resetS: Math.max(1, result.ttlInSeconds) };
    } catch (err) {
      retryAtMs = now() + REDIS_RETRY_INTERVAL_MS;
      if (!down) log.warn({ err: { message: (err as Error).message } }, 'rate limit store unavailable: requests go uncounted until it is back');
      down = true;
      return null;
    }
  };
}

const remaining = (c: Count): number => Math.max(0, c.quota - c.current);

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers): every policy that
 * applies, and the one closest to its quota (or `named`, the one that refused).
 */
function describe(reply: FastifyReply, counts: readonly Count[], named?: Count): void {
  let tightest = named;
  let policies = '';
  for (const c of counts) {
    if (named === undefined && (tightest === undefined || remaining(c) < remaining(tightest))) tightest = c;
    policies = policies === '' ? c.policy : `${policies}, ${c.policy}`;
  }
  if (tightest === undefined) return;
  reply.header('ratelimit-policy', policies);
  reply.header('ratelimit', `"${tightest.name}";r=${tightest === named ? 0 : remaining(tightest)};t=${tightest.resetS}`);
}

function refusalFields(reply: FastifyReply, counts: readonly Count[], over: Count): void {
  describe(reply, counts.includes(over) ? counts : [...counts, over], over);
  reply.header('retry-after', String(over.resetS));
}

/** Runs `then` on a value at once, or once it arrives; a failure on the way goes to `fail`. */
function settle<T>(value: Maybe<T>, then: (v: T) => void, fail: (err: unknown) => void): void {
  if (value instanceof Promise) value.then(then).catch(fail);
  else then(value);
}

function policyText(name: string, quota: number): string {
  return `"${name}";q=${quota};w=${RATE_LIMIT_WINDOW_S}`;
}

/**
 * Registers @fastify/rate-limit and returns the hooks that enforce Dunwall's limits:
 * counted in Redis through the plugin's store when `redis` is given, in this process
 * otherwise. A count that fails lets the request through: a broken limiter must never
 * block a user.
 */
export async function registerRateLimits(app: App, opts: RateLimitOptions): Promise<RateLimitGuards> {
  const { limits, now, log } = opts;
  await app.register(rateLimitPlugin, {
    global: false,
    timeWindow: RATE_LIMIT_WINDOW_MS,
    ...(opts.redis ? { redis: opts.redis, nameSpace: opts.redisPrefix ?? DEFAULT_REDIS_PREFIX } : {}),
  });
  app.decorateRequest('rateLimitCounts', null);
  app.decorateRequest('rateLimitAddress', null);
  const addressOf = (req: FastifyRequest): string => (req.rateLimitAddress ??= clientAddress(req.raw, opts.trustedProxies));
  const counter = opts.redis ? redisCounter(app, now, log) : memoryCounter(now);
  const policies = {
    ip: policyText('ip', limits.lookupPerIp),
    admin: policyText('admin', limits.adminPerIp),
    failures: policyText('failures', limits.failuresPerIp),
    tenant: policyText('tenant', limits.lookupPerTenant),
  };

  function hit(req: FastifyRequest, name: keyof typeof policies, key: string, quota: number, increment: boolean): Maybe<Count | null> {
    if (quota <= 0) return null;
    const policy = quota === limits.lookupPerTenant || name !== 'tenant' ? policies[name] : policyText(name, quota);
    const counted = counter(req, `${name}:${key}`, quota, increment);
    const toCount = (c: { current: number; resetS: number } | null): Count | null => (c === null ? null : { policy, name, quota, current: c.current, resetS: c.resetS });
    // A count that fails counts nothing: the request goes on (fail open).
    return counted instanceof Promise ? counted.then(toCount, () => null) : toCount(counted);
  }

  /**
   * The address's own quota, and its failures: past the failure quota an address is
   * refused until the window ends, whatever it sends (read only here: failures are counted
   * as they are answered). True: refused, with the fields of the refusal set.
   */
  function refusedByAddress(req: FastifyRequest, reply: FastifyReply, name: 'ip' | 'admin', quota: number): Maybe<boolean> {
    const address = addressOf(req);
    const mine = hit(req, name, address, quota, true);
    const failed = hit(req, 'failures', address, limits.failuresPerIp, false);
    const decide = ([m, f]: [Count | null, Count | null]): boolean => {
      const counts = m ? [m] : [];
      // The failure policy is named once it applies: once the address has failed at all.
      if (f && f.current > 0) counts.push(f);
      const over = m && m.current > m.quota ? m : f && remaining(f) === 0 ? f : null;
      if (over !== null) {
        refusalFields(reply, counts, over);
        return true;
      }
      req.rateLimitCounts = counts;
      describe(reply, counts);
      return false;
    };
    if (mine instanceof Promise || failed instanceof Promise) return Promise.all([mine, failed]).then(decide);
    return decide([mine, failed]);
  }

  /** Counts a failure as it is answered; one past the quota is answered 429 instead, so that a burst sent at once is held too. */
  function failure(req: FastifyRequest, reply: FastifyReply, status: number, counted: readonly number[]): Maybe<boolean> {
    if (!counted.includes(status)) return false;
    const decide = (f: Count | null): boolean => {
      if (f === null || f.current <= f.quota) return false;
      reply.removeHeader('www-authenticate');
      refusalFields(reply, req.rateLimitCounts ?? [], f);
      return true;
    };
    const failed = hit(req, 'failures', addressOf(req), limits.failuresPerIp, true);
    return failed instanceof Promise ? failed.then(decide) : decide(failed);
  }

  return {
    lookup(req, reply, done) {
      let decided = false;
      settle(
        refusedByAddress(req, reply, 'ip', limits.lookupPerIp),
        (refused) => {
          decided = true;
          if (!refused) return done();
          // The snippet reads the answer cross-origin; it fails open on a 429.
          reply.header('access-control-allow-origin', '*').header('cache-control', 'no-store');
          sendProblem(reply, 'rate_limited');
        },
        (err) => {
          // A limiter that breaks lets the lookup through rather than failing it.
          log.error({ err: { message: (err as Error).message } }, 'rate limit check failed');
          if (!decided) done();
        },
      );
    },
    tenant(req, reply, tenantKey, own) {
      const mine = hit(req, 'tenant', tenantKey, own ?? limits.lookupPerTenant, true);
      const decide = (m: Count | null): boolean => {
        if (m === null) return false;
        const counts = [...(req.rateLimitCounts ?? []), m];
        if (m.current <= m.quota) {
          describe(reply, counts);
          return false;
        }
        refusalFields(reply, counts, m);
        sendProblem(reply, 'rate_limited');
        return true;
      };
      return mine instanceof Promise ? mine.then(decide) : decide(mine);
    },
    lookupFailure: (req, reply, code) => failure(req, reply, ERRORS[code].status, [401, 404]),
    admin: async (req, reply) => ((await refusedByAddress(req, reply, 'admin', limits.adminPerIp)) ? sendProblem(reply, 'rate_limited') : undefined),
    async adminFailure(req, reply, payload) {
      if (!(await failure(req, reply, reply.statusCode, [401]))) return payload;
      reply.code(429).header('content-type', PROBLEM_CONTENT_TYPE);
      return JSON.stringify(problem('rate_limited'));
    },
  };
}
