import type { App } from './app-instance.js';
import { sendProblem } from './problems.js';
import type { ReadModel } from '../readmodel/index.js';
import type { Store } from '../store/store.js';

/** /readyz fails instead of hanging when the store does not answer in time. */
export const READY_TIMEOUT_MS = 2_000;

/**
 * /readyz: ready once the read model is loaded (it is before the server listens) and while
 * it may answer, and while the store answers a trivial query (webhooks and the admin API
 * write there).
 */
export async function healthRoutes(app: App, opts: { store: Store; model: ReadModel; now: () => number }): Promise<void> {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (req, reply) => {
    if (!opts.model.serving(opts.now())) return sendProblem(reply, 'store_unavailable', 'The read model has been out of touch with the store for too long.');
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        opts.store.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('store ping timed out')), READY_TIMEOUT_MS);
        }),
      ]);
      return { status: 'ok', store: opts.store.engine };
    } catch (err) {
      req.log.warn({ err: { message: (err as Error).message } }, 'readiness check failed');
      return sendProblem(reply, 'store_unavailable');
    } finally {
      clearTimeout(timer);
    }
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
