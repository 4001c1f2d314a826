import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import { buildApp } from '../../http/index.js';
import type { App } from '../../http/index.js';
import type { Metrics } from '../../metrics/index.js';
import type { ReadModel } from '../../readmodel/index.js';
import type { Store } from '../../store/index.js';
import type { Config } from '../config.js';
import type { PolicyClock } from '../policy-clock.js';
import type { StripeLinks } from '../../services/stripe-links.js';
import type { Assets } from './assets.js';
import type { CounterFlushes } from './counters.js';

/** The app of this process, built from the configuration and the parts `start` made. */
export function buildConfiguredApp(
  config: Config,
  parts: {
    store: Store;
    model: ReadModel;
    log: Logger;
    metrics: Metrics;
    metricsText: (() => Promise<string>) | undefined;
    adminTokenSha256: Buffer | null;
    assets: Assets;
    redis: Redis | null;
    counters: CounterFlushes;
    policyClock: PolicyClock;
    stripeLinks?: StripeLinks;
  },
): Promise<App> {
  const { store, model, log, metrics, metricsText, adminTokenSha256, assets, redis, counters, policyClock } = parts;
  return buildApp({
    store,
    clockSkew: () => policyClock.skew(),
    keyUsage: counters.keyUsage,
    keySightings: counters.keySightings,
    stripeIntake: counters.stripeIntake,
    metrics,
    ...(metricsText ? { metricsText } : {}),
    model,
    logLookups: config.logLookups,
    adminTokenSha256,
    rotationOverlapS: config.rotationOverlapS,
    downstream: config.downstream,
    logger: log,
    snippet: assets.snippet,
    packages: assets.packages,
    demo: assets.demo,
    rateLimits: config.rateLimits,
    redis,
    trustedProxies: config.trustProxy,
    limits: { maxConnectionsPerAddress: config.maxConnectionsPerAddress },
    storeRequestTimeoutMs: config.storeRequestTimeoutMs,
    metricsOnPublicPort: config.metricsPort === null,
    defaultTier: config.defaultTier,
    stripeApi: { apiUrl: config.stripeApiUrl },
    console: { assets: assets.console, sessionTtlMs: config.consoleSessionTtlMs },
    ...(parts.stripeLinks ? { stripeLinks: parts.stripeLinks } : {}),
  });
}
