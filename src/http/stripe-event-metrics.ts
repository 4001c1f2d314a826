import { Counter, Histogram } from 'prom-client';
import { LATENCY_BUCKETS_S } from '../metrics/index.js';
import type { Metrics } from '../metrics/index.js';

/** What the Stripe intake counts of each Stripe event it is sent. */
export interface StripeEventMetrics {
  /** One Stripe event received: its type (or `other`) and what became of it. */
  stripeEvent(type: string, outcome: string): void;
  /** How long the store took to record one Stripe event. */
  recordSeconds(seconds: number): void;
}

export function stripeEventMetrics(metrics: Metrics): StripeEventMetrics {
  return metrics.declare('stripe-events', (registry) => {
    const events = new Counter({
      name: 'dunwall_webhook_events_total',
      help: 'Stripe events received, by type and outcome',
      labelNames: ['type', 'outcome'],
      registers: [registry],
    });
    // Its name and label predate the intake's own: kept, operators' dashboards read them.
    const store = new Histogram({
      name: 'dunwall_store_query_duration_seconds',
      help: 'Store reads and writes',
      labelNames: ['operation'],
      buckets: LATENCY_BUCKETS_S,
      registers: [registry],
    });
    return {
      stripeEvent: (type, outcome) => events.labels(type, outcome).inc(),
      recordSeconds: (seconds) => store.labels('record_stripe_event').observe(seconds),
    };
  });
}
