/**
 * The registry plumbing, and only that: a module declares its own metrics beside it (the
 * lookup's and the requests' in src/http, the read model's in src/readmodel, the delivery's
 * in src/downstream, the clocks' and the retention's in src/runtime) on the `Metrics` it is
 * given. Metric names are public: operators' dashboards and alerts read them.
 */
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

/** Latency buckets in seconds, from a cached lookup (well under a millisecond) to a slow store. */
export const LATENCY_BUCKETS_S = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export interface Metrics {
  registry: Registry;
  /**
   * A module's metrics, made by `make` on the first call for `module` and shared by the
   * later ones: an app built twice on one registry records into the same series.
   */
  declare<T>(module: string, make: (registry: Registry) => T): T;
  /** Reports a figure read at each scrape as a counter (it only grows). */
  observeCounter(name: string, help: string, read: () => number): void;
  /**
   * Reports a figure read at each scrape as a gauge (across a cluster, the largest worker's
   * unless `aggregator` says `sum`); null: not reported.
   */
  observeGauge(name: string, help: string, read: () => number | null, aggregator?: 'max' | 'sum'): void;
}

export type MetricValue = { labels: Record<string, string | number>; value: number; metricName?: string };

/**
 * A metric prom-client's registry reads through `get()`, as its cluster aggregator builds
 * them; the values are made at scrape time from numbers kept elsewhere.
 */
export function customMetric(
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
  const declared = new Map<string, unknown>();
  return {
    registry,
    declare<T>(module: string, make: (registry: Registry) => T): T {
      if (!declared.has(module)) declared.set(module, make(registry));
      return declared.get(module) as T;
    },
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
    observeGauge: (name, help, read, aggregator = 'max') =>
      void new Gauge({
        name,
        help,
        registers: [registry],
        aggregator,
        collect() {
          this.reset();
          const value = read();
          if (value !== null) this.set(value);
        },
      }),
  };
}

export { AggregatorRegistry };
