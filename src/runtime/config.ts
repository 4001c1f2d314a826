import { isIP } from 'node:net';
import type { KeyObject } from 'node:crypto';
import { boolean, encryptionKeys, integer, POSTGRES_SCHEMES, url } from './env.js';
import type { Env } from './env.js';
import { resolve } from 'node:path';
import { DEFAULT_STALE_IF_ERROR_MS } from '../readmodel/index.js';
import {
  DEFAULT_DB_CONNECT_TIMEOUT_MS,
  DEFAULT_DB_QUERY_TIMEOUT_MS,
  DEFAULT_STORE_REQUEST_TIMEOUT_MS,
} from '../store/index.js';
import { DEFAULT_CONSOLE_SESSION_TTL_MS } from '../console/session.js';
import { FORWARDING_HEADERS, parseTrustedProxies } from '../http/client-address.js';
import type { ForwardingHeader, TrustedProxies } from '../http/client-address.js';
import { DEFAULT_PER_SECRET_KEY } from '../http/rate-limit.js';
import type { RateLimits } from '../http/rate-limit.js';
import { DEFAULT_MAX_CONNECTIONS_PER_ADDRESS } from '../http/connections.js';
import { parseCidr } from '../domain/downstream-endpoints.js';
import { parsePublicUrl } from '../domain/links.js';
import { DEFAULT_TIER, TIER_NAME_PATTERN } from '../domain/types.js';
import { DEFAULT_STRIPE_API_URL, parseStripeApiUrl } from '../services/stripe-api.js';
import { DEFAULT_DELIVERY_SETTINGS } from '../downstream/index.js';
import type { DeliverySettings } from '../downstream/index.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | null;
  dataDir: string;
  adminToken: string | null;
  /** Seals HMAC and Stripe signing secrets at rest (AES-256-GCM); null: they are stored in clear. */
  encryptionKey: KeyObject | null;
  /** Previous keys, accepted for decryption only while a rotation is under way. */
  encryptionKeysOld: readonly KeyObject[];
  logLevel: LogLevel;
  rotationOverlapS: number;
  demo: boolean;
  /** Optional read replica: the read model's full loads read there. */
  databaseReadUrl: string | null;
  /** How long after its last read of the database the read model answers lookups while the database is unreachable; 0: not at all. */
  staleIfErrorMs: number;
  /** Variables of earlier versions that are set and no longer mean anything (the caller warns). */
  retiredVariables: readonly string[];
  /** Bounds every query to PostgreSQL, on the server and, for a server that cannot answer, on the client. */
  dbQueryTimeoutMs: number;
  /** Bounds every new connection to PostgreSQL. */
  dbConnectTimeoutMs: number;
  /** How long a request may wait on the store in all before it answers 503 with Retry-After. */
  storeRequestTimeoutMs: number;
  /** How long a console session lasts (DUNWALL_CONSOLE_SESSION_TTL_MS). */
  consoleSessionTtlMs: number;
  /** Log every lookup (two lines each); off by default, it is the hot path. */
  logLookups: boolean;
  /** Requests per minute; 0 turns a limit off. */
  rateLimits: RateLimits;
  /** Shares rate limit counts across instances; null: each process counts on its own. */
  redisUrl: string | null;
  /** Proxies whose Forwarded / X-Forwarded-For headers name the client; null: none. */
  trustProxy: TrustedProxies | null;
  /** Connections one address may hold open at once; 0: no cap. */
  maxConnectionsPerAddress: number;
  /** Serve /metrics on this port (of `metricsHost`) instead of the public one; null: on the public port. */
  metricsPort: number | null;
  metricsHost: string;
  /** Days processed Stripe events are kept (at least 7: Stripe redelivers for up to 3 days). */
  stripeEventsRetentionDays: number;
  /** Days history entries are kept; 0: for ever. */
  historyRetentionDays: number;
  /** Days downstream webhook messages (once delivered or failed) and attempts are kept. */
  downstreamRetentionDays: number;
  /** Days the status feed's changes are kept: a reader away for longer lists again (410). */
  statusFeedRetentionDays: number;
  /** How downstream messages are sent to the tenants' endpoints. */
  downstream: DeliverySettings;
  /**
   * The tier a tenant gets when its creation names none (the admin API, `dunwall tenant
   * create`). Its shape is checked here; that it exists, once the store is open.
   */
  defaultTier: string;
  /** Stripe's API, as the service calls it with the tenants' Stripe API keys (DUNWALL_STRIPE_API_URL). */
  stripeApiUrl: string;
  /**
   * The service's public address (DUNWALL_PUBLIC_URL, no trailing slash): pay and card links
   * through Dunwall are made from it. Null: unset; required at boot once a data space has a
   * Stripe API key (start/links.ts).
   */
  publicUrl: string | null;
}

export const DEFAULT_PORT = 3000;
export const DEFAULT_HOST = '127.0.0.1';
/** A DNS name: labels of letters, digits and inner hyphens, dot-separated (RFC 1123). */
const HOSTNAME_RE =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
export const DEFAULT_DATA_DIR = './.dunwall';
export const DEFAULT_ROTATION_OVERLAP_S = 86_400;
const TIER_NAME_RE = new RegExp(TIER_NAME_PATTERN);
/** Gone with the lookup cache: every process now holds the whole read model. */
const RETIRED_VARIABLES = ['DUNWALL_CACHE_ENTRIES', 'DUNWALL_CACHE_TTL_MS'] as const;
/** Below the HTTP request timeout (30 s), which ends a request whatever it waits on. */
export const MAX_STORE_REQUEST_TIMEOUT_MS = 25_000;
/** Fail open: an hour at most, so that a stale `lockout` cannot gate a customer for long. */
export const MAX_STALE_IF_ERROR_MS = 3_600_000;

export type { RateLimits } from '../http/rate-limit.js';

/**
 * A page makes one lookup per view and the client caches it, so these are far above what
 * any real page sends, even from a whole office behind one address; the failure limit is
 * the tight one, because only a wrong key or a guessed slug produces failures.
 */
export const DEFAULT_RATE_LIMITS: Readonly<RateLimits> = Object.freeze({
  lookupPerIp: 1_200,
  lookupPerTenant: 60_000,
  failuresPerIp: 30,
  adminPerIp: 300,
  perSecretKey: DEFAULT_PER_SECRET_KEY,
});

/**
 * A processed Stripe event's id catches a redelivery of it: Stripe redelivers for up to
 * three days, so an event is kept a week at the least. Pruning never touches what orders
 * the events (each episode's latest event, the tombstones, the invoices and payments).
 */
export const MIN_STRIPE_EVENTS_RETENTION_DAYS = 7;
export const DEFAULT_STRIPE_EVENTS_RETENTION_DAYS = 30;
/** A year of history and a month to spare; a subscriber's newest entry is kept whatever its age. */
export const DEFAULT_HISTORY_RETENTION_DAYS = 400;

/** A message is retried for three days: it is kept a day longer at the least. */
export const MIN_WEBHOOK_RETENTION_DAYS = 4;
export const DEFAULT_WEBHOOK_RETENTION_DAYS = 30;

/** A tenant's server that was down for a week resumes the status feed; one away longer lists again. */
export const DEFAULT_STATUS_FEED_RETENTION_DAYS = 7;

/** Requests per minute: a bound that still fits any counter. */
export const MAX_RATE_LIMIT = 1_000_000_000;
/** Shorter admin tokens are guessable; a generated one has 48 random base62 characters. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

function downstreamSettings(env: Env, problems: string[]): DeliverySettings {
  const allowedNetworks = (env.DUNWALL_WEBHOOK_ALLOWED_NETWORKS ?? '')
    .split(',')
    .map((text) => text.trim())
    .filter((text) => text !== '');
  for (const cidr of allowedNetworks) {
    if (parseCidr(cidr) === null)
      problems.push(
        `DUNWALL_WEBHOOK_ALLOWED_NETWORKS: ${JSON.stringify(cidr)} is not a network such as 10.0.0.0/8 or fd00::/8`,
      );
  }
  return {
    attemptTimeoutMs: integer(
      env,
      'DUNWALL_WEBHOOK_TIMEOUT_MS',
      DEFAULT_DELIVERY_SETTINGS.attemptTimeoutMs,
      100,
      60_000,
      problems,
    ),
    concurrencyPerEndpoint: integer(
      env,
      'DUNWALL_WEBHOOK_CONCURRENCY',
      DEFAULT_DELIVERY_SETTINGS.concurrencyPerEndpoint,
      1,
      64,
      problems,
    ),
    allowedNetworks: Object.freeze(allowedNetworks),
    allowHttpLoopback: boolean(
      env,
      'DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK',
      DEFAULT_DELIVERY_SETTINGS.allowHttpLoopback,
      problems,
    ),
  };
}

type Part<K extends keyof Config> = Pick<Config, K>;

/** Where the service listens (the public port, /metrics), and who may name the client. */
function listenSettings(
  env: Env,
  problems: string[],
): Part<'port' | 'host' | 'metricsPort' | 'metricsHost' | 'maxConnectionsPerAddress' | 'trustProxy'> {
  const port = integer(env, 'PORT', DEFAULT_PORT, 0, 65_535, problems);
  const host = env.HOST?.trim() || DEFAULT_HOST;
  if (isIP(host) === 0 && !HOSTNAME_RE.test(host))
    problems.push(`HOST must be an IP address or a host name such as localhost (got ${JSON.stringify(env.HOST)})`);
  const metricsPortRaw = env.METRICS_PORT?.trim() || null;
  const metricsPort = metricsPortRaw === null ? null : integer(env, 'METRICS_PORT', 0, 0, 65_535, problems);
  const metricsHost = env.METRICS_HOST?.trim() || DEFAULT_HOST;
  if (isIP(metricsHost) === 0 && !HOSTNAME_RE.test(metricsHost))
    problems.push(`METRICS_HOST must be an IP address or a host name (got ${JSON.stringify(env.METRICS_HOST)})`);
  if (metricsPort !== null && metricsPort !== 0 && metricsPort === port && metricsHost === host)
    problems.push('METRICS_PORT must differ from PORT (the point is to keep /metrics off the public port)');
  const maxConnectionsPerAddress = integer(
    env,
    'DUNWALL_MAX_CONNECTIONS_PER_ADDRESS',
    DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
    0,
    1_000_000,
    problems,
  );
  let trustProxy: TrustedProxies | null = null;
  const trustRaw = env.TRUST_PROXY?.trim() || null;
  const trustHeader = (env.TRUST_PROXY_HEADER?.trim().toLowerCase() || 'x-forwarded-for') as ForwardingHeader;
  const headerKnown = FORWARDING_HEADERS.includes(trustHeader);
  if (!headerKnown) problems.push(`TRUST_PROXY_HEADER must be one of ${FORWARDING_HEADERS.join(', ')}`);
  if (trustRaw !== null) {
    const parsed = parseTrustedProxies(trustRaw, headerKnown ? trustHeader : 'x-forwarded-for');
    if (typeof parsed === 'string') problems.push(parsed);
    else trustProxy = parsed;
  }
  return { port, host, metricsPort, metricsHost, maxConnectionsPerAddress, trustProxy };
}

/** The store (and its replica), its bounds in time, and Redis. */
function storeSettings(
  env: Env,
  problems: string[],
): Part<
  | 'databaseUrl'
  | 'databaseReadUrl'
  | 'staleIfErrorMs'
  | 'dbQueryTimeoutMs'
  | 'dbConnectTimeoutMs'
  | 'storeRequestTimeoutMs'
  | 'redisUrl'
  | 'dataDir'
> {
  const databaseUrl = url(env, 'DATABASE_URL', POSTGRES_SCHEMES, problems);
  const databaseReadUrl = url(env, 'DATABASE_READ_URL', POSTGRES_SCHEMES, problems);
  const staleIfErrorMs = integer(
    env,
    'DUNWALL_STALE_IF_ERROR_MS',
    DEFAULT_STALE_IF_ERROR_MS,
    0,
    MAX_STALE_IF_ERROR_MS,
    problems,
  );
  const dbQueryTimeoutMs = integer(
    env,
    'DUNWALL_DB_QUERY_TIMEOUT_MS',
    DEFAULT_DB_QUERY_TIMEOUT_MS,
    100,
    600_000,
    problems,
  );
  const dbConnectTimeoutMs = integer(
    env,
    'DUNWALL_DB_CONNECT_TIMEOUT_MS',
    DEFAULT_DB_CONNECT_TIMEOUT_MS,
    100,
    600_000,
    problems,
  );
  const storeRequestTimeoutMs = integer(
    env,
    'DUNWALL_STORE_REQUEST_TIMEOUT_MS',
    DEFAULT_STORE_REQUEST_TIMEOUT_MS,
    100,
    MAX_STORE_REQUEST_TIMEOUT_MS,
    problems,
  );
  const redisUrl = url(env, 'REDIS_URL', ['redis', 'rediss'], problems);
  return {
    databaseUrl,
    databaseReadUrl,
    staleIfErrorMs,
    dbQueryTimeoutMs,
    dbConnectTimeoutMs,
    storeRequestTimeoutMs,
    redisUrl,
    dataDir: resolve(env.DUNWALL_DATA_DIR?.trim() || DEFAULT_DATA_DIR),
  };
}

/** Requests per minute per address, tenant, failure and secret key. */
function rateLimitSettings(env: Env, problems: string[]): RateLimits {
  const rateLimits: RateLimits = {
    lookupPerIp: integer(
      env,
      'DUNWALL_RATE_LIMIT_LOOKUP_PER_IP',
      DEFAULT_RATE_LIMITS.lookupPerIp,
      0,
      MAX_RATE_LIMIT,
      problems,
    ),
    lookupPerTenant: integer(
      env,
      'DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT',
      DEFAULT_RATE_LIMITS.lookupPerTenant,
      0,
      MAX_RATE_LIMIT,
      problems,
    ),
    failuresPerIp: integer(
      env,
      'DUNWALL_RATE_LIMIT_FAILURES_PER_IP',
      DEFAULT_RATE_LIMITS.failuresPerIp,
      0,
      MAX_RATE_LIMIT,
      problems,
    ),
    adminPerIp: integer(
      env,
      'DUNWALL_RATE_LIMIT_ADMIN_PER_IP',
      DEFAULT_RATE_LIMITS.adminPerIp,
      0,
      MAX_RATE_LIMIT,
      problems,
    ),
    perSecretKey: integer(
      env,
      'DUNWALL_RATE_LIMIT_PER_SECRET_KEY',
      DEFAULT_PER_SECRET_KEY,
      0,
      MAX_RATE_LIMIT,
      problems,
    ),
  };
  return Object.freeze(rateLimits);
}

/** Days each kind of row is kept. */
function retentionSettings(
  env: Env,
  problems: string[],
): Part<'stripeEventsRetentionDays' | 'historyRetentionDays' | 'downstreamRetentionDays' | 'statusFeedRetentionDays'> {
  const stripeEventsRetentionDays = integer(
    env,
    'DUNWALL_STRIPE_EVENTS_RETENTION_DAYS',
    DEFAULT_STRIPE_EVENTS_RETENTION_DAYS,
    MIN_STRIPE_EVENTS_RETENTION_DAYS,
    36_500,
    problems,
  );
  const historyRetentionDays = integer(
    env,
    'DUNWALL_HISTORY_RETENTION_DAYS',
    DEFAULT_HISTORY_RETENTION_DAYS,
    0,
    36_500,
    problems,
  );
  const downstreamRetentionDays = integer(
    env,
    'DUNWALL_WEBHOOK_RETENTION_DAYS',
    DEFAULT_WEBHOOK_RETENTION_DAYS,
    MIN_WEBHOOK_RETENTION_DAYS,
    36_500,
    problems,
  );
  const statusFeedRetentionDays = integer(
    env,
    'DUNWALL_STATUS_FEED_RETENTION_DAYS',
    DEFAULT_STATUS_FEED_RETENTION_DAYS,
    1,
    36_500,
    problems,
  );
  return { stripeEventsRetentionDays, historyRetentionDays, downstreamRetentionDays, statusFeedRetentionDays };
}

/** The admin token, the keys that seal the stored secrets, and how long a rotated secret still verifies. */
function secretSettings(
  env: Env,
  problems: string[],
): Part<'adminToken' | 'encryptionKey' | 'encryptionKeysOld' | 'rotationOverlapS' | 'consoleSessionTtlMs'> {
  const adminToken = env.DUNWALL_ADMIN_TOKEN?.trim() || null;
  if (adminToken !== null && adminToken.length < MIN_ADMIN_TOKEN_LENGTH) {
    problems.push(`DUNWALL_ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters long`);
  }
  const { encryptionKey, encryptionKeysOld } = encryptionKeys(env, problems);
  const rotationOverlapS = integer(
    env,
    'DUNWALL_ROTATION_OVERLAP_S',
    DEFAULT_ROTATION_OVERLAP_S,
    0,
    31_536_000,
    problems,
  );
  // A quarter of an hour to a week: long enough to work, short enough that a forgotten session ends.
  const consoleSessionTtlMs = integer(
    env,
    'DUNWALL_CONSOLE_SESSION_TTL_MS',
    DEFAULT_CONSOLE_SESSION_TTL_MS,
    900_000,
    7 * 86_400_000,
    problems,
  );
  return {
    adminToken,
    encryptionKey,
    encryptionKeysOld: Object.freeze(encryptionKeysOld),
    rotationOverlapS,
    consoleSessionTtlMs,
  };
}

/** The logs, the default tier, the demo. */
function behaviourSettings(
  env: Env,
  problems: string[],
): Part<'logLevel' | 'logLookups' | 'defaultTier' | 'demo' | 'retiredVariables' | 'stripeApiUrl'> {
  const logLevel = (env.LOG_LEVEL?.trim() || 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel))
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got ${JSON.stringify(env.LOG_LEVEL)})`);
  const logLookupsRaw = env.DUNWALL_LOG_LOOKUPS?.trim() ?? '0';
  if (!['0', '1', ''].includes(logLookupsRaw))
    problems.push(`DUNWALL_LOG_LOOKUPS must be 0 or 1 (got ${JSON.stringify(env.DUNWALL_LOG_LOOKUPS)})`);
  const defaultTier = env.DUNWALL_DEFAULT_TIER?.trim() || DEFAULT_TIER;
  if (!TIER_NAME_RE.test(defaultTier))
    problems.push(
      `DUNWALL_DEFAULT_TIER must be a tier name such as growth (got ${JSON.stringify(env.DUNWALL_DEFAULT_TIER)})`,
    );
  const demoRaw = env.DUNWALL_DEMO?.trim() ?? '1';
  if (!['0', '1', ''].includes(demoRaw))
    problems.push(`DUNWALL_DEMO must be 0 or 1 (got ${JSON.stringify(env.DUNWALL_DEMO)})`);
  // The key travels in every call: https, or http to this machine only (a local stand-in).
  const stripeApi = parseStripeApiUrl(env.DUNWALL_STRIPE_API_URL?.trim() || DEFAULT_STRIPE_API_URL);
  if (!stripeApi.ok) problems.push(`DUNWALL_STRIPE_API_URL ${stripeApi.problem}`);
  return {
    stripeApiUrl: stripeApi.ok ? stripeApi.url : DEFAULT_STRIPE_API_URL,
    logLevel,
    logLookups: logLookupsRaw === '1',
    defaultTier,
    demo: demoRaw !== '0',
    retiredVariables: Object.freeze(RETIRED_VARIABLES.filter((name) => env[name] !== undefined)),
  };
}

/** DUNWALL_PUBLIC_URL: https, or http for a loopback address only (domain/links.ts). */
function publicUrlSetting(env: Env, problems: string[]): string | null {
  const raw = env.DUNWALL_PUBLIC_URL?.trim() ?? '';
  if (raw === '') return null;
  const parsed = parsePublicUrl(raw);
  if (parsed.ok) return parsed.url;
  problems.push(`DUNWALL_PUBLIC_URL ${parsed.why} (got ${JSON.stringify(raw)})`);
  return null;
}

/** Reads and validates the environment once, at boot: every problem is reported, not just the first. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const listen = listenSettings(env, problems);
  const config: Config = {
    ...listen,
    ...storeSettings(env, problems),
    rateLimits: rateLimitSettings(env, problems),
    ...retentionSettings(env, problems),
    downstream: Object.freeze(downstreamSettings(env, problems)),
    ...secretSettings(env, problems),
    ...behaviourSettings(env, problems),
    publicUrl: publicUrlSetting(env, problems),
  };
  if (config.databaseReadUrl !== null && config.databaseUrl === null)
    problems.push('DATABASE_READ_URL needs DATABASE_URL (the embedded store has no replica)');
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}
