import { Counter, Gauge } from 'prom-client';
import type { Metrics } from '../metrics/index.js';
import type { DownstreamDeliverer } from './index.js';

/**
 * The delivery of downstream messages, read at each scrape: attempts by outcome, attempts
 * cut to give a slot away, and the age of the oldest message still waiting (a query; across
 * a cluster, the largest worker's answer).
 */
export function observeDelivery(
  metrics: Metrics,
  deliverer: Pick<DownstreamDeliverer, 'counts' | 'cuts'>,
  oldestPendingSeconds: () => Promise<number>,
): void {
  new Counter({
    name: 'dunwall_downstream_webhook_deliveries_total',
    help: 'Delivery attempts of downstream webhooks, by outcome: delivered, failed (retried), gone (410), refused (address not allowed), gave_up',
    labelNames: ['outcome'],
    registers: [metrics.registry],
    collect() {
      this.reset();
      for (const [outcome, n] of Object.entries(deliverer.counts)) this.labels(outcome).inc(n);
    },
  });
  new Gauge({
    name: 'dunwall_downstream_webhook_oldest_pending_seconds',
    help: 'Age of the oldest downstream webhook message waiting for delivery to an enabled endpoint; 0: none waits',
    registers: [metrics.registry],
    aggregator: 'max',
    async collect() {
      this.set(await oldestPendingSeconds());
    },
  });
  metrics.observeCounter(
    'dunwall_downstream_webhook_attempts_cut_total',
    'Downstream webhook attempts cut after 5 s without an answer, every slot being taken, to give the slot to a tenant holding none',
    () => deliverer.cuts,
  );
}
