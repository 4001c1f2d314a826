import type { Logger } from 'pino';
import { DownstreamDeliverer } from '../../downstream/index.js';
import { observeDelivery } from '../../downstream/metrics.js';
import type { Metrics } from '../../metrics/index.js';
import type { Store } from '../../store/index.js';
import type { Config } from '../config.js';
import { observePolicyClock } from '../policy-clock.js';
import type { PolicyClock } from '../policy-clock.js';
import { observeRetention, Retention } from '../retention.js';
import { startLinkRenewal } from './links.js';

export interface Background {
  stop(): Promise<void>;
}

/**
 * The work no request starts, once the app listens: the retention's pruning, the delivery
 * of downstream messages, the policy clock (due lockouts are recorded, and a policy
 * change begins to go through its tenant's subscribers, within a tick), and the renewal of
 * pay links before they expire.
 */
export function startBackground(parts: {
  config: Config;
  store: Store;
  log: Logger;
  policyClock: PolicyClock;
  metrics: Metrics;
}): Background {
  const { config, store, log, policyClock, metrics } = parts;
  const retention = new Retention({
    maintenance: store.maintenance,
    stripeEventsDays: config.stripeEventsRetentionDays,
    historyDays: config.historyRetentionDays,
    downstreamDays: config.downstreamRetentionDays,
    statusFeedDays: config.statusFeedRetentionDays,
    log,
  }).start();
  const deliverer = new DownstreamDeliverer({ queue: store.downstream.queue, ...config.downstream, log }).start();
  policyClock.start();
  const linkRenewal = startLinkRenewal({ store, log });
  // A change this instance commits is sent at once; others' within the poll interval.
  const stopWaking = store.changes.onCommit(() => deliverer.wake());

  observeDelivery(metrics, deliverer, async () => {
    const oldest = await store.downstream.queue.oldestPendingAt().catch(() => null);
    return oldest === null ? 0 : Math.max(0, (Date.now() - oldest.getTime()) / 1000);
  });
  observePolicyClock(metrics, policyClock);
  observeRetention(metrics, retention);
  return {
    async stop() {
      await retention.stop();
      stopWaking();
      await policyClock.stop();
      await linkRenewal.stop();
      await deliverer.stop();
    },
  };
}
