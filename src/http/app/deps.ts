import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import type { ConsoleAssets } from '../../console/assets.js';
import type { DemoPage } from '../../demo/index.js';
import type { DeliverySettings } from '../../downstream/index.js';
import type { Metrics } from '../../metrics/index.js';
import type { ReadModel } from '../../readmodel/index.js';
import type { StripeApiOptions } from '../../services/stripe-api.js';
import type { Store } from '../../store/index.js';
import type { TrustedProxies } from '../client-address.js';
import type { KeyUsage, SecretKeySightings } from '../key-usage.js';
import type { PackageTarballs } from '../package-tarballs.js';
import type { RateLimits } from '../rate-limit.js';
import type { ClockSkewReading } from '../routes/health.js';
import type { StatusFeedOptions } from '../routes/statuses.js';
import type { SnippetAsset } from '../snippet-asset.js';
import type { CardExpirySource } from '../../services/stripe-events.js';
import type { StripeIntake } from '../stripe-intake.js';
import type { HttpLimits } from './limits.js';
import type { StripeLinks } from '../../services/stripe-links.js';

/** What `buildApp` is given: the store and read model, the clocks, the limits and the optional parts. */
export interface AppDeps {
  store: Store;
  /** What the lookup reads: every tenant and subscriber, in memory, kept true by the store's change log. */
  model: ReadModel;
  /** Log every lookup; default false (the hot path logs nothing when it succeeds). */
  logLookups?: boolean;
  /** Epoch milliseconds; tests pass a fake clock. */
  now?: () => number;
  /** A monotonic clock in milliseconds (how long a /readyz check is reused); default performance.now. */
  monotonicNow?: () => number;
  /** How this instance's clock stands against the database's, shown by /readyz. */
  clockSkew?: () => ClockSkewReading;
  /**
   * The SHA-256 digest of the admin token: the app never holds the token itself. null, or
   * absent with no `adminToken` either: the admin API is off.
   */
  adminTokenSha256?: Buffer | null;
  /** The token itself (tests): hashed at once, only the digest is kept. Ignored when `adminTokenSha256` is given. */
  adminToken?: string | null;
  rotationOverlapS?: number;
  /** How the endpoints of downstream messages are checked; default: https only, no private address. */
  downstream?: Pick<DeliverySettings, 'allowHttpLoopback' | 'allowedNetworks'>;
  /** The tier of a tenant created without one (DUNWALL_DEFAULT_TIER); default `starter`. */
  defaultTier?: string;
  /** A pino logger, or `false` for none (tests). */
  logger?: FastifyBaseLogger | false;
  /** The largest request body accepted, in bytes. */
  bodyLimitBytes?: number;
  /** The built browser snippet served at /snippet.js; null: not built. */
  snippet?: SnippetAsset | null;
  /** The package tarballs served at /packages/:file, by file name; null: not built. */
  packages?: PackageTarballs | null;
  /** The demo tenant's page data, when the demo exists. */
  demo?: DemoPage | null;
  /** Prometheus metrics; absent: no /metrics and nothing recorded. */
  metrics?: Metrics;
  /** The text /metrics answers; default this process's registry (a cluster's aggregates). */
  metricsText?: () => Promise<string>;
  /** False: /metrics is served on a listener of its own (`serveMetrics`), not on this app's port. Default true. */
  metricsOnPublicPort?: boolean;
  limits?: Partial<HttpLimits>;
  /** Requests per minute per address, tenant and failure; absent: no rate limits. */
  rateLimits?: RateLimits;
  /** Shares rate limit counts across instances; absent: counted in this process. */
  redis?: Redis | null;
  /** Prefix of the rate limit keys in Redis. */
  redisPrefix?: string;
  /** The status feed's bounds and clock (tests); absent: the defaults. */
  statusFeed?: Pick<StatusFeedOptions, 'limits' | 'timers'>;
  /** Where secret keys' uses are remembered for their `last_used_at`; absent: not recorded. */
  keyUsage?: KeyUsage | null;
  /** Where a secret key sent from a browser is counted, logged and marked; absent: not recorded. */
  keySightings?: SecretKeySightings | null;
  /** Where the Stripe intake (webhook and replay) is counted for the tenants' health; absent: not counted. */
  stripeIntake?: StripeIntake | null;
  /**
   * Where an `invoice.upcoming` learns the customer's default card for its notice (Stripe's
   * API with the space's key); absent: not asked, and only `customer.source.expiring` starts one.
   */
  cardExpiry?: CardExpirySource | null;
  /** Proxies trusted to name the client (Forwarded / X-Forwarded-For); absent: none. */
  trustedProxies?: TrustedProxies | null;
  /** How long a request may wait on the store in all before it answers 503 (DUNWALL_STORE_REQUEST_TIMEOUT_MS). */
  storeRequestTimeoutMs?: number;
  /**
   * Stripe's API as the service calls it with the tenants' Stripe API keys: its base URL
   * (DUNWALL_STRIPE_API_URL, checked; default https://api.stripe.com) and the bound of a call
   * (default 3 s); tests pass their timers.
   */
  stripeApi?: Partial<StripeApiOptions>;
  /** Opens pay and card links at Stripe (GET /pay/:token, /card/:token); absent: every open falls back. */
  stripeLinks?: StripeLinks;
  /** The console at /console: its built files (null: not built) and how long a session lasts (DUNWALL_CONSOLE_SESSION_TTL_MS). */
  console?: { assets: ConsoleAssets | null; sessionTtlMs?: number };
}
