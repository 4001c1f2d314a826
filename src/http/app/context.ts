import { sha256 } from '../../domain/keys.js';
import { resolveSession } from '../../console/session.js';
import type { Metrics } from '../../metrics/index.js';
import type { ReadModel } from '../../readmodel/index.js';
import type { Store } from '../../store/index.js';
import type { SessionAuth } from '../auth.js';
import type { TrustedProxies } from '../client-address.js';
import { LOOKUP_ROUTE, LookupAnswerer } from '../lookup.js';
import { RateLimiter } from '../rate-limit.js';
import { RequestIds } from '../request.js';
import { httpMetrics } from '../request-metrics.js';
import { DEFAULT_STRIPE_API_URL, STRIPE_REQUEST_TIMEOUT_MS } from '../../services/stripe-api.js';
import type { StripeApiOptions } from '../../services/stripe-api.js';
import type { CardExpirySource } from '../../services/stripe-events.js';
import { stripeLinks } from '../../services/stripe-links.js';
import type { StripeLinks } from '../../services/stripe-links.js';
import type { AppDeps } from './deps.js';
import { DEFAULT_HTTP_LIMITS } from './limits.js';
import type { HttpLimits } from './limits.js';

const silentLog = { info() {}, warn() {}, error() {} };

const SHA256_BYTES = 32;

/** What the app's areas share, made once from `AppDeps`. */
export interface AppContext {
  deps: AppDeps;
  store: Store;
  model: ReadModel;
  now: () => number;
  limits: HttpLimits;
  metrics: Metrics | undefined;
  requestIds: RequestIds;
  trusted: TrustedProxies | null;
  /** Null: no rate limits. */
  limiter: RateLimiter | null;
  logLookups: boolean;
  /** Answers the lookup before Fastify sees it. */
  answerer: LookupAnswerer;
  /** Null: the admin API is off. */
  adminTokenSha256: Buffer | null;
  /** The console's session cookie, standing in for the admin token or the key it was opened with. */
  sessions: SessionAuth;
  /** Where Stripe's API is and the bound of a call (DUNWALL_STRIPE_API_URL). */
  stripeApi: StripeApiOptions;
  /** Opens pay and card links at Stripe with the space's Stripe API key. */
  stripeLinks: StripeLinks;
  /** The default card's expiry, for an `invoice.upcoming`'s notice, asked with the space's key. */
  cardExpiry: CardExpirySource | null;
}

/** The admin token's digest; a clear token (tests) is hashed here and goes no further. */
function adminTokenDigest(deps: AppDeps): Buffer | null {
  const given = deps.adminTokenSha256;
  if (given === undefined)
    return deps.adminToken === undefined || deps.adminToken === null ? null : sha256(deps.adminToken);
  if (given !== null && given.length !== SHA256_BYTES)
    throw new Error(`adminTokenSha256 must be a SHA-256 digest (${SHA256_BYTES} bytes)`);
  return given;
}

function rateLimiter(deps: AppDeps, now: () => number): RateLimiter | null {
  if (!deps.rateLimits) return null;
  return new RateLimiter({
    limits: deps.rateLimits,
    redis: deps.redis ?? null,
    trustedProxies: deps.trustedProxies ?? null,
    now,
    log: deps.logger || silentLog,
    ...(deps.redisPrefix ? { redisPrefix: deps.redisPrefix } : {}),
  });
}

export function appContext(deps: AppDeps): AppContext {
  const now = deps.now ?? Date.now;
  const model = deps.model;
  const metrics = deps.metrics;
  const requestIds = new RequestIds();
  const limiter = rateLimiter(deps, now);
  const logLookups = deps.logLookups ?? false;
  const answerer = new LookupAnswerer({
    model,
    now,
    limiter,
    requestIds,
    metrics: metrics ? httpMetrics(metrics).route(LOOKUP_ROUTE, 'GET') : null,
    logLookups,
    logError: (err) => (deps.logger || silentLog).error({ err }, 'lookup failed'),
    keyUsage: deps.keyUsage ?? null,
    keySightings: deps.keySightings ?? null,
  });
  const stripeApi: StripeApiOptions = {
    apiUrl: deps.stripeApi?.apiUrl ?? DEFAULT_STRIPE_API_URL,
    timeoutMs: deps.stripeApi?.timeoutMs ?? STRIPE_REQUEST_TIMEOUT_MS,
    ...(deps.stripeApi?.timers ? { timers: deps.stripeApi.timers } : {}),
  };
  // One client for the links and the notices: what it asks, it asks with the space's own key.
  const stripe = stripeLinks({
    keys: deps.store.stripeApiKeys,
    apiUrl: stripeApi.apiUrl,
    timeoutMs: stripeApi.timeoutMs,
    now,
    log: deps.logger || silentLog,
    ...(stripeApi.timers ? { timers: stripeApi.timers } : {}),
  });
  const cardExpiry: CardExpirySource = {
    // A failed or refused call teaches nothing (null), as no answer does.
    defaultCardExpiry: async (spaceId, customerId) => {
      const asked = await stripe.defaultCardExpiry(spaceId, customerId);
      return asked.ok ? asked.expiry : null;
    },
  };
  return {
    stripeApi,
    stripeLinks: deps.stripeLinks ?? stripe,
    cardExpiry: deps.cardExpiry === undefined ? cardExpiry : deps.cardExpiry,
    deps,
    store: deps.store,
    model,
    now,
    limits: { ...DEFAULT_HTTP_LIMITS, ...deps.limits },
    metrics,
    requestIds,
    trusted: deps.trustedProxies ?? null,
    limiter,
    logLookups,
    answerer,
    adminTokenSha256: adminTokenDigest(deps),
    sessions: (id) => resolveSession(deps.store.sessions, model, id, now()),
  };
}
