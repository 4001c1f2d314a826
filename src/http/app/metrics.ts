import { observeReadModel } from '../../readmodel/index.js';
import type { App } from '../app-instance.js';
import { httpMetrics } from '../request-metrics.js';
import type { AppContext } from './context.js';

/**
 * Each request counted by route template (a slug or a customer id never becomes a label;
 * the lookups the fast path answers are counted there), and /metrics on the public port
 * unless it has a listener of its own.
 */
export function requestMetrics(app: App, ctx: AppContext): void {
  const { metrics, deps } = ctx;
  if (!metrics) return;
  observeReadModel(metrics, () => ctx.model.snapshotStats());
  const requests = httpMetrics(metrics);
  app.addHook('onResponse', (req, reply, done) => {
    requests.request(req.routeOptions.url ?? 'unmatched', req.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  if (deps.metricsOnPublicPort === false) return;
  const text = deps.metricsText ?? (() => metrics.registry.metrics());
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) =>
    reply
      .header('content-type', metrics.registry.contentType)
      .header('cache-control', 'no-store')
      .send(await text()),
  );
}
