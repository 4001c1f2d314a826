import { AggregatorRegistry, Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { CacheEvents } from './cache/lookup-cache.js';
import type { SubscriberStatus, TenantAuth } from './domain/types.js';
import type { LookupSource } from './cache/lookup-source.js';

/** Latency buckets in seconds, from a cached lookup (well under a millisecond) to a slow store. */
const LATENCY_BUCKETS_S = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export interface Metrics {
  registry: Registry;
  /** One request answered: route template (never a slug), method, status code, seconds. */
  request(route: string, method: string, statusCode: number, seconds: number): void;
  cacheEvents: CacheEvents;
  storeQuery(operation: string, seconds: number): void;
  webhookEvent(type: string, outcome: string): void;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'dunwall_' });
  const requests = new Counter({ name: 'dunwall_http_requests_total', help: 'HTTP requests answered', labelNames: ['route', 'method', 'status_code'], registers: [registry] });
  const durations = new Histogram({
    name: 'dunwall_http_request_duration_seconds',
    help: 'Time to answer an HTTP request',
    labelNames: ['route', 'method', 'status_code'],
    buckets: LATENCY_BUCKETS_S,
    registers: [registry],
  });
  const cache = new Counter({ name: 'dunwall_cache_requests_total', help: 'Lookup cache reads, by map and result', labelNames: ['map', 'result'], registers: [registry] });
  const invalidations = new Counter({ name: 'dunwall_cache_invalidations_total', help: 'Lookup cache invalidations, by kind', labelNames: ['kind'], registers: [registry] });
  const store = new Histogram({ name: 'dunwall_store_query_duration_seconds', help: 'Store reads and writes', labelNames: ['operation'], buckets: LATENCY_BUCKETS_S, registers: [registry] });
  const webhooks = new Counter({ name: 'dunwall_webhook_events_total', help: 'Stripe events received, by type and outcome', labelNames: ['type', 'outcome'], registers: [registry] });

  // The labelled children of the hot path are made once, not looked up per request.
  type Child = { count: Counter.Internal; time: Histogram.Internal<string> };
  const children = new Map<string, Child>();
  const cacheChildren = {
    tenant: { hit: cache.labels('tenant', 'hit'), miss: cache.labels('tenant', 'miss'), stale: cache.labels('tenant', 'stale') },
    subscriber: { hit: cache.labels('subscriber', 'hit'), miss: cache.labels('subscriber', 'miss'), stale: cache.labels('subscriber', 'stale') },
  };

  return {
    registry,
    request(route, method, statusCode, seconds) {
      const key = `${route} ${method} ${statusCode}`;
      let child = children.get(key);
      if (child === undefined) {
        const labels = [route, method, String(statusCode)];
        child = { count: requests.labels(...labels), time: durations.labels(...labels) };
        children.set(key, child);
      }
      child.count.inc();
      child.time.observe(seconds);
    },
    cacheEvents: {
      hit: (kind) => cacheChildren[kind].hit.inc(),
      miss: (kind) => cacheChildren[kind].miss.inc(),
      stale: (kind) => cacheChildren[kind].stale.inc(),
      invalidated: (kind) => invalidations.labels(kind).inc(),
    },
    storeQuery: (operation, seconds) => store.labels(operation).observe(seconds),
    webhookEvent: (type, outcome) => webhooks.labels(type, outcome).inc(),
  };
}

/** The lookup's store reads, timed. */
export function timedSource(source: LookupSource, metrics: Metrics): LookupSource {
  const time = async <T>(operation: string, run: () => Promise<T>): Promise<T> => {
    const start = process.hrtime.bigint();
    try {
      return await run();
    } finally {
      metrics.storeQuery(operation, Number(process.hrtime.bigint() - start) / 1e9);
    }
  };
  return {
    getTenantAuth: (slug): Promise<TenantAuth | null> => time('get_tenant', () => source.getTenantAuth(slug)),
    getSubscriberStatus: (tenantId, customerId): Promise<SubscriberStatus | null> =>
      time('get_subscriber_status', () => source.getSubscriberStatus(tenantId, customerId)),
  };
}

export { AggregatorRegistry };
