import { customMetric, LATENCY_BUCKETS_S } from '../metrics/index.js';
import type { Metrics, MetricValue } from '../metrics/index.js';
import type { Registry } from 'prom-client';

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

  /** One request answered: route template (never a slug), method, status code, seconds. */
  request(route: string, method: string, statusCode: number, seconds: number): void {
    this.route(route, method).observe(statusCode, seconds);
  }
}

/** HTTP requests by route template (never a slug), method and status, on this registry. */
export function httpMetrics(metrics: Metrics): HttpMetrics {
  return metrics.declare('http', (registry) => new HttpMetrics(registry));
}
