import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ReadModelStats } from './readmodel/index.js';

/** Latency buckets in seconds, from a cached lookup (well under a millisecond) to a slow store. */
const LATENCY_BUCKETS_S = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export interface Metrics {
  registry: Registry;
  /** One request answered: route template (never a slug), method, status code, seconds. */
  request(route: string, method: string, statusCode: number, seconds: number): void;
  /** Reports the read model's figures at each scrape. */
  observeReadModel(stats: () => ReadModelStats): void;
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
  const store = new Histogram({ name: 'dunwall_store_query_duration_seconds', help: 'Store reads and writes', labelNames: ['operation'], buckets: LATENCY_BUCKETS_S, registers: [registry] });
  const webhooks = new Counter({ name: 'dunwall_webhook_events_total', help: 'Stripe events received, by type and outcome', labelNames: ['type', 'outcome'], registers: [registry] });

  // The labelled children of the hot path are made once, not looked up per request.
  type Child = { count: Counter.Internal; time: Histogram.Internal<string> };
  const children = new Map<string, Child>();

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
    observeReadModel: (stats) => observeReadModel(registry, stats),
    storeQuery: (operation, seconds) => store.labels(operation).observe(seconds),
    webhookEvent: (type, outcome) => webhooks.labels(type, outcome).inc(),
  };
}

/**
 * The read model's figures, read at scrape time (nothing is counted on the lookup's path).
 * Every worker holds the whole model: across a cluster, sizes and ages are the largest
 * worker's, counts the sum.
 */
function observeReadModel(registry: Registry, stats: () => ReadModelStats): void {
  const gauge = (name: string, help: string, read: (s: ReadModelStats) => number, aggregator: 'max' | 'sum' = 'max') =>
    new Gauge({
      name,
      help,
      registers: [registry],
      aggregator,
      collect() {
        this.set(read(stats()));
      },
    });
  const counter = (name: string, help: string, read: (s: ReadModelStats) => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read(stats()));
      },
    });
  gauge('dunwall_readmodel_tenants', 'Tenants held in memory', (s) => s.tenants);
  gauge('dunwall_readmodel_subscribers', 'Known subscribers held in memory', (s) => s.subscribers);
  gauge('dunwall_readmodel_index_bytes', "Bytes of the subscriber index's arrays", (s) => s.indexBytes);
  gauge('dunwall_readmodel_seconds_since_sync', 'Seconds since the read model last read the database', (s) => s.sinceSyncMs / 1000);
  gauge('dunwall_readmodel_last_load_seconds', 'Duration of the last full load', (s) => s.lastLoad?.seconds ?? 0);
  gauge('dunwall_readmodel_listening', '1 while the change notifications flow', (s) => (s.listening ? 1 : 0), 'sum');
  counter('dunwall_readmodel_loads_total', 'Full loads of the read model', (s) => s.loads);
  counter('dunwall_readmodel_catchups_total', 'Reads of the change log, failed ones included', (s) => s.catchUps.ok + s.catchUps.failed);
  counter('dunwall_readmodel_catchup_failures_total', 'Reads of the change log that failed', (s) => s.catchUps.failed);
  counter('dunwall_readmodel_changes_applied_total', 'Tenant and subscriber changes applied from the change log', (s) => s.changesApplied);
}

export { AggregatorRegistry };
