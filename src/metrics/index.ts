import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ReadModelStats } from '../readmodel/index.js';

/** Latency buckets in seconds, from a cached lookup (well under a millisecond) to a slow store. */
const LATENCY_BUCKETS_S = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export interface Metrics {
  registry: Registry;
  /** HTTP requests by route template (never a slug), method and status: plain numbers, read at scrape time. */
  http: HttpMetrics;
  /** One request answered: route template (never a slug), method, status code, seconds. */
  request(route: string, method: string, statusCode: number, seconds: number): void;
  /** Reports the read model's figures at each scrape. */
  observeReadModel(stats: () => ReadModelStats): void;
  /** Reports a figure read at each scrape as a counter (it only grows). */
  observeCounter(name: string, help: string, read: () => number): void;
  /** Reports a figure read at each scrape as a gauge (across a cluster, the largest worker's); null: not reported. */
  observeGauge(name: string, help: string, read: () => number | null): void;
  storeQuery(operation: string, seconds: number): void;
  webhookEvent(type: string, outcome: string): void;
  /**
   * Downstream webhooks, read at each scrape: attempts by outcome, and the age of the oldest
   * message still waiting (a query; across a cluster, the largest worker's answer).
   */
  observeDownstreamWebhooks(
    attempts: () => Readonly<Record<string, number>>,
    oldestPendingSeconds: () => Promise<number>,
  ): void;
}

/** One route, method and status: a count, a sum and the latency buckets, each a plain number. */
class Series {
  count = 0;
  sum = 0;
  readonly buckets = new Float64Array(LATENCY_BUCKETS_S.length);

  constructor(readonly labels: Readonly<Record<'route' | 'method' | 'status_code', string>>) {}

  observe(seconds: number): void {
    this.count += 1;
    this.sum += seconds;
    for (let i = 0; i < LATENCY_BUCKETS_S.length; i += 1) {
      if (seconds <= (LATENCY_BUCKETS_S[i] as number)) {
        (this.buckets[i] as number) += 1;
        return;
      }
    }
  }
}

/** One route and method's series, found by status code without a map or a string. */
export class RouteMetrics {
  private readonly byStatus: (Series | undefined)[] = [];

  constructor(
    private readonly route: string,
    private readonly method: string,
    private readonly all: Series[],
  ) {}

  observe(statusCode: number, seconds: number): void {
    let series = this.byStatus[statusCode];
    if (series === undefined) {
      series = new Series({ route: this.route, method: this.method, status_code: String(statusCode) });
      this.byStatus[statusCode] = series;
      this.all.push(series);
    }
    series.observe(seconds);
  }
}

/**
 * The requests counter and the latency histogram, kept as plain numbers: a request adds to
 * a count, a sum and one bucket. prom-client reads them when /metrics is scraped.
 */
export class HttpMetrics {
  private readonly all: Series[] = [];
  private readonly routes = new Map<string, RouteMetrics>();

  constructor(registry: Registry) {
    const all = this.all;
    registry.registerMetric(
      customMetric('dunwall_http_requests_total', 'HTTP requests answered', 'counter', () =>
        all.map((s) => ({ labels: s.labels, value: s.count })),
      ),
    );
    registry.registerMetric(
      customMetric('dunwall_http_request_duration_seconds', 'Time to answer an HTTP request', 'histogram', () =>
        all.flatMap((s) => {
          let cumulative = 0;
          const values: MetricValue[] = LATENCY_BUCKETS_S.map((le, i) => {
            cumulative += s.buckets[i] as number;
            return {
              metricName: 'dunwall_http_request_duration_seconds_bucket',
              labels: { ...s.labels, le },
              value: cumulative,
            };
          });
          values.push({
            metricName: 'dunwall_http_request_duration_seconds_bucket',
            labels: { ...s.labels, le: '+Inf' },
            value: s.count,
          });
          return [
            ...values,
            { metricName: 'dunwall_http_request_duration_seconds_sum', labels: s.labels, value: s.sum },
            { metricName: 'dunwall_http_request_duration_seconds_count', labels: s.labels, value: s.count },
          ];
        }),
      ),
    );
  }

  /** The series of one route template and method; hold it to record without a lookup. */
  route(route: string, method: string): RouteMetrics {
    const key = `${method} ${route}`;
    let found = this.routes.get(key);
    if (found === undefined) {
      found = new RouteMetrics(route, method, this.all);
      this.routes.set(key, found);
    }
    return found;
  }
}

type MetricValue = { labels: Record<string, string | number>; value: number; metricName?: string };

/**
 * A metric prom-client's registry reads through `get()`, as its cluster aggregator builds
 * them; the values are made at scrape time from numbers kept elsewhere.
 */
function customMetric(
  name: string,
  help: string,
  type: 'counter' | 'histogram',
  values: () => MetricValue[],
): Parameters<Registry['registerMetric']>[0] {
  const read = () => ({ name, help, type, aggregator: 'sum' as const, values: values() });
  return { name, help, type, aggregator: 'sum', get: async () => read(), reset: () => {} } as unknown as Parameters<
    Registry['registerMetric']
  >[0];
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'dunwall_' });
  const http = new HttpMetrics(registry);
  const store = new Histogram({
    name: 'dunwall_store_query_duration_seconds',
    help: 'Store reads and writes',
    labelNames: ['operation'],
    buckets: LATENCY_BUCKETS_S,
    registers: [registry],
  });
  const webhooks = new Counter({
    name: 'dunwall_webhook_events_total',
    help: 'Stripe events received, by type and outcome',
    labelNames: ['type', 'outcome'],
    registers: [registry],
  });

  return {
    registry,
    http,
    request: (route, method, statusCode, seconds) => http.route(route, method).observe(statusCode, seconds),
    observeReadModel: (stats) => observeReadModel(registry, stats),
    observeCounter: (name, help, read) =>
      void new Counter({
        name,
        help,
        registers: [registry],
        collect() {
          this.reset();
          this.inc(read());
        },
      }),
    observeGauge: (name, help, read) =>
      void new Gauge({
        name,
        help,
        registers: [registry],
        aggregator: 'max',
        collect() {
          this.reset();
          const value = read();
          if (value !== null) this.set(value);
        },
      }),
    storeQuery: (operation, seconds) => store.labels(operation).observe(seconds),
    webhookEvent: (type, outcome) => webhooks.labels(type, outcome).inc(),
    observeDownstreamWebhooks: (attempts, oldestPendingSeconds) => {
      new Counter({
        name: 'dunwall_downstream_webhook_deliveries_total',
        help: 'Delivery attempts of downstream webhooks, by outcome: delivered, failed (retried), gone (410), refused (address not allowed), gave_up',
        labelNames: ['outcome'],
        registers: [registry],
        collect() {
          this.reset();
          for (const [outcome, n] of Object.entries(attempts())) this.labels(outcome).inc(n);
        },
      });
      new Gauge({
        name: 'dunwall_downstream_webhook_oldest_pending_seconds',
        help: 'Age of the oldest downstream webhook message waiting for delivery to an enabled endpoint; 0: none waits',
        registers: [registry],
        aggregator: 'max',
        async collect() {
          this.set(await oldestPendingSeconds());
        },
      });
    },
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
  gauge(
    'dunwall_tenants_unreadable',
    'Tenants whose row or a secret of it cannot be read: their lookups answer 503 until it is fixed',
    (s) => s.unreadableTenants.length,
  );
  // Named by tenant id: the log line gives its slug. Labels never carry a slug (docs/operations.md),
  // and these series are as few as the broken rows, so an alert can say which one to fix.
  new Gauge({
    name: 'dunwall_tenant_unreadable',
    help: '1 for each tenant whose row or a secret of it cannot be read, by tenant id (the log names its slug)',
    labelNames: ['tenant_id'],
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.reset();
      for (const bad of stats().unreadableTenants) this.labels(String(bad.id)).set(1);
    },
  });
  gauge('dunwall_readmodel_subscribers', 'Known subscribers held in memory', (s) => s.subscribers);
  gauge('dunwall_readmodel_index_bytes', "Bytes of the subscriber index's arrays", (s) => s.indexBytes);
  gauge(
    'dunwall_readmodel_seconds_since_sync',
    'Seconds since the read model last read the database',
    (s) => s.sinceSyncMs / 1000,
  );
  gauge('dunwall_readmodel_last_load_seconds', 'Duration of the last full load', (s) => s.lastLoad?.seconds ?? 0);
  gauge('dunwall_readmodel_listening', '1 while the change notifications flow', (s) => (s.listening ? 1 : 0), 'sum');
  counter('dunwall_readmodel_loads_total', 'Full loads of the read model', (s) => s.loads);
  counter(
    'dunwall_readmodel_catchups_total',
    'Reads of the change log, failed ones included',
    (s) => s.catchUps.ok + s.catchUps.failed,
  );
  counter('dunwall_readmodel_catchup_failures_total', 'Reads of the change log that failed', (s) => s.catchUps.failed);
  counter(
    'dunwall_readmodel_changes_applied_total',
    'Tenant and subscriber changes applied from the change log',
    (s) => s.changesApplied,
  );
  counter(
    'dunwall_write_waits_total',
    "Writes whose answer waited for every worker's read model to show them",
    (s) => s.writeWaits.total,
  );
  counter(
    'dunwall_write_wait_timeouts_total',
    "Writes answered at the wait's bound (1 s) before every worker's read model showed them: a lookup on another worker may have read the state before",
    (s) => s.writeWaits.timedOut,
  );
}

export { AggregatorRegistry };
