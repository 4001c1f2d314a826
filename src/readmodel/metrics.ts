import { Gauge } from 'prom-client';
import type { Metrics } from '../metrics/index.js';
import type { ReadModelStats } from './read-model.js';

/**
 * The read model's figures, read at scrape time (nothing is counted on the lookup's path).
 * Every worker holds the whole model: across a cluster, sizes and ages are the largest
 * worker's, counts the sum.
 */
export function observeReadModel(metrics: Metrics, stats: () => ReadModelStats): void {
  const gauge = (name: string, help: string, read: (s: ReadModelStats) => number, aggregator: 'max' | 'sum' = 'max') =>
    metrics.observeGauge(name, help, () => read(stats()), aggregator);
  const counter = (name: string, help: string, read: (s: ReadModelStats) => number) =>
    metrics.observeCounter(name, help, () => read(stats()));
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
    registers: [metrics.registry],
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
